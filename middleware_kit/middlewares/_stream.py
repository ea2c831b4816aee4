"""Progress events of the bundled middlewares, on LangGraph's custom stream (``stream_mode="custom"``).

Private helper shared by the bundled middlewares: each event is a dict with an ``"event"`` key and the name of the
``"middleware"`` that sent it. Outside a graph (a hook called directly, a hand-built request without a runtime) the
event is dropped.
"""

from __future__ import annotations

from typing import Any

__all__ = ["emit"]


def emit(runtime: Any, event: dict[str, Any]) -> None:
    """Write ``event`` to the custom stream of the run ``runtime`` belongs to (no-op outside a run)."""
    writer = getattr(runtime, "stream_writer", None)
    if writer is None:
        from langgraph.config import get_stream_writer

        try:
            writer = get_stream_writer()
        except RuntimeError:  # not inside a runnable: nobody is listening
            return
    writer(event)
