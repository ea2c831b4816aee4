"""``ControlledAgent``: a compiled agent whose runs take the thread's lease first (``create_agent`` returns one
when the agent has a checkpointer, unless ``run_control=False``).

``Pregel.invoke`` and ``ainvoke`` run through ``self.stream`` / ``self.astream`` (as do ``stream_events`` v3 and the
v3 streaming API), so overriding those two puts every run under control. The order inside a run:

1. take the thread's lease (reject or wait, :mod:`~middleware_kit.run_control.lease`) -- before anything reads the
   thread's state, so two runs never read the same checkpoint and no turn is lost (on PostgreSQL, in the same round
   trip as the run's first checkpoint read: the run's saver takes it there, see :meth:`ControlledAgent._deferred`);
2. start the heartbeat (lease renewal, cross-process cancel requests: :mod:`~middleware_kit.run_control.heartbeat`;
   none for in-process leases, which do not expire);
3. run the graph with LangGraph's strict resume on, the run's
   :class:`~middleware_kit.run_control.control.RunHandle` in its config, and the run's saver
   (:class:`~middleware_kit.run_control.saver.RunSaver`): the input is admitted on the checkpoint LangGraph loads
   (:mod:`~middleware_kit.run_control.admission`; a refusal raises before anything is written), the interrupts it
   answers are recorded as resolved before its first write, and every write is fenced by the lease;
4. with ``on_pending_input="queue"``: new input while a review is pending is held (checked before the run) and the
   call returns the thread as it is; once no interrupt is pending, the held inputs run in arrival order (each a new
   turn, streamed by this same call), until one pauses again;
5. release the lease (only if still ours), then raise ``RunDeadlineExceededError`` / ``RunCancelledError`` if the
   policy says so (the thread was closed cleanly by ``RunControlMiddleware`` first).

Everything else is the compiled graph's own: the controlled agent shares the compiled graph's attributes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Self, cast

from langchain_core.runnables import RunnableConfig
from langchain_core.utils.uuid import uuid7
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphDrained
from langgraph.errors import UnknownInterruptError as LangGraphUnknownInterruptError
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import RunControl as DrainControl
from langgraph.types import Command

from middleware_kit._engine.compat import CONFIG_KEY_STRICT_RESUME
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit.compiled import CompiledAgent
from middleware_kit.run_control.admission import is_new_input, next_input, queued, refusal_flow
from middleware_kit.run_control.control import HANDLE_KEY, OWNER, RunControl, RunHandle
from middleware_kit.run_control.errors import (
    LeaseLostError,
    ResumeError,
    RunCancelledError,
    RunControlConfigError,
    RunDeadlineExceededError,
    ThreadBusyError,
    UnsharedLeaseWarning,
)
from middleware_kit.run_control.heartbeat import BEATS, abeat
from middleware_kit.run_control.lease import (
    LeaseBackend,
    acquire_flow,
    adrive,
    backend_for,
    drive,
    shared,
    take_at_once,
)
from middleware_kit.run_control.saver import RunSaver

__all__ = ["ControlledAgent", "acancel_run", "cancel_run", "with_run_control"]

INTERRUPT = "__interrupt__"

_LOCAL: dict[tuple[int, str], RunHandle] = {}
_LOCAL_LOCK = threading.Lock()


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
    if handle.lease_lost:
        return  # what it did under the lease stands; nothing after was written (a refused write raised already)
    if handle.stop_kind == "deadline" and handle.control.on_deadline == "raise":
        raise RunDeadlineExceededError(handle.thread_id, handle.run_id, cast(float, handle.control.deadline))
    if handle.stop_kind == "cancelled" and handle.control.on_cancel == "raise":
        raise RunCancelledError(handle.thread_id, handle.run_id, handle.stop_reason)


def _register(backend: LeaseBackend, handle: RunHandle) -> None:
    with _LOCAL_LOCK:
        _LOCAL[(id(backend), handle.thread_id)] = handle


def _unregister(backend: LeaseBackend, handle: RunHandle) -> None:
    with _LOCAL_LOCK:
        if _LOCAL.get((id(backend), handle.thread_id)) is handle:
            del _LOCAL[(id(backend), handle.thread_id)]


def _stop_local(backend: LeaseBackend, thread_id: str, run_id: str | None, reason: str) -> tuple[bool, str | None]:
    """(a run of this process holds the thread, the id of the run flagged: None when it had already finished)."""
    with _LOCAL_LOCK:
        handle = _LOCAL.get((id(backend), thread_id))
    if handle is None or (run_id is not None and handle.run_id != run_id):
        return False, None
    if handle.stop("cancelled", reason) or handle.stop_kind == "cancelled":
        return True, handle.run_id
    return True, None  # it finished on its own: its result stands


def _is_review(value: Any) -> bool:
    """A human-in-the-loop review (``HumanInTheLoopMiddleware``'s interrupt value, batched or per call)."""
    return isinstance(value, Mapping) and ("action_requests" in value or value.get("type") == "tool_approval")


class ControlledAgent(CompiledAgent[Any]):
    """A compiled agent whose runs are under :class:`RunControl` (what ``create_agent`` returns with a
    checkpointer, unless ``run_control=False``).

    A drop-in for the compiled graph: every method and attribute is the graph's own; ``stream``/``astream`` (and so
    ``invoke``/``ainvoke``) take the thread's lease first. Adds :meth:`cancel` / :meth:`acancel`.
    """

    run_control: RunControl

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
        given = (config or {}).get("run_id")
        made = None if given else uuid7()  # as LangChain makes a root run's id
        handle = RunHandle(str(thread_id), str(given or made), self.run_control, backend, run_uuid=made)
        return backend, handle

    def _lease(self, handle: RunHandle, *, wait: bool | None = None) -> Any:
        control = self.run_control
        return acquire_flow(handle.thread_id, handle.run_id, OWNER, ttl=control.ttl,
                            wait=control.on_conflict == "wait" if wait is None else wait,
                            wait_timeout=control.wait_timeout, poll=control.poll_interval)

    def _configurable(self, config: RunnableConfig | None) -> dict[str, Any]:
        """The run's ``configurable`` (the agent's own, then the call's): all the lease needs of the config,
        without the cost of ``merge_configs`` (callbacks, tags) on every invoke."""
        return {**((self.config or {}).get("configurable") or {}), **((config or {}).get("configurable") or {})}

    def _thread_config(self, config: RunnableConfig | None) -> RunnableConfig:
        keys = ("thread_id", "checkpoint_ns", "checkpoint_id")
        return {"configurable": {k: v for k, v in self._configurable(config).items() if k in keys}}

    def _slice(self, input: Any, config: RunnableConfig | None, handle: RunHandle, backend: LeaseBackend,
               kwargs: dict[str, Any], lease: Any = None) -> tuple[Self, RunnableConfig, dict[str, Any]]:
        """One graph run under the lease: a shallow copy of this graph whose checkpointer is the run's saver
        (admission, resolved interrupts, the fence; lending it through ``configurable`` instead, as LangGraph lends a
        subgraph its parent's, measured ~8% slower per invoke), and the config and keyword arguments: the run's
        handle, LangGraph's strict resume for a resume, and a LangGraph run control to drain the run by when its
        lease is lost. ``lease``: the run's acquire flow, taken with its first read (see :meth:`_deferred`)."""
        saver = RunSaver.for_run(self.checkpointer, handle, backend, input, lease)  # type: ignore[arg-type]
        graph = self.copy({"checkpointer": saver})
        out: dict[str, Any] = dict(config or {})
        out["configurable"] = {**(out.get("configurable") or {}), HANDLE_KEY: handle}
        if isinstance(input, Command) and input.resume is not None and input.resume != {}:
            out["configurable"][CONFIG_KEY_STRICT_RESUME] = True  # (an empty map is the middleware's to refuse)
        if out.get("run_id") is None:  # the run's id (made by _controlled) as the root run's, for tracing
            out["run_id"] = handle.run_uuid or uuid.UUID(handle.run_id)
        if backend.expires:
            handle.drain = kwargs.get("control") or DrainControl()
            kwargs = {**kwargs, "control": handle.drain}
        handle.base, handle.slice_started = _fresh_clock(input), time.monotonic()
        return graph, out, kwargs  # type: ignore[return-value]

    def _deferred(self, backend: LeaseBackend, input: Any) -> bool:
        """Whether the run takes its lease with its first checkpoint read, in the same round trip
        (``backend.reads_with_lease``: PostgreSQL), rather than before it: not when the run reads the thread
        before its graph runs (``on_pending_input="queue"`` with new input)."""
        return backend.reads_with_lease and not (self.run_control.on_pending_input == "queue" and is_new_input(input))

    @staticmethod
    def _refused(exc: BaseException, handle: RunHandle) -> Any:
        """What LangGraph's refusal of this run becomes: ``LeaseLostError`` for a drain after the lease was lost; our
        resume error for a strict-resume refusal (a flow for the lease drivers, which record and raise it); else
        ``exc`` itself, raised again."""
        if isinstance(exc, GraphDrained) and handle.lease_lost:
            raise LeaseLostError(handle.thread_id, handle.run_id, handle.control.ttl) from exc
        if isinstance(exc, LangGraphUnknownInterruptError) and not isinstance(exc, ResumeError) and \
                exc.reason in ("not_pending", "ambiguous"):
            return refusal_flow(exc, handle)
        raise exc

    def _queueing(self, config: RunnableConfig | None) -> RunnableConfig | None:
        """The thread's config, which a queueing run (``on_pending_input="queue"``) reads before and between its
        slices; None for a run that does not queue (it reads nothing more)."""
        return self._thread_config(config) if self.run_control.on_pending_input == "queue" else None

    def _held(self, kwargs: dict[str, Any], handle: RunHandle, snapshot: Any) -> list[Any]:
        return held_chunks(self, kwargs, snapshot.values, snapshot.interrupts, _held_event(handle, snapshot.interrupts))

    # -- runs ----------------------------------------------------------------------------------------------------
    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        controlled = self._controlled(config)
        if controlled is None:
            yield from super().stream(input, config, **kwargs)
            return
        backend, handle = controlled
        if backend is None:  # nothing to lease: the run only gets its deadline checks
            handle.base, handle.slice_started = 0.0, time.monotonic()
            yield from super().stream(input, _with_handle(config, handle), **kwargs)
            _outcome(handle)
            return
        lease = self._lease(handle) if self._deferred(backend, input) else None
        if lease is None:
            sent = take_at_once(backend, handle.thread_id, handle.run_id, OWNER, self.run_control.ttl)
            handle.leased(drive(self._lease(handle), backend) if sent is None else sent)
        try:
            _register(backend, handle)
            saver, thread = self.checkpointer, self._queueing(config)
            if thread is not None and is_new_input(input) and run_sync(queued(input, handle, backend, saver, thread)):
                yield from self._held(kwargs, handle, self.get_state(thread))
                return
            if backend.expires:
                BEATS.add(backend, handle)
            found = True
            while found:
                graph, run_config, run_kwargs = self._slice(input, config, handle, backend, kwargs, lease)
                lease = None
                try:  # inline, not a helper generator: each chunk of each invoke passes here
                    yield from super(ControlledAgent, graph).stream(input, run_config, **run_kwargs)
                except (LangGraphUnknownInterruptError, GraphDrained) as exc:
                    raise drive(self._refused(exc, handle), backend) from exc
                found, input = (False, None) if thread is None else run_sync(next_input(handle, backend, saver, thread))
        finally:
            if backend.expires:
                BEATS.remove(handle)
            _unregister(backend, handle)
            backend.release(handle.thread_id, handle.run_id)
        _outcome(handle)

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
            handle.base, handle.slice_started = 0.0, time.monotonic()
            async for chunk in super().astream(input, _with_handle(config, handle), **kwargs):
                yield chunk
            _outcome(handle)
            return
        lease = self._lease(handle) if self._deferred(backend, input) else None
        if lease is None:
            sent = take_at_once(backend, handle.thread_id, handle.run_id, OWNER, self.run_control.ttl)
            handle.leased(await adrive(self._lease(handle), backend) if sent is None else sent)
        beat: asyncio.Task[None] | None = None
        try:
            _register(backend, handle)
            saver, thread = self.checkpointer, self._queueing(config)
            if thread is not None and is_new_input(input) and \
                    await run_async(queued(input, handle, backend, saver, thread)):
                for chunk in self._held(kwargs, handle, await self.aget_state(thread)):
                    yield chunk
                return
            if backend.expires:
                beat = asyncio.create_task(abeat(backend, handle))
            found = True
            while found:
                graph, run_config, run_kwargs = self._slice(input, config, handle, backend, kwargs, lease)
                lease = None
                try:  # inline, not a helper generator: each chunk of each invoke passes here
                    async for chunk in super(ControlledAgent, graph).astream(input, run_config, **run_kwargs):
                        yield chunk
                except (LangGraphUnknownInterruptError, GraphDrained) as exc:
                    raise await adrive(self._refused(exc, handle), backend) from exc
                found, input = (False, None) if thread is None else \
                    await run_async(next_input(handle, backend, saver, thread))
        finally:
            if beat is not None:
                beat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beat
            _unregister(backend, handle)
            await asyncio.shield(backend.arelease(handle.thread_id, handle.run_id))
        _outcome(handle)

    # -- cancel --------------------------------------------------------------------------------------------------
    def cancel(self, thread_id: str, *, run_id: str | None = None, reason: str = "cancelled by request") -> bool:
        """Stop the run holding ``thread_id`` (only if it is ``run_id``, when given), wherever it runs; True if a
        run was flagged. It ends at its next check with every tool call answered and a ``run_cancelled`` event.
        With no run on the thread and a review pending on it (no ``run_id`` given), the review is resolved: its
        calls are answered as not executed (cancelled), a final message says so, and a later resume of it gets
        ``InterruptAlreadyResolvedError``."""
        if cancel_run(self.checkpointer, thread_id, run_id=run_id, reason=reason) is not None:
            return True
        return run_id is None and bool(run_sync(self._closing(thread_id, reason)))

    async def acancel(self, thread_id: str, *, run_id: str | None = None, reason: str = "cancelled by request") -> bool:
        """Async twin of :meth:`cancel` (required with ``AsyncSqliteSaver`` / ``AsyncPostgresSaver``)."""
        if await acancel_run(self.checkpointer, thread_id, run_id=run_id, reason=reason) is not None:
            return True
        return run_id is None and bool(await run_async(self._closing(thread_id, reason)))

    def _closing(self, thread_id: str, reason: str) -> Steps[bool]:
        """Resolve the review a thread is paused on, as cancelled (one body for :meth:`cancel` and
        :meth:`acancel`): under the thread's lease, its open calls are answered as not executed and a final message
        added (as the node that paused, so the thread ends there), and its interrupts are recorded as resolved."""
        from middleware_kit._engine.pairing import close_pending
        from middleware_kit.run_control.middleware import final_message

        backend = backend_for(self.checkpointer)
        handle = RunHandle(thread_id, str(uuid.uuid4()), self.run_control, backend)
        try:
            yield Step(drive, adrive, self._lease(handle, wait=False), backend)
        except ThreadBusyError:  # a run started meanwhile: it is the one to cancel
            return False
        try:
            config: Any = {"configurable": {"thread_id": thread_id}}
            snapshot = yield Step(self.get_state, self.aget_state, config)
            tasks = [t for t in snapshot.tasks if t.interrupts]
            if not tasks or not all(_is_review(i.value) for t in tasks for i in t.interrupts):
                return False
            handle.stop("cancelled", reason)
            fix = close_pending(snapshot.values.get("messages") or [], f"the run was cancelled ({reason}).")
            update = {"messages": [*(fix.update if fix is not None else []), final_message(handle)]}
            yield Step(self.update_state, self.aupdate_state, config, update, tasks[0].name)
            ids = [i.id for t in tasks for i in t.interrupts]
            yield Step(backend.record_resolved, backend.arecord_resolved, thread_id, ids, handle.run_id)
            return True
        finally:
            yield Step(backend.release, backend.arelease, thread_id, handle.run_id)


def _with_handle(config: RunnableConfig | None, handle: RunHandle) -> RunnableConfig:
    """The call's config with the run's handle (a run with no thread to lease: deadline checks only)."""
    out: dict[str, Any] = dict(config or {})
    out["configurable"] = {**(out.get("configurable") or {}), HANDLE_KEY: handle}
    return cast(RunnableConfig, out)


def _fresh_clock(input: Any) -> float | None:
    """New input starts a new run (a fresh clock: 0 s used); a resume or ``None`` continues the thread's run (None:
    its consumed time is read from state at the first check)."""
    return 0.0 if input is not None and not isinstance(input, Command) else None


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
    here, local = _stop_local(backend, thread_id, run_id, reason)
    if here and (local is None or not backend.expires):
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
    here, local = _stop_local(backend, thread_id, run_id, reason)
    if here and (local is None or not backend.expires):
        return local
    remote = await backend.arequest_cancel(thread_id, run_id, reason)
    return local or remote


def with_run_control(
    agent: CompiledStateGraph[Any, Any, Any, Any], control: RunControl | None = None
) -> ControlledAgent:
    """Deprecated: ``create_agent(..., run_control=RunControl(...))`` does this (and run control is on by default
    for an agent with a checkpointer). ``agent`` with its runs under ``control`` (default ``RunControl()``)."""
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
    names: Sequence[str] = getattr(plan, "engine", ()) if plan is not None else ()
    if plan is not None and (not names or names[0] != "RunControlMiddleware" or names[-1] != "RunControlGuard"):
        raise RunControlConfigError(
            f"with_run_control: the agent's engine layers are {list(names)}; run control needs RunControlMiddleware "
            f"first and RunControlGuard last. Build the agent with create_agent(..., run_control=RunControl(...)), "
            f"which adds both.",
            parameter="agent",
        )
    if control.deadline is not None and "run_control_elapsed" not in agent.channels:
        raise RunControlConfigError(
            f"with_run_control(agent, RunControl(deadline={control.deadline:g})): the agent was built without a "
            f"deadline, so it keeps no run time in its state and a run paused for a human would restart its clock. "
            f"Build it with create_agent(..., run_control=RunControl(deadline={control.deadline:g})).",
            parameter="control",
        )
    _check_sharing(agent.checkpointer, control)
    controlled: ControlledAgent = object.__new__(ControlledAgent)  # CompiledAgent's entry checks included
    controlled.__dict__.update(agent.__dict__)
    controlled.run_control = control
    return controlled


_WARNED: set[type] = set()
"""Checkpointer classes already warned about (``UnsharedLeaseWarning`` is said once per class)."""


def _check_sharing(saver: Any, control: RunControl) -> None:
    """A checkpointer whose lease holds in this process only: an error with ``cross_process=True``, a warning once
    per class with the default ``None``, nothing with ``False`` (or for ``InMemorySaver``)."""
    if not isinstance(saver, BaseCheckpointSaver) or control.cross_process is False or shared(saver) is not None:
        return
    name = type(saver).__name__
    holds = (f"one run per thread, exactly-once resumes and cancel hold among this process's runs only: the lease "
             f"lives in this process, since middleware_kit cannot keep a lease in {name}'s storage (it can in "
             f"SqliteSaver/AsyncSqliteSaver and PostgresSaver/AsyncPostgresSaver databases)")
    if control.cross_process:
        raise RunControlConfigError(
            f"RunControl(cross_process=True) with checkpointer {name}: {holds}. Use one of those savers, or "
            f"RunControl(cross_process=False) if one process serves each thread.",
            parameter="cross_process",
        )
    with _LOCAL_LOCK:
        if type(saver) in _WARNED:
            return
        _WARNED.add(type(saver))
    warnings.warn(
        f"Run control with checkpointer {name}: {holds}; runs in other processes sharing its threads are not kept "
        f"out. To silence this, say which you mean: create_agent(..., run_control=RunControl(cross_process=False)) "
        f"(one process per thread, on purpose) or run_control=False (no run control).",
        UnsharedLeaseWarning,
        stacklevel=4,
    )
