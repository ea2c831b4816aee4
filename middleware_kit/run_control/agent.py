"""``ControlledAgent`` / ``with_run_control``: a compiled agent whose runs take the thread's lease first.

``Pregel.invoke`` and ``ainvoke`` run through ``self.stream`` / ``self.astream`` (as do ``stream_events`` v3 and the
v3 streaming API), so overriding those two puts every run under control. The order inside a run:

1. take the thread's lease (reject or wait, :mod:`~middleware_kit.run_control.lease`) -- before anything reads the
   thread's state, so two runs never read the same checkpoint and no turn is lost;
2. start the heartbeat (lease renewal, cross-process cancel requests);
3. admit the input under the lease: a resume must answer a pending interrupt (else ``NothingToResumeError``,
   ``InterruptAlreadyResolvedError`` or ``UnknownInterruptError``, and nothing runs); the interrupts it answers are
   recorded as resolved by this run; new input while an interrupt is pending follows ``on_pending_input``
   (``"queue"``: the input is held in the lease's database and the call returns the thread as it is);
4. run the graph with the run's :class:`~middleware_kit.run_control.control.RunHandle` in its config;
5. with ``on_pending_input="queue"``, once no interrupt is pending, run the held inputs in arrival order (each a new
   turn, streamed by this same call), until one pauses again;
6. release the lease (only if still ours), then raise ``RunDeadlineExceededError`` / ``RunCancelledError`` if the
   policy says so (the thread was closed cleanly by ``RunControlMiddleware`` first).

Everything else is the compiled graph's own: ``with_run_control`` makes a shallow copy of its attributes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from typing import Any, Self, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from middleware_kit.run_control.control import HANDLE_KEY, OWNER, RunControl, RunHandle
from middleware_kit.run_control.errors import (
    InterruptAlreadyResolvedError,
    NothingToResumeError,
    PendingApprovalError,
    RunCancelledError,
    RunControlConfigError,
    RunDeadlineExceededError,
    UnknownInterruptError,
)
from middleware_kit.run_control.lease import Call, LeaseBackend, LeaseStep, acquire_flow, adrive, backend_for, drive

__all__ = ["ControlledAgent", "acancel_run", "cancel_run", "with_run_control"]

INTERRUPT = "__interrupt__"
_HEX = frozenset("0123456789abcdef")

_LOCAL: dict[tuple[int, str], RunHandle] = {}
_LOCAL_LOCK = threading.Lock()
LEASE_LOST = "its lease expired and another run took the thread over"


def _pending_ids(checkpoint: Any) -> list[str]:
    """Ids of the interrupts pending in a checkpoint tuple (its pending ``__interrupt__`` writes)."""
    ids: list[str] = []
    for _task, channel, value in getattr(checkpoint, "pending_writes", None) or ():
        if channel != INTERRUPT:
            continue
        for item in value if isinstance(value, (list, tuple)) else (value,):
            interrupt_id = getattr(item, "id", None)
            if isinstance(interrupt_id, str) and interrupt_id not in ids:
                ids.append(interrupt_id)
    return ids


def _targeted(resume: Any) -> list[str] | None:
    """The interrupt ids a ``Command(resume={id: value, ...})`` answers (LangGraph's own test), else None."""
    if isinstance(resume, dict) and resume and all(
        isinstance(k, str) and len(k) == 32 and set(k) <= _HEX for k in resume
    ):
        return list(resume)
    return None


class _Target:
    """What an admission flow calls: the lease backend's operations plus the thread's latest checkpoint."""

    def __init__(self, backend: LeaseBackend, saver: BaseCheckpointSaver[Any], config: RunnableConfig) -> None:
        self.backend = backend
        self.saver = saver
        self.config = config

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def _probe(self) -> bool:
        return not (self.config.get("configurable") or {}).get("checkpoint_id")

    def pending(self, quick: bool = False) -> list[str]:
        """Ids of the interrupts pending on the thread; ``quick``: a cheap probe first (new input, usually none)."""
        if quick and self._probe() and not self.backend.may_have_interrupt(self.config["configurable"]["thread_id"]):
            return []
        return _pending_ids(self.saver.get_tuple(self.config))

    async def apending(self, quick: bool = False) -> list[str]:
        thread_id = self.config["configurable"]["thread_id"]
        if quick and self._probe() and not await self.backend.amay_have_interrupt(thread_id):
            return []
        return _pending_ids(await self.saver.aget_tuple(self.config))


def admit_flow(input: Any, handle: RunHandle) -> Generator[LeaseStep, Any, bool]:
    """Decide, under the lease, whether ``input`` may run (see the module doc, step 3); False: it was queued."""
    control, thread_id = handle.control, handle.thread_id
    is_resume = isinstance(input, Command) and input.resume is not None
    is_new = input is not None and not isinstance(input, Command)
    if not is_resume and not is_new:
        return True
    pending: list[str] = yield Call("pending", (is_new,))
    if is_new:
        if not pending:
            return True
        if control.on_pending_input == "reject":
            raise PendingApprovalError(thread_id, pending)
        if control.on_pending_input == "queue":
            yield Call("push_input", (thread_id, input))
            return False
        yield Call("record_resolved", (thread_id, pending, handle.run_id))  # abandoned by this run
        return True
    resume = cast(Command[Any], input).resume
    targeted = _targeted(resume)
    answering = pending if targeted is None else targeted
    missing = [i for i in answering if i not in pending] if targeted is not None else []
    if missing or not pending:
        resolved = dict((yield Call("resolved", (thread_id,))))
        if targeted is None:
            if resolved:
                newest = next(iter(resolved))
                raise InterruptAlreadyResolvedError(thread_id, newest, resolved[newest])
            raise NothingToResumeError(thread_id)
        for interrupt_id in missing:
            if interrupt_id in resolved:
                raise InterruptAlreadyResolvedError(thread_id, interrupt_id, resolved[interrupt_id])
        raise UnknownInterruptError(thread_id, missing[0], pending)
    yield Call("record_resolved", (thread_id, answering, handle.run_id))
    return True


def held_chunks(graph: Any, kwargs: dict[str, Any], values: dict[str, Any], interrupts: Sequence[Any],
                event: dict[str, Any]) -> list[Any]:
    """What a run that only queued its input streams: the thread as it is (``values``, with the pending
    interrupts as an ``updates`` chunk, so ``invoke`` returns them in ``__interrupt__``) and an ``input_queued``
    custom event, in the shape ``stream_mode``/``subgraphs``/``version`` ask for."""
    mode = kwargs.get("stream_mode") or graph.stream_mode
    modes = [mode] if isinstance(mode, str) else list(mode)
    keys = kwargs.get("output_keys") or graph.output_channels
    shown = {k: v for k, v in values.items() if k in keys} if not isinstance(keys, str) else values.get(keys)
    payloads = {"updates": {INTERRUPT: tuple(interrupts)}, "values": shown, "custom": event}
    chunks: list[Any] = []
    for m in modes:
        if m not in payloads:
            continue
        if kwargs.get("version") == "v2":
            part: dict[str, Any] = {"type": m, "ns": (), "data": payloads[m]}
            if m == "values":
                part["interrupts"] = tuple(interrupts)
            chunks.append(part)
            continue
        chunk: Any = payloads[m] if isinstance(mode, str) else (m, payloads[m])
        if kwargs.get("subgraphs"):
            chunk = ((), chunk) if isinstance(mode, str) else ((), *chunk)
        chunks.append(chunk)
    return chunks


def _held_event(handle: RunHandle, pending: Sequence[Any]) -> dict[str, Any]:
    return {"event": "input_queued", "middleware": "RunControl", "thread_id": handle.thread_id,
            "waiting_for": [i.id for i in pending]}


def _outcome(handle: RunHandle) -> None:
    if handle.stop_kind == "deadline" and handle.control.on_deadline == "raise":
        raise RunDeadlineExceededError(handle.thread_id, handle.run_id, cast(float, handle.control.deadline))
    if handle.stop_kind == "cancelled" and handle.control.on_cancel == "raise":
        raise RunCancelledError(handle.thread_id, handle.run_id, handle.stop_reason)


def _beat(handle: RunHandle, alive: bool, reason: str | None) -> None:
    if reason:
        handle.stop("cancelled", reason)
    elif not alive:
        handle.stop("cancelled", LEASE_LOST)


def _register(backend: LeaseBackend, handle: RunHandle) -> None:
    with _LOCAL_LOCK:
        _LOCAL[(id(backend), handle.thread_id)] = handle


def _unregister(backend: LeaseBackend, handle: RunHandle) -> None:
    with _LOCAL_LOCK:
        if _LOCAL.get((id(backend), handle.thread_id)) is handle:
            del _LOCAL[(id(backend), handle.thread_id)]


def _stop_local(backend: LeaseBackend, thread_id: str, run_id: str | None, reason: str) -> str | None:
    with _LOCAL_LOCK:
        handle = _LOCAL.get((id(backend), thread_id))
    if handle is None or (run_id is not None and handle.run_id != run_id):
        return None
    handle.stop("cancelled", reason)
    return handle.run_id


class ControlledAgent(CompiledStateGraph[Any, Any, Any, Any]):
    """A compiled agent whose runs are under :class:`RunControl` (built by :func:`with_run_control`).

    A drop-in for the compiled graph: every method and attribute is the graph's own; ``stream``/``astream`` (and so
    ``invoke``/``ainvoke``) take the thread's lease first. Adds :meth:`cancel` / :meth:`acancel`.
    """

    run_control: RunControl

    def copy(self, update: dict[str, Any] | None = None) -> Self:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(update or {})
        return new

    # -- plumbing ----------------------------------------------------------------------------------------------
    def _controlled(self, config: RunnableConfig | None) -> tuple[LeaseBackend | None, RunHandle] | None:
        """(lease backend, the run's handle); backend None: no thread to lease (no checkpointer of ours: deadline
        checks only); None: not controlled here (a subgraph of a run that holds the lease)."""
        configurable = self._configurable(config)
        if configurable.get("checkpoint_ns"):
            return None
        thread_id = configurable.get("thread_id")
        saver = self.checkpointer
        backend = backend_for(saver) if isinstance(saver, BaseCheckpointSaver) and thread_id is not None else None
        run_id = str((config or {}).get("run_id") or uuid.uuid4())
        return backend, RunHandle(str(thread_id), run_id, self.run_control, backend)

    def _lease(self, handle: RunHandle) -> Generator[LeaseStep, Any, None]:
        control = self.run_control
        return acquire_flow(handle.thread_id, handle.run_id, OWNER, ttl=control.ttl,
                            wait=control.on_conflict == "wait", wait_timeout=control.wait_timeout,
                            poll=control.poll_interval)

    def _configurable(self, config: RunnableConfig | None) -> dict[str, Any]:
        """The run's ``configurable`` (the agent's own, then the call's): all the lease needs of the config,
        without the cost of ``merge_configs`` (callbacks, tags) on every invoke."""
        return {**((self.config or {}).get("configurable") or {}), **((config or {}).get("configurable") or {})}

    def _target(self, backend: LeaseBackend, config: RunnableConfig | None) -> _Target:
        checkpoint = {k: v for k, v in self._configurable(config).items()
                      if k in ("thread_id", "checkpoint_ns", "checkpoint_id")}
        return _Target(backend, cast(BaseCheckpointSaver[Any], self.checkpointer),
                       cast(RunnableConfig, {"configurable": checkpoint}))

    @staticmethod
    def _with_handle(config: RunnableConfig | None, handle: RunHandle) -> RunnableConfig:
        """The call's config with the run's handle (and its id as the root run's id, for tracing)."""
        out: dict[str, Any] = dict(config or {})
        out["configurable"] = {**(out.get("configurable") or {}), HANDLE_KEY: handle}
        if out.get("run_id") is None and _is_uuid(handle.run_id):
            out["run_id"] = uuid.UUID(handle.run_id)
        return cast(RunnableConfig, out)

    # -- runs ----------------------------------------------------------------------------------------------------
    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        controlled = self._controlled(config)
        if controlled is None:
            yield from super().stream(input, config, **kwargs)
            return
        backend, handle = controlled
        if backend is None:  # nothing to lease: the run only gets its deadline checks
            handle.base, handle.slice_started = 0.0, _now()
            yield from super().stream(input, self._with_handle(config, handle), **kwargs)
            _outcome(handle)
            return
        drive(self._lease(handle), backend)
        done = threading.Event()
        beat: threading.Thread | None = None
        try:
            _register(backend, handle)
            target = self._target(backend, config)
            if not drive(admit_flow(input, handle), target):
                snapshot = self.get_state(target.config)
                event = _held_event(handle, snapshot.interrupts)
                yield from held_chunks(self, kwargs, snapshot.values, snapshot.interrupts, event)
                return
            if backend.expires:
                beat = threading.Thread(target=self._heartbeat, args=(backend, handle, done), daemon=True,
                                        name=f"run-control-heartbeat-{handle.thread_id}")
                beat.start()
            handle.base, handle.slice_started = _fresh_clock(input), _now()
            run_config = self._with_handle(config, handle)
            yield from super().stream(input, run_config, **kwargs)
            while self.run_control.on_pending_input == "queue" and handle.stop_kind is None:
                if target.pending():
                    break
                found, held = backend.pop_input(handle.thread_id)
                if not found:
                    break
                handle.base, handle.slice_started = 0.0, _now()
                yield from super().stream(held, run_config, **kwargs)
        finally:
            done.set()
            if beat is not None:
                beat.join()
            _unregister(backend, handle)
            backend.release(handle.thread_id, handle.run_id)
        _outcome(handle)

    def _heartbeat(self, backend: LeaseBackend, handle: RunHandle, done: threading.Event) -> None:
        control = self.run_control
        while not done.wait(control.heartbeat):
            try:
                alive, reason = backend.renew(handle.thread_id, handle.run_id, control.ttl)
            except Exception:  # a database hiccup: try again next beat (the TTL covers several)
                continue
            _beat(handle, alive, reason)

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        controlled = self._controlled(config)
        if controlled is None:
            async for chunk in super().astream(input, config, **kwargs):
                yield chunk
            return
        backend, handle = controlled
        if backend is None:  # nothing to lease: the run only gets its deadline checks
            handle.base, handle.slice_started = 0.0, _now()
            async for chunk in super().astream(input, self._with_handle(config, handle), **kwargs):
                yield chunk
            _outcome(handle)
            return
        await adrive(self._lease(handle), backend)
        beat: asyncio.Task[None] | None = None
        try:
            _register(backend, handle)
            target = self._target(backend, config)
            if not await adrive(admit_flow(input, handle), target):
                snapshot = await self.aget_state(target.config)
                event = _held_event(handle, snapshot.interrupts)
                for chunk in held_chunks(self, kwargs, snapshot.values, snapshot.interrupts, event):
                    yield chunk
                return
            if backend.expires:
                beat = asyncio.create_task(self._aheartbeat(backend, handle))
            handle.base, handle.slice_started = _fresh_clock(input), _now()
            run_config = self._with_handle(config, handle)
            async for chunk in super().astream(input, run_config, **kwargs):
                yield chunk
            while self.run_control.on_pending_input == "queue" and handle.stop_kind is None:
                if await target.apending():
                    break
                found, held = await backend.apop_input(handle.thread_id)
                if not found:
                    break
                handle.base, handle.slice_started = 0.0, _now()
                async for chunk in super().astream(held, run_config, **kwargs):
                    yield chunk
        finally:
            if beat is not None:
                beat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beat
            _unregister(backend, handle)
            await asyncio.shield(backend.arelease(handle.thread_id, handle.run_id))
        _outcome(handle)

    async def _aheartbeat(self, backend: LeaseBackend, handle: RunHandle) -> None:
        control = self.run_control
        while True:
            await asyncio.sleep(control.heartbeat)
            try:
                alive, reason = await backend.arenew(handle.thread_id, handle.run_id, control.ttl)
            except Exception:
                continue
            _beat(handle, alive, reason)

    # -- cancel --------------------------------------------------------------------------------------------------
    def cancel(self, thread_id: str, *, run_id: str | None = None, reason: str = "cancelled by request") -> bool:
        """Stop the run holding ``thread_id`` (only if it is ``run_id``, when given), wherever it runs; True if a
        run was flagged. It ends at its next check with every tool call answered and a ``run_cancelled`` event."""
        return cancel_run(self.checkpointer, thread_id, run_id=run_id, reason=reason) is not None

    async def acancel(self, thread_id: str, *, run_id: str | None = None, reason: str = "cancelled by request") -> bool:
        """Async twin of :meth:`cancel` (required with ``AsyncSqliteSaver`` / ``AsyncPostgresSaver``)."""
        return await acancel_run(self.checkpointer, thread_id, run_id=run_id, reason=reason) is not None


def _fresh_clock(input: Any) -> float | None:
    """New input starts a new run (a fresh clock: 0 s used); a resume or ``None`` continues the thread's run (None:
    its consumed time is read from state at the first check)."""
    return 0.0 if input is not None and not isinstance(input, Command) else None


def _now() -> float:
    import time

    return time.monotonic()


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _saver(checkpointer: Any) -> BaseCheckpointSaver[Any]:
    if not isinstance(checkpointer, BaseCheckpointSaver):
        raise RunControlConfigError(
            f"cancel_run needs the agent's checkpointer (a BaseCheckpointSaver); got {checkpointer!r}. Runs of an "
            f"agent without a checkpointer have no thread to cancel: cancel their asyncio task instead.",
            parameter="checkpointer",
        )
    return checkpointer


def cancel_run(
    checkpointer: Any, thread_id: str, *, run_id: str | None = None, reason: str = "cancelled by request"
) -> str | None:
    """Cancel the run holding ``thread_id``, from any thread or process sharing ``checkpointer``'s database; the
    cancelled run's id, or None if no (matching) run holds the thread. Sync checkpointers only (else
    :func:`acancel_run`), except for a run of this process, which is flagged directly."""
    backend = backend_for(_saver(checkpointer))
    local = _stop_local(backend, thread_id, run_id, reason)
    if local is not None and not backend.expires:
        return local
    try:
        remote = backend.request_cancel(thread_id, run_id, reason)
    except RunControlConfigError:
        if local is not None:
            return local
        raise
    return local or remote


async def acancel_run(
    checkpointer: Any, thread_id: str, *, run_id: str | None = None, reason: str = "cancelled by request"
) -> str | None:
    """Async twin of :func:`cancel_run`."""
    backend = backend_for(_saver(checkpointer))
    local = _stop_local(backend, thread_id, run_id, reason)
    if local is not None and not backend.expires:
        return local
    remote = await backend.arequest_cancel(thread_id, run_id, reason)
    return local or remote


def with_run_control(
    agent: CompiledStateGraph[Any, Any, Any, Any], control: RunControl | None = None
) -> ControlledAgent:
    """Deprecated: ``create_agent(..., run_control=RunControl(...))`` does this (and run control is on by default
    for an agent with a checkpointer). ``agent`` with its runs under ``control`` (default ``RunControl()``)."""
    import warnings

    warnings.warn(
        "with_run_control(agent, control) is no longer needed and will be removed in the next release: run control "
        "is on by default for an agent built by create_agent with a checkpointer; pass "
        "create_agent(..., run_control=RunControl(...)) to tune it.",
        DeprecationWarning,
        stacklevel=2,
    )
    return attach_run_control(agent, RunControl() if control is None else control)


def attach_run_control(agent: CompiledStateGraph[Any, Any, Any, Any], control: RunControl) -> ControlledAgent:
    """``agent`` with its runs under ``control``: one run per thread, resumes applied exactly once, deadlines and
    cancellation. The agent must list ``RunControlMiddleware`` first and ``RunControlGuard`` last when built by
    ``create_agent`` (``create_agent`` does both)."""
    if not isinstance(control, RunControl):
        raise RunControlConfigError(
            f"with_run_control(agent, control): control must be a RunControl(...); got {control!r}.",
            parameter="control",
        )
    if not isinstance(agent, CompiledStateGraph):
        raise RunControlConfigError(
            f"with_run_control takes a compiled agent (create_agent(...) or graph.compile()); got "
            f"{type(agent).__name__}.",
            parameter="agent",
        )
    plan = getattr(agent, "middleware_plan", None)
    names: Sequence[str] = getattr(plan, "middleware", ()) if plan is not None else ()
    if plan is not None and (not names or names[0] != "RunControlMiddleware" or names[-1] != "RunControlGuard"):
        raise RunControlConfigError(
            f"with_run_control: the agent's middleware is {list(names)}; run control needs RunControlMiddleware "
            f"first and RunControlGuard last. Build the agent with create_agent(..., run_control=RunControl(...)), "
            f"which adds both.",
            parameter="agent",
        )
    controlled: ControlledAgent = object.__new__(_controlled_class(type(agent)))
    controlled.__dict__.update(agent.__dict__)
    controlled.run_control = control
    return controlled


_CONTROLLED: dict[type, type] = {}
"""One controlled class per compiled-graph class (a bounded cache: the engine makes a handful of classes)."""


def _controlled_class(base: type) -> type[ControlledAgent]:
    """``ControlledAgent`` on top of the agent's own class, so what that class adds around ``stream``/``astream``
    (the input guards and the context check that ``create_agent`` installs) keeps running, under the lease."""
    if issubclass(base, ControlledAgent):
        return base
    cls = _CONTROLLED.get(base)
    if cls is None:
        cls = type(ControlledAgent.__name__, (ControlledAgent, base), {"__qualname__": ControlledAgent.__qualname__})
        _CONTROLLED[base] = cls
    return cls
