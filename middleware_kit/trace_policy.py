"""What a middleware's hook runs record in traces: ``TracePolicy``, ``AgentMiddleware.trace_policy`` and
:func:`configure_trace_policy` (the same public names and behaviour as LangChain 1.5's
``langchain.agents.middleware``).

Every hook of a traced run is its own langchain-core run named ``"{middleware}.{hook}"`` (see
:mod:`middleware_kit._engine.tracing`). A :class:`TracePolicy` shapes what those runs *record*: ``process_inputs``
gets the
hook's input (the state for a node hook, the request for a wrap hook) and returns what the tracer records;
``process_outputs`` the same for what the hook returned. ``omit_payload`` records an empty payload, keeping the
run and its timing (e.g. to keep a long conversation out of every hook run; the messages stay on the chat-model
run inside).

Which policy applies to a middleware's hook runs: its own ``trace_policy`` when set (wholesale, no field-level
merge), else the process-wide default set with :func:`configure_trace_policy`, else none (payloads recorded as they
are). Resolved when a traced hook runs, so the default may be set before or after agents are built.

As in LangGraph, the processed payload goes to *tracers* (``BaseTracer`` handlers such as LangSmith's
``LangChainTracer``); other callback handlers (and the event streams of ``astream_events``/``astream_log``) see the
real values. A processor never changes what the hook receives or returns; if it raises, the payload is recorded
unprocessed (and the error logged). Not a redaction tool: use the LangSmith client's ``hide_inputs``/
``hide_outputs``/``anonymizer`` to redact every run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langgraph.types import TracePolicy, omit_payload

__all__ = [
    "TracePolicy",
    "config_callbacks_active",
    "configure_trace_policy",
    "omit_payload",
    "resolve_trace_policy",
]

_log = logging.getLogger(__name__)

_default: TracePolicy | None = None
_lock = threading.Lock()


def configure_trace_policy(policy: TracePolicy | None) -> None:
    """Set the process-wide default :class:`TracePolicy` for middleware hook runs (``None`` clears it).

    Call once at startup. A middleware's own ``trace_policy`` overrides it wholesale (no field-level merge).

    Raises:
        TypeError: ``policy`` is neither a ``TracePolicy`` nor None.
    """
    global _default
    if policy is not None and not isinstance(policy, TracePolicy):
        raise TypeError(
            f"configure_trace_policy() takes a TracePolicy or None, got {type(policy).__name__}; "
            "write configure_trace_policy(TracePolicy(process_inputs=omit_payload))"
        )
    with _lock:
        _default = policy


def resolve_trace_policy(middleware: Any) -> TracePolicy | None:
    """The policy for ``middleware``'s hook runs: its own ``trace_policy``, else the process-wide default."""
    own = getattr(middleware, "trace_policy", None)
    return own if isinstance(own, TracePolicy) else _default


def recorded(value: Any, process: Callable[[Any], Any] | None) -> Any:
    """What a tracer records for ``value``: ``process(value)``, or ``value`` itself when there is no processor or
    it raised (a processor never breaks a run)."""
    if process is None:
        return value
    try:
        return process(value)
    except Exception:
        _log.exception("trace_policy processor raised; the hook run records the unprocessed payload")
        return value


def config_callbacks_active(config: Mapping[str, Any] | None) -> bool:
    """Whether a run with this config has any callback handler (a manager with handlers, or a non-empty list)."""
    if not config:
        return False
    callbacks = config.get("callbacks")
    if callbacks is None:
        return False
    if isinstance(callbacks, BaseCallbackManager):
        return bool(callbacks.handlers)
    return bool(callbacks)
