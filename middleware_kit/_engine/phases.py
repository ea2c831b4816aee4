"""Fused nodes: node hooks (and the model call) that run inside one graph node.

The ``before_model`` hooks, the model call and the ``after_model`` hooks run inside one LangGraph node (``model``);
the ``before_agent`` hooks share one node, and so do the ``after_agent`` hooks. So the steps and checkpoints of a run
are the same for 0, 1 or 20 middlewares. Inside a node each hook sees the updates of the hooks before it, applied
through the schema's channels (reducers) exactly as LangGraph would apply them between separate nodes; the node then
writes what separate nodes would have written. A hook that may interrupt keeps a node of its own, so resuming it
never re-runs its neighbours (or the model).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables.config import var_child_runnable_config
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit._engine.internal_calls import InternalCallAbandoned
from middleware_kit._engine.state import StateSemantics, strip_private
from middleware_kit._engine.validation import note_hook_failure
from middleware_kit.agent_defaults import AgentDefaults
from middleware_kit.agent_defaults import enter as enter_defaults
from middleware_kit.agent_defaults import leave as leave_defaults
from middleware_kit.events import run_lifecycle
from middleware_kit.trace_policy import config_callbacks_active

__all__ = [
    "InterruptInFusedNodeWarning",
    "ModelStep",
    "NodeResult",
    "NodeRunner",
    "NodeStep",
]



@dataclass(frozen=True, slots=True)
class NodeStep:
    """One node hook, bridged for both modes."""

    owner: str
    hook: str
    mode: str
    """Which twins the middleware defines: ``sync``, ``async`` or ``sync+async``."""
    run_sync: Callable[[Any, Runtime[Any] | None], Any]
    run_async: Callable[[Any, Runtime[Any] | None], Awaitable[Any]] | None
    """None when the hook is sync-only: the async runner batches consecutive sync-only hooks into one thread hop."""
    can_jump_to: frozenset[str]
    may_interrupt: bool
    engine: bool = False
    """A step of an engine layer (:func:`middleware_kit.middleware.is_engine_layer`): an idempotent check."""


@dataclass(frozen=True, slots=True)
class ModelStep:
    """The model call, run inside the fused ``model`` node between the before_model and after_model hooks.

    ``flow`` takes the current view of state and the runtime and is an engine body (run by the node's own driver, in
    either mode) returning the writes of the call (the model's messages first, then any ``ExtendedModelResponse``
    updates) and the new messages (for routing).
    """

    flow: Callable[[Any, Any], Steps[tuple[list[dict[str, Any]], list[Any] | None]]]


Item = NodeStep | ModelStep


@dataclass(slots=True)
class NodeResult:
    """What one run of a fused node produced."""

    writes: list[dict[str, Any]]
    jump: str | None
    view: Any
    """The state as the hooks of this node left it."""
    tail: list[Any] | None
    """When the model call was the node's last item and added exactly one message and nothing else: that message
    (the view was not updated with it, which would cost O(history) for nothing)."""


class NodeRunner:
    """Runs the items of one fused node in order: node hooks and, in the ``model`` node, the model call."""

    def __init__(
        self,
        items: Sequence[Item],
        semantics: StateSemantics,
        *,
        defaults: AgentDefaults | None = None,
        traced: Sequence[Item] | None = None,
        ends_run: str | None = None,
    ) -> None:
        self.items = tuple(items)
        self._traced = None if traced is None else NodeRunner(traced, semantics)
        """The same node with every hook a callback run (:mod:`~middleware_kit._engine.tracing`), used by
        the runs that have
        callback handlers."""
        self._ends_run = ends_run
        """``"always"``: a completed run of this node ends the agent run (the last ``after_agent`` node);
        ``"on_jump"``: only when it jumps (an earlier ``after_agent`` node); None: routing decides."""
        self.defaults = defaults
        """The agent's model-call defaults, current (:func:`middleware_kit.agent_defaults.current_agent`) while
        this node runs."""
        self.steps = tuple(i for i in self.items if isinstance(i, NodeStep))
        self.semantics = semantics
        # The first step whose work a later hook's interrupt would repeat (engine layers' checks are idempotent).
        self._first = next((i for i in self.items if not getattr(i, "engine", False)), None)
        # Under ainvoke, consecutive sync-only hooks run together in one worker-thread hop; under invoke, consecutive
        # hooks run in one plain loop (no driver step per hook).
        self._segments = _segments(self.items, lambda step: step.run_async is None)
        self._sync_segments = _segments(self.items, lambda step: True)

    def _hook_interrupted(self, step: NodeStep) -> None:
        # Only work that ran before the hook in this node runs again on resume: none when it comes first.
        if step is not self._first and not step.may_interrupt:
            warnings.warn(
                f"{step.owner}.{step.hook} called interrupt() but does not declare may_interrupt=True, so it shares "
                f"a graph node with work that ran before it (other hooks, perhaps the model call): on resume that "
                f"work runs again. "
                f"Declare it with @hook_config(may_interrupt=True) or @{step.hook}(may_interrupt=True).",
                InterruptInFusedNodeWarning,
                stacklevel=2,
            )

    def _after_hook(
        self, step: NodeStep, update: Any, result: NodeResult
    ) -> bool:
        """Validate and apply one hook's return value; True when it jumped."""
        update, jump = self.semantics.check(step, update)
        if update:
            result.writes.append(update)
            result.view = self.semantics.apply(result.view, update)
        result.jump = jump
        return jump is not None

    def _after_model(
        self, writes: list[dict[str, Any]], tail: list[Any] | None, last: bool, result: NodeResult
    ) -> None:
        result.writes.extend(writes)
        if last and tail is not None:
            result.tail = tail
            return
        for update in writes:
            result.view = self.semantics.apply(result.view, update)

    def run(self, state: Any, runtime: Runtime[Any] | None) -> NodeResult:
        """Run the node under ``invoke``."""
        __tracebackhide__ = True
        token = enter_defaults(self.defaults)
        try:
            return run_sync(self.flow(strip_private(state), runtime, self._sync_segments))
        finally:
            leave_defaults(token)

    async def arun(self, state: Any, runtime: Runtime[Any] | None) -> NodeResult:
        """Run the node under ``ainvoke``: consecutive sync-only hooks share one worker-thread hop."""
        __tracebackhide__ = True
        token = enter_defaults(self.defaults)
        try:
            return await run_async(self.flow(strip_private(state), runtime, self._segments))
        finally:
            leave_defaults(token)

    def flow(
        self,
        view: Any,
        runtime: Runtime[Any] | None,
        segments: Sequence[tuple[bool, tuple[Item, ...]]],
    ) -> Steps[NodeResult]:
        """One run of the node: the traced twin when the run has callback handlers (decided here, once), and the
        run's lifecycle events when it asked for them (:func:`middleware_kit.events.run_lifecycle`)."""
        __tracebackhide__ = True
        config = var_child_runnable_config.get()
        runner = self
        if self._traced is not None and config_callbacks_active(config):
            runner = self._traced
            segments = runner._sync_segments if segments is self._sync_segments else runner._segments
        life = run_lifecycle(runtime, config)
        if life is None:
            return (yield from runner._flow(view, runtime, segments))
        life.started(runtime)
        try:
            result = yield from runner._flow(view, runtime, segments)
        except GraphBubbleUp:
            raise
        except asyncio.CancelledError:
            life.cancelled("the task running the agent was cancelled", runtime)
            raise
        except BaseException as exc:
            life.failed(exc, runtime)
            raise
        if self._ends_run == "always" or (self._ends_run == "on_jump" and result.jump is not None):
            life.finished(runtime)
        return result

    def _flow(
        self,
        view: Any,
        runtime: Runtime[Any] | None,
        segments: Sequence[tuple[bool, tuple[Item, ...]]],
    ) -> Steps[NodeResult]:
        """The items of ``segments`` in order (one body for both modes). A batch segment (sync-only hooks) is one
        step: under ``ainvoke`` it runs in a worker thread, its hooks one by one there; under ``invoke`` (the sync
        segments) the body calls it itself, which is all the sync driver would do with that step."""
        __tracebackhide__ = True
        result = NodeResult([], None, view, None)
        last = len(segments) - 1
        inline = segments is self._sync_segments  # invoke: a batch is called here, as the sync driver would call it
        for index, (is_batch, items) in enumerate(segments):
            result.tail = None
            item = items[0]
            if is_batch:
                batch: NodeResult = (self._batch(result.view, runtime, items) if inline
                                     else (yield Step(self._batch, None, result.view, runtime, items)))
                result.writes.extend(batch.writes)
                result.view, result.jump = batch.view, batch.jump
                if batch.jump is not None:
                    return result
            elif type(item) is ModelStep:
                writes, tail = yield from item.flow(result.view, runtime)
                self._after_model(writes, tail, index == last, result)
            else:
                assert isinstance(item, NodeStep)
                try:
                    update = yield Step(item.run_sync, item.run_async, result.view, runtime)
                except BaseException as exc:
                    if not self._dropped(item, exc):
                        raise
                    update = None
                if update is not None and self._after_hook(item, update, result):
                    return result
        return result

    def _batch(self, view: Any, runtime: Runtime[Any] | None, items: tuple[Item, ...]) -> NodeResult:
        """Consecutive hooks in one plain loop, each by its sync runner (the whole node under ``invoke``; a worker
        thread's hop under ``ainvoke``): what :meth:`_flow` does for one hook, without a driver step each."""
        __tracebackhide__ = True
        result = NodeResult([], None, view, None)
        steps: tuple[NodeStep, ...] = items  # type: ignore[assignment]  # a batch holds node hooks only (_segments)
        for item in steps:
            try:
                update = item.run_sync(result.view, runtime)
            except BaseException as exc:
                if not self._dropped(item, exc):
                    raise
                update = None
            if update is not None and self._after_hook(item, update, result):
                break
        return result

    def _dropped(self, item: NodeStep, exc: BaseException) -> bool:
        """A node hook raised ``exc``: True when its work is dropped and the node goes on (the run was stopped during
        the hook's own model call; it ends at its next run-control check); else the error is to be raised, noted with
        the hook (an interrupt is warned about when the hook shares its node with earlier work)."""
        if isinstance(exc, InternalCallAbandoned):
            return True
        if isinstance(exc, GraphBubbleUp):
            self._hook_interrupted(item)
        elif isinstance(exc, Exception):
            note_hook_failure(exc, item.owner, item.hook)
        return False


def _segments(items: Sequence[Item], batched: Callable[[NodeStep], bool]) -> tuple[tuple[bool, tuple[Item, ...]], ...]:
    """``items`` cut into segments: runs of consecutive node hooks that ``batched`` accepts (one step each), and every
    other item on its own."""
    segments: list[tuple[bool, tuple[Item, ...]]] = []
    for item in items:
        is_batch = isinstance(item, NodeStep) and batched(item)
        if segments and is_batch and segments[-1][0]:
            segments[-1] = (True, (*segments[-1][1], item))
        else:
            segments.append((is_batch, (item,)))
    return tuple(segments)


class InterruptInFusedNodeWarning(UserWarning):
    """A hook called ``interrupt()`` without declaring ``may_interrupt``: its node's other work re-runs on resume."""
