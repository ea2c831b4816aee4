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
import operator
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.channels.base import BaseChannel
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite

from middleware_kit._engine.bridge import blocking_form
from middleware_kit._engine.compat import is_last_value_channel
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit._engine.internal_calls import InternalCallAbandoned
from middleware_kit._engine.validation import check_state_update, note_hook_failure
from middleware_kit.agent_defaults import AgentDefaults
from middleware_kit.agent_defaults import enter as enter_defaults
from middleware_kit.agent_defaults import leave as leave_defaults
from middleware_kit.errors import HookReturnError, InvalidJumpError, UnknownStateKeyError
from middleware_kit.events import run_lifecycle
from middleware_kit.hooks import JUMP_TARGETS, jump_target
from middleware_kit.trace_policy import config_callbacks_active

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
    engine: bool = False
    """A step of an engine layer (:func:`middleware_kit.middleware.is_engine_layer`): an idempotent check."""


class StateSemantics:
    """How updates combine: the agent's declared keys and LangGraph's channels for them."""

    def __init__(self, keys: frozenset[str], channels: Mapping[str, BaseChannel[Any, Any, Any]]) -> None:
        self.keys = keys
        self._channels = channels
        self._last_value = frozenset(
            k for k, ch in channels.items() if is_last_value_channel(ch)
        )
        self._addable = frozenset(
            k for k, ch in channels.items() if isinstance(ch, BinaryOperatorAggregate) and ch.operator is operator.add
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
        check_state_update(update, step.owner, step.hook)
        if "jump_to" not in update:
            return update, None
        rest = {k: v for k, v in update.items() if k != "jump_to"}
        target = jump_target(update["jump_to"])
        if target is None:
            return rest, None
        if target not in JUMP_TARGETS:
            raise InvalidJumpError.unknown_target(step.owner, step.hook, target)
        if target not in step.can_jump_to:
            declared = sorted(step.can_jump_to) or "none"
            raise InvalidJumpError.undeclared(step.owner, step.hook, target, declared)
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
        writes = net_messages(writes)
        last_writer: dict[str, int] = {}
        for i, update in enumerate(writes):
            for key in update:
                if key in self._last_value:
                    last_writer[key] = i
        kept_updates = [
            kept
            for i, update in enumerate(writes)
            if (kept := {k: v for k, v in update.items() if k not in last_writer or last_writer[k] == i})
        ]
        merged = self._merge(kept_updates)
        if merged is not None:  # one dict: the node's ``updates`` chunk is one dict, as for any node
            return merged
        return [Command(update=kept) for kept in kept_updates]

    def _merge(self, updates: list[dict[str, Any]]) -> dict[str, Any] | None:
        """``updates`` as one update with the same effect, or None when a key's reducer cannot combine two writes.

        ``messages`` (``add_messages``: one list applies as its parts in order, removals included) and ``operator.add``
        reducers (associative) combine; LastValue keys have one writer left (``output``).
        """
        merged: dict[str, Any] = {}
        for update in updates:
            for key, value in update.items():
                if key not in merged:
                    merged[key] = value
                elif isinstance(value, Overwrite) or isinstance(merged[key], Overwrite):
                    return None  # LangGraph's own rule applies (one Overwrite per key and step)
                elif key == "messages":
                    merged[key] = [*_message_list(merged[key]), *_message_list(value)]
                elif key in self._addable:
                    merged[key] = merged[key] + value
                else:
                    return None
        return merged


def net_messages(writes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The node's net ``messages`` update: a message written twice in one node (same id: a later hook replaced it)
    is written once, in its final version, where it was first written (where ``add_messages`` would leave it).

    So the node's output, its pending writes and every stream chunk carry only the final version. Left as they are
    when a ``RemoveMessage`` is involved (its meaning depends on the order of the writes) or nothing repeats.
    """
    carriers = [i for i, update in enumerate(writes) if "messages" in update]
    if len(carriers) < 2:
        return list(writes)
    lists = {i: _message_list(writes[i]["messages"]) for i in carriers}
    final: dict[str, BaseMessage] = {}
    seen_in: dict[str, int] = {}
    repeated = False
    for i in carriers:
        for message in lists[i]:
            if isinstance(message, RemoveMessage):
                return list(writes)
            if isinstance(message, BaseMessage) and message.id is not None:
                repeated = repeated or message.id in final
                final[message.id] = message
                seen_in.setdefault(message.id, i)
    if not repeated:
        return list(writes)
    placed: set[str] = set()
    netted: list[dict[str, Any]] = []
    for i, update in enumerate(writes):
        if i not in lists:
            netted.append(update)
            continue
        kept = []
        for message in lists[i]:
            mid = message.id if isinstance(message, BaseMessage) else None
            if mid is None:
                kept.append(message)
            elif mid not in placed and seen_in[mid] == i:
                placed.add(mid)
                kept.append(final[mid])
        rest = {k: v for k, v in update.items() if k != "messages"}
        netted.append({**rest, "messages": kept} if kept else rest)
    return [update for update in netted if update]


def _message_list(value: Any) -> list[Any]:
    if isinstance(value, BaseMessage):
        return [value]
    return list(value) if isinstance(value, list) else [value]  # as add_messages reads it


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
        """The same node with every hook a callback run (:mod:`middleware_kit.tracing`), used by the runs that have
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
        # For the async mode: consecutive sync-only hooks run together in one worker-thread hop.
        segments: list[tuple[bool, tuple[Item, ...]]] = []
        for item in self.items:
            is_sync_batch = isinstance(item, NodeStep) and item.run_async is None
            if segments and is_sync_batch and segments[-1][0]:
                segments[-1] = (True, (*segments[-1][1], item))
            else:
                segments.append((is_sync_batch, (item,)))
        self._segments = tuple(segments)
        self._one_by_one = tuple((False, (item,)) for item in self.items)

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
            return run_sync(self.flow(strip_private(state), runtime, self._one_by_one))
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
            segments = runner._one_by_one if segments is self._one_by_one else runner._segments
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
        step: under ``ainvoke`` it runs in a worker thread, its hooks one by one there."""
        __tracebackhide__ = True
        result = NodeResult([], None, view, None)
        last = len(segments) - 1
        for index, (is_batch, items) in enumerate(segments):
            result.tail = None
            item = items[0]
            if is_batch:
                batch: NodeResult = yield Step(self._batch, None, result.view, runtime, items)
                result.writes.extend(batch.writes)
                result.view, result.jump = batch.view, batch.jump
                if batch.jump is not None:
                    return result
            elif type(item) is ModelStep:
                writes, tail = yield Step(item.run_sync, item.run_async, result.view, runtime)
                self._after_model(writes, tail, index == last, result)
            else:
                assert isinstance(item, NodeStep)
                try:
                    update = yield Step(item.run_sync, item.run_async, result.view, runtime)
                except InternalCallAbandoned:  # the run was stopped during the hook's own model call: the hook's
                    update = None  # work is dropped; the run ends at its next run-control check
                except GraphBubbleUp:
                    self._hook_interrupted(item)
                    raise
                except Exception as exc:
                    note_hook_failure(exc, item.owner, item.hook)
                    raise
                if update is not None and self._after_hook(item, update, result):
                    return result
        return result

    def _batch(self, view: Any, runtime: Runtime[Any] | None, items: tuple[Item, ...]) -> NodeResult:
        __tracebackhide__ = True
        return run_sync(self._flow(view, runtime, [(False, (item,)) for item in items]))


class InterruptInFusedNodeWarning(UserWarning):
    """A hook called ``interrupt()`` without declaring ``may_interrupt``: its node's other work re-runs on resume."""


def bridge_node_hook(
    sync_fn: Callable[..., Any] | None, async_fn: Callable[..., Any] | None
) -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Awaitable[Any]] | None]:
    """The sync runner (async twin driven to completion when only it exists) and the native async runner."""
    if sync_fn is not None:
        return sync_fn, async_fn
    assert async_fn is not None
    return blocking_form(async_fn), async_fn
