"""How a node's updates combine with the state: the agent's declared keys and LangGraph's channels for them (reducers
applied exactly as LangGraph applies them between nodes), used wherever the engine runs several hooks in one node."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langgraph.channels.base import BaseChannel
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.graph.message import add_messages
from langgraph.types import Command, Overwrite

from middleware_kit._engine.compat import is_last_value_channel
from middleware_kit._engine.validation import check_state_update
from middleware_kit.errors import HookReturnError, InvalidJumpError, UnknownStateKeyError
from middleware_kit.hooks import JUMP_TARGETS, jump_target

__all__ = ["StateSemantics", "net_messages", "strip_private"]


class HookStep(Protocol):
    """What :meth:`StateSemantics.check` reads of a node hook (``phases.NodeStep`` is one)."""

    @property
    def owner(self) -> str: ...
    @property
    def hook(self) -> str: ...
    @property
    def can_jump_to(self) -> frozenset[str]: ...


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
        messages = channels.get("messages")
        self._plain_messages = isinstance(messages, BinaryOperatorAggregate) and messages.operator is add_messages
        """``messages`` has LangGraph's own ``add_messages`` reducer (the default): :func:`_appended` may apply it."""

    def is_last_value(self, key: str) -> bool:
        """True for keys without a reducer: two writes in one step would conflict."""
        return key in self._last_value or key not in self._channels

    def check(self, step: HookStep, update: object) -> tuple[dict[str, Any], str | None]:
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
            if key == "messages" and self._plain_messages and (appended := _appended(view.get(key), value)):
                new[key] = appended
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


_PLAIN_MESSAGES = frozenset({AIMessage, HumanMessage, SystemMessage, ToolMessage})


def _appended(left: Any, right: Any) -> list[Any] | None:
    """``add_messages(left, right)`` where it only appends (a model's new answer, a hook's new messages): ``right``
    a list of complete messages (no chunk, no ``RemoveMessage``, no dict) whose ids are set and new to ``left``, a
    list the reducer already normalised (the state's). None: the reducer applies."""
    if type(left) is not list or type(right) is not list or not right:
        return None
    ids = set()
    for message in right:
        if type(message) not in _PLAIN_MESSAGES or message.id is None or message.id in ids:
            return None
        ids.add(message.id)
    for message in left:  # a plain loop: no generator per model call
        if message.id in ids:
            return None
    return [*left, *right]


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
