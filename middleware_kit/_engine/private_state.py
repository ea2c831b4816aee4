"""Private state never in a stream: the keys an agent keeps out of its output (``PrivateStateAttr``/``OmitFromOutput``
keys and ``jump_to``) are stored and checkpointed, shown by ``get_state``, and carried by no stream mode or event.

The LangGraph node internals this needs are :mod:`middleware_kit._engine.compat`'s (``graph_nodes``,
``set_node_mapper``, ``wrap_node_runnable``, ``untrace_routes``, ``send_writes``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.types import Command

from middleware_kit._engine.compat import (
    graph_nodes,
    send_writes,
    set_node_mapper,
    untrace_routes,
    update_pairs,
    wrap_node_runnable,
)

__all__ = ["PublicView", "hide_from_streams", "snapshot_channels", "snapshot_scope", "with_private"]

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
    - Routing functions of conditional edges read the whole state: they get no run of their own.

    Nodes, checkpoints and ``get_state`` keep every key; an explicit ``output_keys=`` is honoured as given.
    """
    shown = frozenset([public] if isinstance(public, str) else public)
    channels = _StreamChannels(key for key in compiled.stream_channels_list if key in shown)
    channels.every = list(compiled.stream_channels_list)
    compiled.stream_channels = channels
    private = frozenset(channels.every) - shown
    if private:
        _split_nodes(compiled, private)
        untrace_routes(compiled)  # a routing function reads the whole state: it gets no run of its own


def _split_nodes(compiled: Any, private: frozenset[str]) -> None:
    """Each node's input split by a mapper, each node's output by :class:`_PublicWrites`."""
    splitters: dict[tuple[tuple[str, ...], Any], Callable[[Any], Any]] = {}
    for _, node, channels in graph_nodes(compiled):
        reads = tuple(key for key in channels if key in private)
        if reads:
            # one splitter per distinct (keys, mapper): nodes reading the same channels keep sharing LangGraph's
            # per-step input cache, which is keyed on the mapper
            key = (reads, node.mapper)
            if key not in splitters:
                splitters[key] = _splitter(reads, node.mapper)
            set_node_mapper(node, splitters[key])
        wrap_node_runnable(node, lambda bound: _PublicWrites(bound, private))


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
    keys = frozenset(private)

    def split(value: Any) -> Any:
        if inner is not None:
            value = inner(value)
        if type(value) is not dict or keys.isdisjoint(value):  # the usual input: no private key set
            return value
        hidden = {key: value[key] for key in private if key in value}
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
            send_writes(config, writes)
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
