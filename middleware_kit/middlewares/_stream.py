"""Progress events of the bundled middlewares, on LangGraph's custom stream (``stream_mode="custom"``).

Helper shared by the bundled middlewares: each event is written as a dict with an ``"event"`` key and the name of
the ``"middleware"`` that sent it. It reaches the stream as a :class:`middleware_kit.events.Event`: the same keys
(read it like the dict), plus the run id, thread id, sequence number, timestamp and hook as attributes. Outside a
graph (a hook called directly, a hand-built request without a runtime) the event is dropped.

Every event name passed here must be listed in ``docs/observability.md`` (a test scans the bundled middlewares).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from middleware_kit.events import Event, emit_dict

__all__ = ["emit"]


def emit(runtime: Any, event: Mapping[str, Any]) -> Event | None:
    """Write ``event`` to the custom stream of the run ``runtime`` belongs to (no-op outside a run)."""
    return emit_dict(runtime, event)
