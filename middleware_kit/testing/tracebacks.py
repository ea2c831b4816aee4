"""Tracebacks without the engine's plumbing: the frames a user wrote, and where they were called from.

Engine frames (the drivers, the chain, the node runner) set ``__tracebackhide__ = True``, the convention pytest
honours: a failing test's report shows the user's hook, not five layers of engine around it. Outside pytest,
:func:`format_user_traceback` applies the same rule to any exception (for logs, notebooks, bug reports).
"""

from __future__ import annotations

import traceback
from types import TracebackType

__all__ = ["format_user_traceback", "visible_frames"]


def _hidden(tb: TracebackType) -> bool:
    value = tb.tb_frame.f_locals.get("__tracebackhide__", tb.tb_frame.f_globals.get("__tracebackhide__", False))
    return bool(value(tb) if callable(value) else value)


def visible_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The frames of ``exc``'s traceback that do not declare ``__tracebackhide__`` (outermost first)."""
    frames: list[traceback.FrameSummary] = []
    tb = exc.__traceback__
    while tb is not None:
        if not _hidden(tb):
            frames.extend(traceback.extract_tb(tb, limit=1))
        tb = tb.tb_next
    return frames


def format_user_traceback(exc: BaseException) -> str:
    """``exc`` formatted like Python does, without the frames that declare ``__tracebackhide__``."""
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(visible_frames(exc))]
    return "".join(lines + traceback.format_exception_only(type(exc), exc))
