"""Every use of a LangGraph private API, in one place (a LangGraph upgrade breaks here, not everywhere).

Supported: ``SUPPORTED_LANGGRAPH`` (pinned by ``tests/core/test_compat.py``, which imports each name below). The bundled
middlewares may import from here too (``mark_invalid_resume``, ``CONFIG_KEY_CHECKPOINTER``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from langgraph import errors as _errors
from langgraph._internal._runnable import RunnableCallable
from langgraph._internal._typing import StateLike
from langgraph.channels.base import BaseChannel
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.channels.last_value import LastValue, LastValueAfterFinish
from langgraph.constants import CONFIG_KEY_CHECKPOINTER, START
from langgraph.prebuilt.tool_node import ToolNode, ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command, StateUpdate

__all__ = [
    "CONFIG_KEY_CHECKPOINTER",
    "SUPPORTED_LANGGRAPH",
    "StateLike",
    "is_last_value_channel",
    "mark_invalid_resume",
    "node_runnable",
    "tool_node_one_call",
    "transform_input",
    "update_pairs",
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
    compiled.__class__ = _guarded_class(type(compiled))


def _transform_of(graph: Any) -> Callable[[Any], Any]:
    channel = graph.channels.get(START)
    return channel.transform if isinstance(channel, _TransformedInput) else _identity


def _updates(graph: Any, supersteps: Sequence[Sequence[StateUpdate]]) -> list[list[StateUpdate]]:
    transform = _transform_of(graph)
    return [[update._replace(values=transform(update.values)) for update in step] for step in supersteps]


_GUARDED: dict[type, type] = {}


def _guarded_class(base: type) -> type:
    """``base`` (a compiled graph class) whose entry points apply the input channel's transform to Commands and
    state updates. One class per base class, made once (module state, immutable after creation)."""
    if base in _GUARDED or base in _GUARDED.values():
        return _GUARDED.get(base, base)

    class Guarded(base):  # type: ignore[misc]
        def stream(self, input: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(input, Command):
                input = _transform_of(self)(input)
            return super().stream(input, *args, **kwargs)

        def astream(self, input: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(input, Command):
                input = _transform_of(self)(input)
            return super().astream(input, *args, **kwargs)

        def bulk_update_state(self, config: Any, supersteps: Sequence[Sequence[StateUpdate]]) -> Any:
            return super().bulk_update_state(config, _updates(self, supersteps))

        async def abulk_update_state(self, config: Any, supersteps: Sequence[Sequence[StateUpdate]]) -> Any:
            return await super().abulk_update_state(config, _updates(self, supersteps))

    Guarded.__name__ = Guarded.__qualname__ = base.__name__
    Guarded.__module__ = base.__module__
    return _GUARDED.setdefault(base, Guarded)

