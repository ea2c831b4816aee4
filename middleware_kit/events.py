"""Typed events on LangGraph's custom stream (``stream_mode="custom"``): what middlewares and the engine report.

Every event is an :class:`Event`: a frozen, read-only ``dict`` (so ``ev["event"]``, ``ev.get("attempt")``,
``dict(ev)``, ``ev == {...}`` and JSON encoders keep working) holding the event name under ``"event"``, the
sender under ``"middleware"`` and the payload keys, plus typed attributes that are *not* dict keys: ``hook``,
``run_id``, ``thread_id``, ``seq`` (per run, monotonic) and ``timestamp``.

Where the metadata comes from
    * ``thread_id``: ``runtime.execution_info.thread_id``, else ``configurable.thread_id`` of the LangGraph config.
    * ``run_id``: the ``run_id`` given in the config of ``invoke``/``stream`` (LangGraph's server always gives one),
      else ``metadata.run_id``, else an id minted for the run on its first event (a UUID, stable for the run).
      Both ids are read once per run, at its first event, and kept with its sequence counter.
    * ``seq``: a counter per run, starting at 0. It is kept next to the run's stream writer (the one object LangGraph
      creates once per run and hands to every task of that run, subgraphs included), in a weak-keyed table: the
      counter disappears with the run (no cleanup to call, nothing shared between runs or agents), and the number is
      assigned and the event written under one per-run lock, so the order of ``seq`` is the order of delivery, also
      with parallel tool calls. Outside a run there is no writer and the event is dropped (``emit`` returns None).
    * ``hook``: given by the caller, else the hook the engine is running (:func:`hook_scope`), else the nearest
      hook method on the call stack (``before_model``, ``awrap_tool_call``, ...), else None.
    * ``timestamp``: ``time.time()`` (seconds since the epoch) when the event was emitted.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, NoReturn

from middleware_kit.errors import MiddlewareError
from middleware_kit.hooks import GUARDS, HOOKS

__all__ = [
    "DISCARDED",
    "LIFECYCLE_CONFIG_KEY",
    "LIFECYCLE_EVENTS",
    "RUN_CANCELLED",
    "RUN_FAILED",
    "RUN_FINISHED",
    "RUN_STARTED",
    "Event",
    "EventError",
    "RunLifecycle",
    "emit",
    "emit_discarded",
    "hook_scope",
    "run_lifecycle",
]

RUN_STARTED: Final = "run_started"
"""The agent run began (payload: ``agent``)."""
RUN_FINISHED: Final = "run_finished"
"""The run ended normally (payload: ``agent``, ``model_calls``, ``tool_calls``, ``duration_s``, ``model_s``,
``tool_s``)."""
RUN_FAILED: Final = "run_failed"
"""The run raised (payload: the ``run_finished`` counts plus ``error`` (the exception's type name) and ``message``)."""
RUN_CANCELLED: Final = "run_cancelled"
"""The run was cancelled (task cancellation, or a run-control cancel) (payload: the counts plus ``reason``)."""
DISCARDED: Final = "discarded"
"""Tokens already streamed by a model attempt that then failed are void (payload: ``message_id`` of the streamed
chunks, ``model_run_id``, ``error``): a UI should drop the chunks whose message id is ``message_id``."""
LIFECYCLE_EVENTS: Final = (RUN_STARTED, RUN_FINISHED, RUN_FAILED, RUN_CANCELLED, DISCARDED)
"""The events the framework itself sends (``middleware`` is None on them)."""
LIFECYCLE_CONFIG_KEY: Final = "lifecycle_events"
"""The ``configurable`` key that turns the ``run_*`` lifecycle events on for a run
(``{"configurable": {"lifecycle_events": True}}``); off by default, so existing custom streams keep their shape."""

_RESERVED: Final = frozenset({"event", "middleware"})
_HOOK_METHODS: Final = frozenset(
    name for hook in (*HOOKS, *GUARDS) for name in (hook, "a" + hook)
)
"""The methods whose frames name the hook an event was sent from: every hook of ``HOOKS`` and the guards."""
_STACK_DEPTH: Final = 40


class EventError(MiddlewareError, ValueError):
    """An event that cannot be sent (an empty name, or a payload key that is reserved)."""


def _read_only(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is frozen: copy it with dict(event) to change it")


class Event(dict[str, Any]):
    """One event on the custom stream: a frozen dict of ``event``, ``middleware`` and the payload, plus metadata.

    Read it as a dict (``ev["event"]``, ``ev["attempt"]``, ``dict(ev)``); the metadata are attributes that are not
    keys, so ``ev == {"event": "retry", ...}`` compares the content only.
    """

    __slots__ = ("hook", "run_id", "seq", "thread_id", "timestamp")

    hook: str | None
    """The hook that sent it (``wrap_model_call``, ``before_model`` ...), None when unknown."""
    run_id: str | None
    """The run it belongs to (see the module docstring for where it comes from)."""
    thread_id: str | None
    """The conversation thread (``configurable.thread_id``), None without a checkpointer thread."""
    seq: int
    """Position in the run, from 0; strictly increasing in delivery order within one run."""
    timestamp: float
    """``time.time()`` when it was emitted."""

    def __init__(
        self,
        content: Mapping[str, Any],
        *,
        hook: str | None = None,
        run_id: str | None = None,
        thread_id: str | None = None,
        seq: int = 0,
        timestamp: float | None = None,
    ) -> None:
        name = content.get("event")
        if not isinstance(name, str) or not name:
            raise EventError(
                f"an event needs a non-empty string under 'event', got {name!r}; "
                "write emit(runtime, {'event': 'my_event', 'middleware': self.name, ...})",
                middleware=str(content.get("middleware") or "emit"),
                hook="event",
            )
        super().__init__(content)
        object.__setattr__(self, "hook", hook)
        object.__setattr__(self, "run_id", run_id)
        object.__setattr__(self, "thread_id", thread_id)
        object.__setattr__(self, "seq", seq)
        object.__setattr__(self, "timestamp", time.time() if timestamp is None else timestamp)

    @property
    def event(self) -> str:
        """The event name (``ev["event"]``)."""
        return str(dict.__getitem__(self, "event"))

    @property
    def middleware(self) -> str | None:
        """The middleware that sent it (``ev["middleware"]``), None for framework events."""
        value = dict.get(self, "middleware")
        return None if value is None else str(value)

    @property
    def payload(self) -> Mapping[str, Any]:
        """Every key but ``event`` and ``middleware``, read-only."""
        return MappingProxyType({k: v for k, v in self.items() if k not in _RESERVED})

    def meta(self) -> dict[str, Any]:
        """The metadata as a dict: ``hook``, ``run_id``, ``thread_id``, ``seq``, ``timestamp``."""
        return {"hook": self.hook, "run_id": self.run_id, "thread_id": self.thread_id, "seq": self.seq,
                "timestamp": self.timestamp}

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"Event is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Event is frozen: cannot delete {name!r}")

    __setitem__ = _read_only
    __delitem__ = _read_only
    __ior__ = _read_only
    clear = _read_only
    pop = _read_only
    popitem = _read_only
    setdefault = _read_only
    update = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (dict(self), self.meta()))

    def __copy__(self) -> Event:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Event:
        import copy

        return Event(copy.deepcopy(dict(self), memo), **self.meta())

    def __repr__(self) -> str:
        where = f"{self.middleware}.{self.hook}" if self.hook else str(self.middleware)
        return f"Event#{self.seq}({dict.__repr__(self)}, from={where}, run_id={self.run_id!r})"


def _rebuild(content: dict[str, Any], meta: dict[str, Any]) -> Event:
    return Event(content, **meta)


# -- per-run sequence numbers, kept next to the run's stream writer ---------------------------------------------------
@dataclass(slots=True)
class _RunSequence:
    run_id: str
    thread_id: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: Iterator[int] = field(default_factory=itertools.count)
    lifecycles: dict[str, RunLifecycle] = field(default_factory=dict)
    """One per agent invocation in the run, by the agent's checkpoint namespace ("" for the root graph): an agent
    used as a subgraph shares the parent's stream writer but has a lifecycle of its own."""


class _Sequences:
    """``writer -> _RunSequence``; weak keys, so an entry lives exactly as long as its run's writer."""

    def __init__(self) -> None:
        self._by_writer: weakref.WeakKeyDictionary[Any, _RunSequence] = weakref.WeakKeyDictionary()
        self._by_id: dict[int, _RunSequence] = {}  # writers that cannot be weakly referenced (bounded, see below)
        self._lock = threading.Lock()

    def of(self, writer: Any, runtime: Any) -> _RunSequence:
        """The run's entry; its ids are read once, when the run's first event (or lifecycle) creates it."""
        try:
            found = self._by_writer.get(writer)
        except TypeError:  # not weakly referenceable (a builtin bound method such as list.append)
            return self._strong(writer, runtime)
        if found is None:
            fresh = _new_run(runtime)
            with self._lock:
                found = self._by_writer.setdefault(writer, fresh)
        return found

    def _strong(self, writer: Any, runtime: Any) -> _RunSequence:
        with self._lock:
            found = self._by_id.get(id(writer))
            if found is None:
                if len(self._by_id) >= 256:  # oldest first: such writers come from hand-made runtimes in tests
                    del self._by_id[next(iter(self._by_id))]
                found = self._by_id[id(writer)] = _new_run(runtime)
            return found


def _new_run(runtime: Any) -> _RunSequence:
    run_id, thread_id = _ids(runtime)
    return _RunSequence(run_id or str(uuid.uuid4()), thread_id)


_SEQUENCES: Final = _Sequences()


# -- the hook being run ----------------------------------------------------------------------------------------------
_CURRENT_HOOK: ContextVar[tuple[str, str] | None] = ContextVar("middleware_kit_current_hook", default=None)


@contextmanager
def hook_scope(middleware: str, hook: str) -> Iterator[None]:
    """Mark ``middleware.hook`` as running (for the engine): events sent meanwhile carry ``hook``."""
    token = _CURRENT_HOOK.set((middleware, hook))
    try:
        yield
    finally:
        _CURRENT_HOOK.reset(token)


def enter_hook(middleware: str, hook: str) -> Token[tuple[str, str] | None]:
    """:func:`hook_scope`'s set, for the engine's hot path (pair it with :func:`leave_hook`)."""
    return _CURRENT_HOOK.set((middleware, hook))


def leave_hook(token: Token[tuple[str, str] | None]) -> None:
    _CURRENT_HOOK.reset(token)


def _hook_on_stack() -> str | None:
    frame: Any = sys._getframe(2)  # skip _hook_on_stack and _send
    for _ in range(_STACK_DEPTH):
        if frame is None:
            return None
        name: str = frame.f_code.co_name
        if name in _HOOK_METHODS:
            return name[1:] if name[1:] in _HOOK_METHODS else name
        frame = frame.f_back
    return None


# -- sending -----------------------------------------------------------------------------------------------------------
def _writer_of(runtime: Any) -> Any:
    writer = getattr(runtime, "stream_writer", None)
    if writer is None:
        from langgraph.config import get_stream_writer

        try:
            writer = get_stream_writer()
        except RuntimeError:  # not inside a runnable: nobody is listening
            return None
    return writer


def _ids(runtime: Any) -> tuple[str | None, str | None]:
    """(run_id, thread_id) of the current run, from the runtime, else LangGraph's config."""
    info = getattr(runtime, "execution_info", None)
    run_id = getattr(info, "run_id", None)
    thread_id = getattr(info, "thread_id", None)
    if run_id is None or thread_id is None:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:
            return run_id, thread_id
        if run_id is None:
            given = config.get("run_id") or config.get("metadata", {}).get("run_id")
            run_id = None if given is None else str(given)
        if thread_id is None:
            tid = config.get("configurable", {}).get("thread_id")
            thread_id = None if tid is None else str(tid)
    return run_id, None if thread_id is None else str(thread_id)


_SILENT: ContextVar[bool] = ContextVar("middleware_kit_events_silent", default=False)


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """No event is sent while this is open: for the engine's own second pass over a value (the call ledger guarding
    a tool's result before it records it), which must not report again what the run already reported."""
    token = _SILENT.set(True)
    try:
        yield
    finally:
        _SILENT.reset(token)


def _send(runtime: Any, content: Mapping[str, Any], hook: str | None) -> Event | None:
    if _SILENT.get():
        return None
    writer = _writer_of(runtime)
    if writer is None:
        return None
    if hook is None:
        current = _CURRENT_HOOK.get()
        hook = current[1] if current is not None else _hook_on_stack()
    elif not hook:  # framework events: no hook, and no search for one
        hook = None
    run = _SEQUENCES.of(writer, runtime)
    with run.lock:
        event = Event(content, hook=hook, run_id=run.run_id, thread_id=run.thread_id, seq=next(run.counter))
        writer(event)
    return event


def emit(
    event_name: str,
    payload: Mapping[str, Any] | None = None,
    *,
    middleware: str | None,
    hook: str | None,
    runtime: Any = None,
) -> Event | None:
    """Send an :class:`Event` on the custom stream of the current run; returns it, or None outside a run.

    ``runtime`` is the hook's ``runtime`` (node hooks) or ``request.runtime`` (chains); without it, LangGraph's
    context of the current run is used. The payload keys become keys of the event, next to ``event`` and
    ``middleware``; ``hook=None`` lets the framework find the running hook.

    Raises:
        EventError: ``event_name`` is empty, or the payload uses the reserved keys ``event``/``middleware``.
    """
    body = dict(payload or {})
    clash = _RESERVED & body.keys()
    if clash:
        raise EventError(
            f"emit({event_name!r}): the payload key(s) {sorted(clash)} are reserved; pass the sender as "
            "middleware=... and rename the payload key",
            middleware=middleware or "emit",
            hook="payload",
        )
    if not isinstance(event_name, str) or not event_name:
        raise EventError(
            f"emit(): the event name must be a non-empty string, got {event_name!r}",
            middleware=middleware or "emit",
            hook="event_name",
        )
    return _send(runtime, {"event": event_name, "middleware": middleware, **body}, hook)


def emit_dict(runtime: Any, content: Mapping[str, Any]) -> Event | None:
    """Send a ready ``{"event": ..., "middleware": ..., ...}`` dict as an :class:`Event` (for the bundled helper)."""
    return _send(runtime, content, None)


def emit_discarded(
    runtime: Any, *, message_id: str | None, model_run_id: str | None, error: BaseException
) -> Event | None:
    """Mark the chunks streamed under ``message_id`` void: their model attempt raised ``error`` (engine call)."""
    return emit(
        DISCARDED,
        {"message_id": message_id, "model_run_id": model_run_id, "error": type(error).__name__},
        middleware=None,
        hook="wrap_model_call",
        runtime=runtime,
    )


class RunLifecycle:
    """The lifecycle events of one agent run, with its counts and durations (for the engine).

    Create one per run (``RunLifecycle(agent_name)``), call :meth:`started` when the run begins, the ``count_*``
    methods after each model or tool call, and exactly one of :meth:`finished`, :meth:`failed` or
    :meth:`cancelled` at the end (later calls are ignored). Thread-safe: parallel tool calls may count at once.
    """

    __slots__ = (
        "_ended", "_lock", "_model_calls", "_model_s", "_start", "_started", "_tool_calls", "_tool_s", "agent"
    )

    @classmethod
    def of(cls, runtime: Any, agent: str | None, key: str = "") -> RunLifecycle:
        """The lifecycle of the run ``runtime`` belongs to, created on first use (kept next to the run's stream
        writer, like the sequence numbers: every node of the run gets the same object, and it goes with the run).
        ``key`` tells apart agent invocations sharing a writer (an agent used as a subgraph). Outside a run: a
        fresh, unshared one."""
        writer = _writer_of(runtime)
        if writer is None:
            return cls(agent)
        run = _SEQUENCES.of(writer, runtime)
        with run.lock:
            found = run.lifecycles.get(key)
            if found is None:
                found = run.lifecycles[key] = cls(agent)
            return found

    def __init__(self, agent: str | None) -> None:
        self.agent = agent
        self._lock = threading.Lock()
        self._start = time.perf_counter()
        self._model_calls = 0
        self._tool_calls = 0
        self._model_s = 0.0
        self._tool_s = 0.0
        self._ended = False
        self._started = False

    def started(self, runtime: Any = None) -> Event | None:
        """Send ``run_started`` (once: later calls, from the run's other nodes, do nothing)."""
        with self._lock:
            if self._started:
                return None
            self._started = True
            self._start = time.perf_counter()
        return emit(RUN_STARTED, {"agent": self.agent}, middleware=None, hook="", runtime=runtime)

    @property
    def ended(self) -> bool:
        """Whether a closing event (finished, failed or cancelled) was sent."""
        return self._ended

    def count_model_call(self, seconds: float) -> None:
        with self._lock:
            self._model_calls += 1
            self._model_s += seconds

    def count_tool_call(self, seconds: float) -> None:
        with self._lock:
            self._tool_calls += 1
            self._tool_s += seconds

    def stats(self) -> dict[str, Any]:
        """The counts and durations so far (the payload of the closing event)."""
        with self._lock:
            return {
                "agent": self.agent,
                "model_calls": self._model_calls,
                "tool_calls": self._tool_calls,
                "duration_s": round(time.perf_counter() - self._start, 6),
                "model_s": round(self._model_s, 6),
                "tool_s": round(self._tool_s, 6),
            }

    def _end(self, name: str, extra: Mapping[str, Any], runtime: Any) -> Event | None:
        with self._lock:
            if self._ended:
                return None
            self._ended = True
        return emit(name, {**self.stats(), **extra}, middleware=None, hook="", runtime=runtime)

    def finished(self, runtime: Any = None) -> Event | None:
        return self._end(RUN_FINISHED, {}, runtime)

    def failed(self, error: BaseException, runtime: Any = None) -> Event | None:
        return self._end(RUN_FAILED, {"error": type(error).__name__, "message": str(error)[:500]}, runtime)

    def cancelled(self, reason: str, runtime: Any = None, details: Mapping[str, Any] | None = None) -> Event | None:
        """Send ``run_cancelled`` (``details``: more payload keys, e.g. run control's ``thread_id`` and
        ``elapsed``)."""
        return self._end(RUN_CANCELLED, {**(details or {}), "reason": reason}, runtime)


def run_lifecycle(runtime: Any, config: Mapping[str, Any] | None) -> RunLifecycle | None:
    """For the engine: the lifecycle of the agent invocation a node of ``config`` belongs to, or None when the run
    did not ask for lifecycle events (``configurable`` key :data:`LIFECYCLE_CONFIG_KEY`). Cheap when off: two
    dict lookups."""
    if not config:
        return None
    configurable = config.get("configurable")
    if not configurable or not configurable.get(LIFECYCLE_CONFIG_KEY):
        return None
    namespace = str(configurable.get("checkpoint_ns") or "")
    metadata = config.get("metadata") or {}
    agent = metadata.get("lc_agent_name")
    return RunLifecycle.of(runtime, None if agent is None else str(agent), namespace.rpartition("|")[0])
