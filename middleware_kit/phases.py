"""Fused nodes: node hooks (and the model call) that run inside one graph node.

The ``before_model`` hooks, the model call and the ``after_model`` hooks run inside one LangGraph node (``model``);
the ``before_agent`` hooks share one node, and so do the ``after_agent`` hooks. So the steps and checkpoints of a run
are the same for 0, 1 or 20 middlewares. Inside a node each hook sees the updates of the hooks before it, applied
through the schema's channels (reducers) exactly as LangGraph would apply them between separate nodes; the node then
writes what separate nodes would have written. A hook that may interrupt keeps a node of its own, so resuming it
never re-runs its neighbours (or the model).
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.channels.base import BaseChannel
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.channels.last_value import LastValue, LastValueAfterFinish
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit.bridge import run_coroutine_sync, run_sync_in_thread
from middleware_kit.errors import HookReturnError, InvalidJumpError, UnknownStateKeyError

__all__ = [
    "InterruptInFusedNodeWarning",
    "ModelStep",
    "NodeResult",
    "NodeRunner",
    "NodeStep",
    "StateSemantics",
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


class StateSemantics:
    """How updates combine: the agent's declared keys and LangGraph's channels for them."""

    def __init__(self, keys: frozenset[str], channels: Mapping[str, BaseChannel[Any, Any, Any]]) -> None:
        self.keys = keys
        self._channels = channels
        self._last_value = frozenset(
            k for k, ch in channels.items() if isinstance(ch, (LastValue, LastValueAfterFinish, EphemeralValue))
        )

    def is_last_value(self, key: str) -> bool:
        """True for keys without a reducer: two writes in one step would conflict."""
        return key in self._last_value or key not in self._channels

    def check(self, step: NodeStep, update: object) -> tuple[dict[str, Any], str | None]:
        """Validate a hook's return value; split off ``jump_to``."""
        if type(update) is not dict:
            if not isinstance(update, dict):
                raise HookReturnError.for_node_hook(step.owner, step.hook, update)
            update = dict(update)
        unknown = update.keys() - self.keys
        if unknown:
            raise UnknownStateKeyError(step.owner, step.hook, unknown, self.keys)
        if "jump_to" not in update:
            return update, None
        rest = {k: v for k, v in update.items() if k != "jump_to"}
        target = update["jump_to"]
        if target is None:
            return rest, None
        if target not in ("model", "tools", "end"):
            raise InvalidJumpError(
                f"{step.owner}.{step.hook} returned jump_to={target!r}; the targets are 'model', 'tools' and 'end'.",
                middleware=step.owner,
                hook=step.hook,
            )
        if target not in step.can_jump_to:
            declared = sorted(step.can_jump_to) or "none"
            raise InvalidJumpError(
                f"{step.owner}.{step.hook} returned jump_to={target!r} but declared can_jump_to={declared}. "
                f"Declare it: @{step.hook}(can_jump_to=[{target!r}]) on a decorated hook, or "
                f"@hook_config(can_jump_to=[{target!r}]) on the method.",
                middleware=step.owner,
                hook=step.hook,
            )
        return rest, target

    def apply(self, view: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
        """The state a later hook sees: ``view`` with ``update`` applied through the channels."""
        new = dict(view)
        for key, value in update.items():
            channel = self._channels.get(key)
            if channel is None or key in self._last_value:
                new[key] = value
                continue
            fresh = channel.from_checkpoint(view[key]) if key in view else channel.copy()
            fresh.update([value])
            new[key] = fresh.get()
        return new

    def output(self, writes: Sequence[dict[str, Any]]) -> Any:
        """What the fused node returns so LangGraph applies the same updates as separate nodes would have."""
        if not writes:
            return None
        if len(writes) == 1:
            return writes[0]
        last_writer: dict[str, int] = {}
        for i, update in enumerate(writes):
            for key in update:
                if key in self._last_value:
                    last_writer[key] = i
        commands: list[Command[Any]] = []
        for i, update in enumerate(writes):
            kept = {k: v for k, v in update.items() if k not in last_writer or last_writer[k] == i}
            if kept:
                commands.append(Command(update=kept))
        return commands


def strip_private(state: Any) -> Any:
    """Hooks never see ``jump_to``."""
    if isinstance(state, dict) and "jump_to" in state:
        return {k: v for k, v in state.items() if k != "jump_to"}
    return state


@dataclass(frozen=True, slots=True)
class ModelStep:
    """The model call, run inside the fused ``model`` node between the before_model and after_model hooks.

    ``run_sync``/``run_async`` take the current view of state and return the writes of the call (the model's
    messages first, then any ``ExtendedModelResponse`` updates) and the new messages (for routing).
    """

    run_sync: Callable[[Any, Any], tuple[list[dict[str, Any]], list[Any] | None]]
    run_async: Callable[[Any, Any], Awaitable[tuple[list[dict[str, Any]], list[Any] | None]]]


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

    def __init__(self, items: Sequence[Item], semantics: StateSemantics) -> None:
        self.items = tuple(items)
        self.steps = tuple(i for i in self.items if isinstance(i, NodeStep))
        self.semantics = semantics
        self._first = self.items[0] if self.items else None
        # For the async mode: consecutive sync-only hooks run together in one worker-thread hop.
        segments: list[tuple[bool, tuple[Item, ...]]] = []
        for item in self.items:
            is_sync_batch = isinstance(item, NodeStep) and item.run_async is None
            if segments and is_sync_batch and segments[-1][0]:
                segments[-1] = (True, (*segments[-1][1], item))
            else:
                segments.append((is_sync_batch, (item,)))
        self._segments = tuple(segments)

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

    def run(self, state: Any, runtime: Runtime[Any] | None, items: Sequence[Item] | None = None) -> NodeResult:
        result = NodeResult([], None, strip_private(state), None)
        todo = self.items if items is None else items
        last = len(todo) - 1
        for index, item in enumerate(todo):
            result.tail = None
            if type(item) is ModelStep:
                self._after_model(*item.run_sync(result.view, runtime), index == last, result)
                continue
            assert isinstance(item, NodeStep)
            try:
                update = item.run_sync(result.view, runtime)
            except GraphBubbleUp:
                self._hook_interrupted(item)
                raise
            if update is not None and self._after_hook(item, update, result):
                return result
        return result

    async def arun(self, state: Any, runtime: Runtime[Any] | None) -> NodeResult:
        result = NodeResult([], None, strip_private(state), None)
        last_segment = len(self._segments) - 1
        for index, (is_sync_batch, items) in enumerate(self._segments):
            result.tail = None
            if is_sync_batch:
                batch = await run_sync_in_thread(self.run, result.view, runtime, items)
                result.writes.extend(batch.writes)
                result.view, result.jump = batch.view, batch.jump
                if batch.jump is not None:
                    return result
                continue
            item = items[0]
            if type(item) is ModelStep:
                self._after_model(*await item.run_async(result.view, runtime), index == last_segment, result)
                continue
            assert isinstance(item, NodeStep) and item.run_async is not None
            try:
                update = await item.run_async(result.view, runtime)
            except GraphBubbleUp:
                self._hook_interrupted(item)
                raise
            if update is not None and self._after_hook(item, update, result):
                return result
        return result


class InterruptInFusedNodeWarning(UserWarning):
    """A hook called ``interrupt()`` without declaring ``may_interrupt``: its node's other work re-runs on resume."""


def bridge_node_hook(
    sync_fn: Callable[..., Any] | None, async_fn: Callable[..., Any] | None
) -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Awaitable[Any]] | None]:
    """The sync runner (async twin driven to completion when only it exists) and the native async runner."""
    if sync_fn is not None:
        return sync_fn, async_fn
    assert async_fn is not None
    afn = async_fn

    def driven(state: Any, runtime: Any) -> Any:
        return run_coroutine_sync(afn(state, runtime))

    return driven, afn
