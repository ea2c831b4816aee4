"""Every use of a LangGraph private API, in one place (a LangGraph upgrade breaks here, not everywhere).

Supported: ``SUPPORTED_LANGGRAPH`` (pinned by ``tests/core/test_compat.py``, which imports each name below). The bundled
middlewares may import from here too (``mark_invalid_resume``, ``CONFIG_KEY_CHECKPOINTER``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph import errors as _errors
from langgraph._internal._config import DEFAULT_RECURSION_LIMIT
from langgraph._internal._constants import CONF, CONFIG_KEY_SEND, CONFIG_KEY_STRICT_RESUME
from langgraph._internal._runnable import RunnableCallable, RunnableSeq
from langgraph._internal._typing import StateLike
from langgraph.channels.base import BaseChannel
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.channels.last_value import LastValue, LastValueAfterFinish
from langgraph.constants import CONFIG_KEY_CHECKPOINTER, START
from langgraph.prebuilt.tool_node import ToolNode, ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command

__all__ = [
    "CONFIG_KEY_CHECKPOINTER",
    "CONFIG_KEY_STRICT_RESUME",
    "DEFAULT_RECURSION_LIMIT",
    "SUPPORTED_LANGGRAPH",
    "PublicView",
    "StateLike",
    "hide_from_streams",
    "is_last_value_channel",
    "mark_invalid_resume",
    "node_runnable",
    "snapshot_channels",
    "snapshot_scope",
    "tool_node_one_call",
    "transform_input",
    "transform_of",
    "update_pairs",
    "with_private",
]

SUPPORTED_LANGGRAPH = (">=1.0", "<1.3")
"""The langgraph versions this module is written (and tested) against."""


def node_runnable(func: Callable[..., Any], afunc: Callable[..., Any], name: str) -> Any:
    """A graph node from a sync and an async function, without a tracing span of its own (as LangGraph's nodes)."""
    return RunnableCallable(func, afunc, name=name, trace=False)


def update_pairs(command: Command[Any]) -> Sequence[tuple[str, Any]]:
    """``Command.update`` as ``(key, value)`` pairs, whatever its form (dict, pairs, dataclass, pydantic)."""
    return command._update_as_tuples()


_mark: Callable[[BaseException], None] | None = getattr(_errors, "_mark_invalid_resume", None)


def mark_invalid_resume(error: BaseException) -> None:
    """Mark ``error`` as a bad resume value, so ``ToolNode`` re-raises it instead of answering the model with it."""
    if _mark is not None:
        _mark(error)


_LAST_VALUE = (LastValue, LastValueAfterFinish, EphemeralValue)


def is_last_value_channel(channel: BaseChannel[Any, Any, Any]) -> bool:
    """True for a channel without a reducer (two writes in one step conflict)."""
    return isinstance(channel, _LAST_VALUE)


_TOOL_RUNTIME_FIELDS = tuple(f.name for f in dataclasses.fields(ToolRuntime))


def tool_node_one_call(node: ToolNode, input: Any, config: Any, runtime: Runtime[Any]) -> tuple[Any, ...] | None:
    """For an input holding exactly one tool call: ``(call, input_type, tool_runtime)`` as ``ToolNode`` builds them
    (so the call can run inline, without ``ToolNode``'s per-invoke thread pool); None for 0 or several calls."""
    from langchain_core.runnables.config import get_config_list

    tool_calls, input_type = node._parse_input(input)
    if len(tool_calls) != 1:
        return None
    call = tool_calls[0]
    cfg = get_config_list(config, 1)[0]
    fields = {name: getattr(runtime, name) for name in _TOOL_RUNTIME_FIELDS if hasattr(runtime, name)}
    fields.update(
        state=node._extract_state(input, cfg),
        tool_call_id=call["id"],
        config=cfg,
        tools=list(node.tools_by_name.values()),
    )
    return call, input_type, ToolRuntime(**fields)


class _TransformedInput(EphemeralValue[Any]):
    """The graph's input channel (``__start__``) with a transform applied to each input before it is stored."""

    __slots__ = ("transform",)

    def __init__(self, typ: Any, guard: bool = True) -> None:
        super().__init__(typ, guard)
        self.transform: Callable[[Any], Any] = _identity

    def copy(self) -> _TransformedInput:
        empty = super().copy()
        empty.transform = self.transform
        return empty

    def from_checkpoint(self, checkpoint: Any) -> _TransformedInput:
        empty = super().from_checkpoint(checkpoint)
        empty.transform = self.transform
        return empty

    def update(self, values: Sequence[Any]) -> bool:
        return super().update([self.transform(value) for value in values])


def _identity(value: Any) -> Any:
    return value


def transform_input(compiled: Any, transform: Callable[[Any], Any]) -> None:
    """Apply ``transform`` to every outside write before LangGraph stores it: the graph input (in its ``__start__``
    channel, which is checkpointed and which the ``__start__`` task writes to the state channels from), an input
    ``Command``'s update and ``update_state`` values (which LangGraph stores as pending writes as they are).

    ``transform`` lives on the input channel, which ``compiled.copy()``/``with_config()`` keep (as they keep the
    class); no attribute is added to the graph object.
    """
    current = compiled.channels[START]
    channel = _TransformedInput(current.typ, current.guard)
    channel.key = current.key
    channel.transform = transform
    compiled.channels[START] = channel


def transform_of(graph: Any) -> Callable[[Any], Any]:
    """The transform :func:`transform_input` put on ``graph``'s input (the identity when none): the agent's entry
    points (:class:`middleware_kit.compiled.CompiledAgent`) apply it to an input ``Command`` and to state updates."""
    channel = graph.channels.get(START)
    return channel.transform if isinstance(channel, _TransformedInput) else _identity


# --- private state never in a stream (issue 18 item 4) -----------------------------------------------------------

_SNAPSHOT: ContextVar[bool] = ContextVar("middleware_kit_state_snapshot", default=False)
"""True while LangGraph assembles a ``StateSnapshot`` (``get_state``/``get_state_history``), which reads every key."""


class _StreamChannels(list[str]):
    """The channels a graph streams (the public ones), carrying every state channel for state snapshots. It lives in
    ``stream_channels``, so ``copy()``/``with_config()`` keep it and the graph object gets no new attribute."""

    __slots__ = ("every",)
    every: list[str]


def hide_from_streams(compiled: Any, public: str | Sequence[str]) -> None:
    """Keep every state key that is not ``public`` (the output schema's keys: so ``PrivateStateAttr``/
    ``OmitFromOutput`` keys and ``jump_to``) out of every stream mode and event, also in a subgraph:

    - ``updates``/``values``/``checkpoints`` and task results in ``tasks``/``debug``: LangGraph streams only
      ``stream_channels`` (by default every state key); set once here, free per call. The same property is what
      ``get_state``/``get_state_history`` read, so the graph's class makes a snapshot read every key (a ContextVar,
      set only while a snapshot is assembled): state inspection keeps showing the private keys.
    - Task inputs (``tasks``/``debug`` task chunks, ``on_chain_start`` of a node in ``astream_events``): a node whose
      input has private keys gets a ``mapper`` splitting it into a :class:`PublicView`; the node joins it back with
      :func:`with_private` (the tool node through ``_extract_state``).
    - Node outputs (``on_chain_stream``/``on_chain_end`` of a node in ``astream_events``): the node's private writes
      go to their channels directly (``CONFIG_KEY_SEND``, as LangGraph's own writers do) and its returned update
      keeps the public keys only; the writes are the same, in the same step.
    - Routing functions of conditional edges (``after_tools``) read the whole state: they get no run of their own.

    Nodes, checkpoints and ``get_state`` keep every key; an explicit ``output_keys=`` is honoured as given.
    """
    shown = frozenset([public] if isinstance(public, str) else public)
    channels = _StreamChannels(key for key in compiled.stream_channels_list if key in shown)
    channels.every = list(compiled.stream_channels_list)
    compiled.stream_channels = channels
    private = frozenset(channels.every) - shown
    if private:
        _split_nodes(compiled, private)
        _untrace_routes(compiled)


def _split_nodes(compiled: Any, private: frozenset[str]) -> None:
    """Each node's input split by a mapper, each node's output by :class:`_PublicWrites`."""
    splitters: dict[tuple[tuple[str, ...], Any], Callable[[Any], Any]] = {}
    for name, node in compiled.nodes.items():
        if name == START or not isinstance(node.channels, list):
            continue
        reads = tuple(key for key in node.channels if key in private)
        if reads:
            # one splitter per distinct (keys, mapper): nodes reading the same channels keep sharing LangGraph's
            # per-step input cache, which is keyed on the mapper
            key = (reads, node.mapper)
            if key not in splitters:
                splitters[key] = _splitter(reads, node.mapper)
            node.mapper = splitters[key]
            node.__dict__.pop("input_cache_key", None)  # a cached_property of the old mapper
        runs = node.node
        if isinstance(runs, RunnableSeq) and runs.steps[0] is node.bound:
            # what runs the node (LangGraph caches it): the node's own runnable, then its writers. ``bound`` and
            # ``writers`` stay as they are (the graph drawing, subgraph lookup and ``Command(graph=...)`` from a
            # child use them); only the task's runnable returns the public part of the update.
            seq = copy.copy(runs)  # the same name, trace settings and writers
            seq.steps = [_PublicWrites(node.bound, private), *runs.steps[1:]]
            node.__dict__["node"] = seq


def _untrace_routes(compiled: Any) -> None:
    """A routing function reads the whole state: it runs without a run of its own (as the nodes' own functions
    do), so its input (private keys included) never reaches a callback or an event."""
    for branches in compiled.builder.branches.values():
        for branch in branches.values():
            if isinstance(branch.path, RunnableCallable) and branch.input_schema is None:
                branch.path.trace = False


class PublicView(dict[str, Any]):
    """A node's input as LangGraph records it (the ``input`` of ``tasks``/``debug`` task chunks): the public keys
    only. The private ones ride along in ``private`` (not part of the dict, its ``repr`` or its serialization)."""

    __slots__ = ("private",)
    private: dict[str, Any]

    def __copy__(self) -> PublicView:  # LangGraph shallow-copies cached inputs
        view = PublicView(self)
        view.private = self.private
        return view


def _splitter(private: tuple[str, ...], inner: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    def split(value: Any) -> Any:
        if inner is not None:
            value = inner(value)
        if type(value) is not dict:
            return value
        hidden = {key: value[key] for key in private if key in value}
        if not hidden:
            return value
        view = PublicView({key: item for key, item in value.items() if key not in hidden})
        view.private = hidden
        return view

    return split


def with_private(state: Any) -> Any:
    """A node's whole input: what :func:`hide_from_streams`' mapper split off, joined again (one type check)."""
    if type(state) is PublicView:
        return {**state, **state.private}
    return state


class _PublicWrites(Runnable[Any, Any]):
    """Runs a node's runnable, writes the private keys of its update to their channels and returns the rest."""

    def __init__(self, bound: Runnable[Any, Any], private: frozenset[str]) -> None:
        self.bound = bound
        self.private = private
        self.name = bound.get_name()

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._public(self.bound.invoke(input, config, **kwargs), config)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._public(await self.bound.ainvoke(input, config, **kwargs), config)

    def _public(self, output: Any, config: RunnableConfig | None) -> Any:
        writes: list[tuple[str, Any]] = []
        public = _without(output, self.private, writes)
        if writes and config is not None:
            config[CONF][CONFIG_KEY_SEND](writes)
        return public


def _without(value: Any, private: frozenset[str], writes: list[tuple[str, Any]]) -> Any:
    """``value`` (a node's return: a dict, a ``Command`` or a list of them) without the ``private`` keys, which are
    appended to ``writes`` in order. Untouched (the same object) when it has none."""
    if isinstance(value, dict):
        if private.isdisjoint(value):
            return value
        writes.extend((key, item) for key, item in value.items() if key in private)
        return {key: item for key, item in value.items() if key not in private}
    if isinstance(value, Command):
        update = value.update
        if value.graph is not None or update is None or (type(update) is dict and private.isdisjoint(update)):
            return value  # nothing private (a parent's update is the parent's business)
        pairs = update_pairs(value)
        if all(key not in private for key, _ in pairs):
            return value
        writes.extend((key, item) for key, item in pairs if key in private)
        kept = [(key, item) for key, item in pairs if key not in private]
        return Command(update=dict(kept) if type(update) is dict else kept, resume=value.resume, goto=value.goto)
    if isinstance(value, (list, tuple)):
        parts = [_without(item, private, writes) for item in value]
        if all(part is item for part, item in zip(parts, value, strict=True)):
            return value
        return type(value)(parts)
    return value


def snapshot_channels(channels: Any) -> Any:
    """What a graph's ``stream_channels_asis`` is: every state key while a state snapshot is assembled (inspection
    shows private keys), else the streamed (public) ones :func:`hide_from_streams` set."""
    if _SNAPSHOT.get() and isinstance(channels, _StreamChannels):
        return channels.every
    return channels


@contextlib.contextmanager
def snapshot_scope() -> Iterator[None]:
    """While LangGraph assembles a ``StateSnapshot`` (``get_state``/``get_state_history``): every key is read."""
    token = _SNAPSHOT.set(True)
    try:
        yield
    finally:
        _SNAPSHOT.reset(token)
