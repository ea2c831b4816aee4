"""``RunControlMiddleware`` and ``RunControlGuard``: where a controlled run checks its deadline and cancel flag.

``RunControlMiddleware`` is the outermost layer (listed first):

- **top of the loop** (``before_model``): a stopped run ends here: open tool calls are answered, a final message is
  added, a terminal event (``run_cancelled`` / ``run_deadline_exceeded``) goes to the custom stream;
- **before each tool call** (``wrap_tool_call``): a stopped run does not start the tool; the call is answered as not
  executed (the next ``before_model`` ends the run);
- **in flight**: under ``ainvoke`` the model or tool call is raced against the deadline and the cancel flag, and
  abandoned when either fires; under ``invoke`` a call that returns after the run was stopped has its result
  discarded. The same holds for a model call a hook makes for itself through
  :func:`~middleware_kit._engine.internal_calls.invoke_internal` (a summarizer, a classifier): :func:`controlled_call`
  and
  :func:`acontrolled_call` below; the hook is then abandoned (``InternalCallAbandoned``) and the run ends at its next
  check.

``RunControlGuard`` is the innermost layer (listed last): the check right before the model or the tool is actually
called, so work queued behind a sync-only wrapper or a retry backoff stops at its next call instead of running.

Both read the run's :class:`~middleware_kit.run_control.control.RunHandle` from the run's config, keep nothing on
``self``, and do nothing outside a controlled run. The run's consumed time is saved in the private state key
``run_control_elapsed`` (after each model call), so a run paused for a human resumes its clock where it stopped.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import warnings
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Annotated, Any, NotRequired, TypeVar, cast

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit._engine.bridge import ElasticPool
from middleware_kit._engine.chain import Layer
from middleware_kit._engine.internal_calls import InternalCallAbandoned, guard_internal_calls
from middleware_kit._engine.pairing import close_pending, closing_messages
from middleware_kit._engine.pipeline import Pipeline
from middleware_kit.decorators import hook_config
from middleware_kit.events import run_lifecycle
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks, ToolCallFlow, ToolCallFlowHooks
from middleware_kit.hooks import AsyncModelHandler, AsyncToolHandler, ModelHandler, ToolHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware, defined_hooks
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._stream import emit
from middleware_kit.run_control.control import RunControl, RunHandle, current_handle
from middleware_kit.types import (
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    ToolCallRequest,
)

__all__ = [
    "RunControlGuard",
    "RunControlMiddleware",
    "RunControlState",
    "acontrolled_call",
    "controlled_call",
    "controlled_middleware",
    "controlled_stack",
]

T = TypeVar("T")

_POOL = ElasticPool(name="middleware_kit-run-control")
"""Worker threads for the calls hooks make for themselves under ``invoke`` (see :func:`controlled_call`)."""
_WAIT_STEP = 0.05
"""Seconds between two looks at the run's stop flag while :func:`controlled_call` waits (a stop from another thread
is seen within this time; the deadline exactly)."""


def _latest(current: float | None, new: float) -> float:
    return new


class RunControlState(AgentState):
    """Private state of run control: seconds the current run has consumed (excluding waits for a human)."""

    run_control_elapsed: NotRequired[Annotated[float, PrivateStateAttr, _latest]]


def _why(handle: RunHandle) -> str:
    return "the run was cancelled" if handle.stop_kind == "cancelled" else "the run's deadline passed"


def final_message(handle: RunHandle) -> AIMessage:
    """The message a stopped run ends with."""
    if handle.stop_kind == "cancelled":
        text = f"The run was cancelled ({handle.stop_reason}) before it finished."
    else:
        text = f"The run stopped before it finished: {handle.stop_reason}."
    return AIMessage(content=text, response_metadata={"run_control": handle.stop_kind, "run_id": handle.run_id})


def _terminal(handle: RunHandle) -> None:
    if not handle.claim_terminal():
        return
    details = {"thread_id": handle.thread_id, "run_id": handle.run_id, "elapsed": round(handle.elapsed(), 3)}
    if handle.stop_kind == "cancelled":
        # One event for one cancel: a run that asked for lifecycle events gets the framework's run_cancelled (with
        # the run's counts and these details), which also closes its lifecycle; others get this middleware's own.
        life = run_lifecycle(None, var_child_runnable_config.get())
        if life is not None:
            life.cancelled(str(handle.stop_reason), None, details)
            return
    event = "run_cancelled" if handle.stop_kind == "cancelled" else "run_deadline_exceeded"
    emit(None, {"event": event, "middleware": "RunControlMiddleware", **details, "reason": handle.stop_reason})


def _stopped_model(handle: RunHandle) -> ModelResponse[Any]:
    _terminal(handle)
    return ModelResponse(result=[final_message(handle)])


def _stopped_tool(handle: RunHandle, request: ToolCallRequest) -> ToolMessage:
    [message] = closing_messages([request.tool_call], f"{_why(handle)} ({handle.stop_reason}).")
    return message


def _abandoned_tool(handle: RunHandle, request: ToolCallRequest) -> ToolMessage:
    """The answer to a tool call abandoned while it ran: it may have had its effect, so the model is not told that
    it did not run (it could call it again: a second payment)."""
    call = request.tool_call
    return ToolMessage(
        content=f"Tool call '{call['name']}' was stopped while it ran, because {_why(handle)} "
                f"({handle.stop_reason}); it may or may not have completed its effect. Check before calling it again.",
        name=call["name"], tool_call_id=call["id"] or "", status="error",
    )


def _done(task: asyncio.Future[T]) -> T:
    return task.result()


def _discard(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: the result of abandoned work is dropped


def _result_of(handle: RunHandle, result: Callable[[Any], T], request: Any) -> tuple[bool, T | None]:
    """(True, ``result(request)``); (False, None) when it raises ``InternalCallAbandoned`` for this run's stop (a
    layer's own model call was cut: the call is answered as stopped)."""
    try:
        return True, result(request)
    except InternalCallAbandoned:
        if handle.check() is None:
            raise
        return False, None


async def _race(handle: RunHandle, work: Awaitable[T]) -> tuple[bool, T | None]:
    """(True, result) if ``work`` finished first; (False, None) if the run was stopped or ran out of time first."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(handle.stopped_event().wait())
    try:
        done, _ = await asyncio.wait({task, stopped}, timeout=handle.remaining(),
                                     return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        stopped.cancel()
        raise
    stopped.cancel()
    if task in done:
        return _result_of(handle, _done, task)
    task.cancel()
    task.add_done_callback(_discard)
    handle.check()
    return False, None


def _abandon_if_stopped(handle: RunHandle) -> None:
    if handle.check() is not None:
        raise InternalCallAbandoned(f"{_why(handle)} ({handle.stop_reason})")


def controlled_call(call: Callable[[], T]) -> T:
    """``call()``, a call a hook makes for itself under ``invoke``: in a controlled run it does not start once the run
    is stopped, and the hook stops waiting for it the moment the run is stopped (``InternalCallAbandoned``). Python
    cannot interrupt the call itself: it runs on in a worker thread (with the run's context) and its answer is
    dropped, as ``awrap_model_call`` drops a model call it abandons."""
    handle = current_handle()
    if handle is None:
        return call()
    _abandon_if_stopped(handle)
    work = _POOL.submit(functools.partial(contextvars.copy_context().run, call))
    while True:
        remaining = handle.remaining()
        try:
            result = work.result(timeout=_WAIT_STEP if remaining is None else max(0.0, min(_WAIT_STEP, remaining)))
        except FutureTimeout:
            _abandon_if_stopped(handle)
            continue
        _abandon_if_stopped(handle)
        return result


async def acontrolled_call(work: Callable[[], Awaitable[T]]) -> T:
    """``await work()`` under ``ainvoke``: in a controlled run it does not start once the run is stopped, and it is
    abandoned (its task cancelled) the moment the run is stopped (``InternalCallAbandoned``)."""
    handle = current_handle()
    if handle is None:
        return await work()
    _abandon_if_stopped(handle)
    finished, result = await _race(handle, work())
    if not finished:
        raise InternalCallAbandoned(f"{_why(handle)} ({handle.stop_reason})")
    _abandon_if_stopped(handle)
    return cast(T, result)




class RunControlMiddleware(FrozenConfig, AgentMiddleware[RunControlState, Any]):
    """The checks of a controlled run: deadline and cancellation at the top of the loop, before each tool call and
    around calls in flight. ``create_agent`` lists it first in a controlled agent (one with a checkpointer, or
    ``run_control=RunControl(...)``); it acts only in a controlled run. Stateless: everything per run is in the run's
    handle and state."""

    state_schema: type[Any] = RunControlState
    _engine_layer = True
    inherited = True
    """An agent run inside a controlled run stops on that run's deadline and cancel: its model and tool calls go
    through this layer's wrap hooks (the run's handle reaches them in the config LangGraph hands down); a stopped
    model call answers with the final message, which ends the sub-agent's loop, and its caller ends at its next
    check (docs/subagents.md)."""

    def __init__(self, *, timed: bool = True) -> None:
        """``timed``: keep the run's consumed time in state (``run_control_elapsed``), so a deadline counts a run
        paused for a human from where it stopped. ``create_agent`` sets it only when its ``RunControl`` has a
        deadline: without one the agent carries no such channel (it costs about 1% per invoke)."""
        super().__init__()
        self.timed = timed
        if not timed:
            self.state_schema = AgentState

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: RunControlState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        handle = current_handle()
        if handle is None or handle.check(state) is None:
            return None
        fix = close_pending(state.get("messages") or [], f"{_why(handle)} ({handle.stop_reason}).")
        _terminal(handle)
        update: list[Any] = list(fix.update) if fix is not None else []
        out: dict[str, Any] = {"jump_to": "end", "messages": [*update, final_message(handle)]}
        if self.timed:
            out["run_control_elapsed"] = handle.elapsed()
        return out

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: RunControlState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    def _answered(self, handle: RunHandle, response: ModelResponse[Any] | None) -> Any:
        """What the layer answers with the model's ``response`` (None: the call was cut): the final message when the
        run was stopped meanwhile (the answer is discarded); else the response, with the run's consumed time when
        it has a deadline."""
        if response is None or handle.check() is not None:
            return _stopped_model(handle)
        if handle.control.deadline is None or not self.timed:
            return response
        return ExtendedModelResponse(model_response=response,
                                     command=Command(update={"run_control_elapsed": handle.elapsed()}))

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        handle = current_handle()
        if handle is None:
            return handler(request)
        if handle.check(request.state) is not None:
            return _stopped_model(handle)
        try:  # inline, not a helper: this runs around every model call of a controlled run
            response = handler(request)
        except InternalCallAbandoned:  # a layer's own model call was cut for this run's stop
            if handle.check() is None:
                raise
            response = None
        return self._answered(handle, response)

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> Any:
        handle = current_handle()
        if handle is None:
            return await handler(request)
        if handle.check(request.state) is not None:
            return _stopped_model(handle)
        finished, response = await _race(handle, handler(request))
        return self._answered(handle, response if finished else None)

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        handle = current_handle()
        if handle is None:
            return handler(request)
        if handle.check(request.state) is not None:
            return _stopped_tool(handle, request)
        try:
            result = handler(request)
        except InternalCallAbandoned:
            if handle.check() is None:
                raise
            return _stopped_tool(handle, request)
        return result if result is not None else _stopped_tool(handle, request)  # it ran: its real answer stands,
        # and the run stops at its next check

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncToolHandler) -> ToolResult:
        handle = current_handle()
        if handle is None:
            return await handler(request)
        if handle.check(request.state) is not None:
            return _stopped_tool(handle, request)
        finished, result = await _race(handle, handler(request))
        if not finished or result is None:
            return _abandoned_tool(handle, request)
        return result  # it ran: its real answer stands, and the run stops at its next check


class RunControlGuard(ModelCallFlowHooks, ToolCallFlowHooks, FrozenConfig, AgentMiddleware[AgentState[Any], Any]):
    """The last check before a model or tool call is made. ``create_agent`` lists it last in a controlled agent:
    work queued behind a sync-only wrapper or a retry backoff then stops at its next call instead of running."""

    _engine_layer = True

    def __init__(self) -> None:
        super().__init__()

    # Flow hooks (middleware_kit.flow): one body under invoke and ainvoke, no thread hop.
    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        handle = current_handle()
        if handle is not None and handle.check() is not None:
            return _stopped_model(handle)
        return (yield request)

    def tool_call_flow(self, request: ToolCallRequest) -> ToolCallFlow:
        handle = current_handle()
        if handle is not None and handle.check() is not None:
            return _stopped_tool(handle, request)
        return (yield request)


class _FinishingGuard(RunControlGuard):
    """``RunControlGuard`` in an agent with ``after_agent`` hooks. Listed last, its ``after_agent`` runs first: the run
    reached its end on its own, so its result stands; a cancel or a deadline arriving during the other
    ``after_agent`` hooks is a no-op (``agent.cancel`` returns False) and their own model calls are not cut. An agent
    without ``after_agent`` hooks has no such window, and no extra graph node for it."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "RunControlGuard"

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        handle = current_handle()
        if handle is not None:
            handle.finish()

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        self.after_agent(state, runtime)


def controlled_stack(
    middleware: Sequence[AgentMiddleware[Any, Any]] = (), control: RunControl | None = None
) -> list[AgentMiddleware[Any, Any]]:
    """``middleware`` between ``RunControlMiddleware()`` (outermost) and ``RunControlGuard()`` (innermost); a list
    that already has them (built with the deprecated :func:`controlled_middleware`) is kept as it is. The run's
    time is kept in state only when ``control`` has a deadline (or is unknown)."""
    listed = list(middleware)
    if listed and isinstance(listed[0], RunControlMiddleware) and isinstance(listed[-1], RunControlGuard):
        return listed
    ends = any("after_agent" in defined_hooks(m) for m in listed)
    timed = control is None or control.deadline is not None
    return [RunControlMiddleware(timed=timed), *listed, _FinishingGuard() if ends else RunControlGuard()]


def without_adjacent_guard(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` without ``RunControlGuard``'s layer in a chain where ``RunControlMiddleware``'s is right outside
    it (no wrapper of the user's between them): nothing can be queued between the two checks, so the inner one would
    find what the outer one just found. The guard's node hook (``after_agent``) stays."""

    def drop(layers: tuple[Layer[Any, Any], ...]) -> tuple[Layer[Any, Any], ...]:
        for i in range(1, len(layers)):
            if layers[i].owner == "RunControlGuard" and layers[i - 1].owner == "RunControlMiddleware":
                return (*layers[:i], *layers[i + 1 :])
        return layers

    return replace(pipeline, model_layers=drop(pipeline.model_layers), tool_layers=drop(pipeline.tool_layers))


def controlled_middleware(middleware: Sequence[AgentMiddleware[Any, Any]] = ()) -> list[AgentMiddleware[Any, Any]]:
    """Deprecated: ``create_agent`` puts run control around the middleware itself (on by default with a
    checkpointer; ``run_control=RunControl(...)`` tunes it). Returns ``middleware`` between
    ``RunControlMiddleware()`` and ``RunControlGuard()``, as before."""
    warnings.warn(
        "controlled_middleware([...]) is no longer needed and will be removed in the next release: create_agent "
        "adds run control itself (on by default with a checkpointer). Pass middleware=[...] as it is, and "
        "run_control=RunControl(...) to tune it.",
        DeprecationWarning,
        stacklevel=2,
    )
    return controlled_stack(middleware)


guard_internal_calls(controlled_call, acontrolled_call)
