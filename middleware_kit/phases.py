"""Node hooks of one phase, fused into one graph node.

Consecutive node hooks of a phase (``before_agent``, ``before_model``, ``after_model``, ``after_agent``) run inside
one LangGraph node, in order, so steps and checkpoints per model call do not grow with the number of middlewares.
Inside the node each hook sees the updates of the hooks before it, applied through the schema's channels (reducers)
exactly as LangGraph would apply them between separate nodes; the node then writes what separate nodes would have
written. A hook that may interrupt keeps a node of its own, so resuming it never re-runs its neighbours.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.channels.base import BaseChannel
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.channels.last_value import LastValue, LastValueAfterFinish
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit.bridge import run_coroutine_sync, run_sync_in_thread
from middleware_kit.errors import HookReturnError, InvalidJumpError, UnknownStateKeyError

__all__ = ["NodeStep", "PhaseRunner", "StateSemantics"]



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


class PhaseRunner:
    """Runs the steps of one fused node; returns the writes, the jump (if any) and the final view of state."""

    def __init__(self, steps: Sequence[NodeStep], semantics: StateSemantics) -> None:
        self.steps = tuple(steps)
        self.semantics = semantics
        # For the async mode: consecutive sync-only steps run together in one worker-thread hop.
        segments: list[tuple[bool, tuple[NodeStep, ...]]] = []
        for step in self.steps:
            is_sync_batch = step.run_async is None
            if segments and is_sync_batch and segments[-1][0]:
                segments[-1] = (True, (*segments[-1][1], step))
            else:
                segments.append((is_sync_batch, (step,)))
        self._segments = tuple(segments)

    def run(
        self, state: Any, runtime: Runtime[Any] | None, steps: Sequence[NodeStep] | None = None
    ) -> tuple[list[dict[str, Any]], str | None, Any]:
        view = strip_private(state)
        writes: list[dict[str, Any]] = []
        semantics = self.semantics
        for step in self.steps if steps is None else steps:
            update = step.run_sync(view, runtime)
            if update is None:
                continue
            update, jump = semantics.check(step, update)
            if update:
                writes.append(update)
                view = semantics.apply(view, update)
            if jump is not None:
                return writes, jump, view
        return writes, None, view

    async def arun(
        self, state: Any, runtime: Runtime[Any] | None
    ) -> tuple[list[dict[str, Any]], str | None, Any]:
        view = strip_private(state)
        writes: list[dict[str, Any]] = []
        semantics = self.semantics
        for is_sync_batch, steps in self._segments:
            if is_sync_batch:
                batch_writes, jump, view = await run_sync_in_thread(self.run, view, runtime, steps)
                writes.extend(batch_writes)
                if jump is not None:
                    return writes, jump, view
                continue
            step = steps[0]
            assert step.run_async is not None
            update = await step.run_async(view, runtime)
            if update is None:
                continue
            update, jump = semantics.check(step, update)
            if update:
                writes.append(update)
                view = semantics.apply(view, update)
            if jump is not None:
                return writes, jump, view
        return writes, None, view


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
