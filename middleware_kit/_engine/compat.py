"""Every use of a LangGraph (or langchain-core) private API, in one place (an upgrade breaks here, not everywhere).

Supported: ``SUPPORTED_LANGGRAPH`` (pinned by ``tests/core/test_compat.py``, which imports each name below). The bundled
middlewares may import from here too (``mark_invalid_resume``, ``CONFIG_KEY_CHECKPOINTER``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core._api import LangChainBetaWarning
from langchain_core.language_models._compat_bridge import message_to_events
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config
from langchain_core.tracers._streaming import _V2StreamingCallbackHandler as V2StreamingCallbackHandler
from langgraph import errors as _errors
from langgraph._internal._config import DEFAULT_RECURSION_LIMIT
from langgraph._internal._constants import CONF, CONFIG_KEY_SCRATCHPAD, CONFIG_KEY_SEND, CONFIG_KEY_STRICT_RESUME
from langgraph._internal._runnable import RunnableCallable, RunnableSeq
from langgraph._internal._typing import StateLike
from langgraph.channels.base import BaseChannel
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.channels.last_value import LastValue, LastValueAfterFinish
from langgraph.constants import CONFIG_KEY_CHECKPOINTER, START
from langgraph.prebuilt.tool_node import ToolNode, ToolRuntime
from langgraph.pregel._checkpoint import put_writes_accepts_task_path
from langgraph.pregel._task_status import read_task_statuses
from langgraph.runtime import Runtime
from langgraph.types import Command

__all__ = [
    "CONFIG_KEY_CHECKPOINTER",
    "CONFIG_KEY_STRICT_RESUME",
    "DEFAULT_RECURSION_LIMIT",
    "LangChainBetaWarning",
    "SUPPORTED_LANGGRAPH",
    "StateLike",
    "V2StreamingCallbackHandler",
    "graph_nodes",
    "is_last_value_channel",
    "map_node_input",
    "mark_invalid_resume",
    "message_to_events",
    "PG_LOAD_CHECKPOINT_TUPLE",
    "node_runnable",
    "pg_checkpoint_query",
    "put_writes_accepts_task_path",
    "read_task_statuses",
    "send_writes",
    "set_node_mapper",
    "is_internal_config_key",
    "task_run_marker",
    "task_steps",
    "tool_node_one_call",
    "transform_input",
    "transform_of",
    "untrace_routes",
    "update_pairs",
    "wrap_node_runnable",
]

SUPPORTED_LANGGRAPH = (">=1.0", "<1.3")
"""The langgraph versions this module is written (and tested) against."""


class _NodeCall:
    """A node's function as LangGraph calls it (``state``, ``runtime``), held by an object: LangGraph searches a
    plain function's closure and bytecode for a subgraph at every build; a node of hooks never is one."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        self.fn = fn

    def __call__(self, state: Any, runtime: Runtime[Any]) -> Any:
        __tracebackhide__ = True
        return self.fn(state, runtime)


class _ANodeCall(_NodeCall):
    async def __call__(self, state: Any, runtime: Runtime[Any]) -> Any:
        __tracebackhide__ = True
        return await self.fn(state, runtime)


def node_runnable(func: Callable[[Any, Any], Any], afunc: Callable[[Any, Any], Any], name: str) -> Any:
    """A graph node from a sync and an async function of ``(state, runtime)``, without a tracing span of its own (as
    LangGraph's nodes), and without LangGraph's subgraph search (:class:`_NodeCall`)."""
    return RunnableCallable(_NodeCall(func), _ANodeCall(afunc), name=name, trace=False)


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


_RUNTIME_FIELDS: dict[type, tuple[str, ...]] = {}


def _runtime_fields(runtime: Any) -> tuple[str, ...]:
    """The ``ToolRuntime`` fields ``runtime`` has (read once per runtime type: its attributes are its class's)."""
    found = _RUNTIME_FIELDS.get(type(runtime))
    if found is None:
        found = _RUNTIME_FIELDS[type(runtime)] = tuple(n for n in _TOOL_RUNTIME_FIELDS if hasattr(runtime, n))
    return found


def tool_node_one_call(node: ToolNode, input: Any, config: Any, runtime: Runtime[Any]) -> tuple[Any, ...] | None:
    """For an input holding exactly one tool call: ``(call, input_type, tool_runtime)`` as ``ToolNode`` builds them
    (so the call can run inline, without ``ToolNode``'s per-invoke thread pool); None for 0 or several calls."""
    tool_calls, input_type = node._parse_input(input)
    if len(tool_calls) != 1:
        return None
    call = tool_calls[0]
    cfg = ensure_config(config)  # what ToolNode's get_config_list(config, 1) makes of the one config
    fields = {name: getattr(runtime, name) for name in _runtime_fields(runtime)}
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


# --- the node internals hiding private state needs (see middleware_kit._engine.private_state) --------------------


def graph_nodes(compiled: Any) -> Iterator[tuple[str, Any, tuple[str, ...]]]:
    """``(name, node, channels it reads)`` for each node of ``compiled`` that reads a list of channels (not
    ``__start__``)."""
    for name, node in compiled.nodes.items():
        if name != START and isinstance(node.channels, list):
            yield name, node, tuple(node.channels)


def set_node_mapper(node: Any, mapper: Callable[[Any], Any]) -> None:
    """Give ``node`` a new input mapper (LangGraph caches the old mapper's key: dropped)."""
    node.mapper = mapper
    node.__dict__.pop("input_cache_key", None)  # a cached_property of the old mapper


def wrap_node_runnable(node: Any, wrap: Callable[[Runnable[Any, Any]], Runnable[Any, Any]]) -> None:
    """Replace what runs ``node`` (LangGraph caches it: the node's own runnable, then its writers) by
    ``wrap(node.bound)`` followed by the same writers. ``bound`` and ``writers`` stay as they are (the graph drawing,
    subgraph lookup and ``Command(graph=...)`` from a child use them)."""
    runs = node.node
    if isinstance(runs, RunnableSeq) and runs.steps[0] is node.bound:
        seq = copy.copy(runs)  # the same name, trace settings and writers
        seq.steps = [wrap(node.bound), *runs.steps[1:]]
        node.__dict__["node"] = seq


def untrace_routes(compiled: Any) -> None:
    """Routing functions of conditional edges run without a run of their own (as the nodes' own functions do)."""
    for branches in compiled.builder.branches.values():
        for branch in branches.values():
            if isinstance(branch.path, RunnableCallable) and branch.input_schema is None:
                branch.path.trace = False


def map_node_input(compiled: Any, node_name: str, mapper: Callable[[Any], Any]) -> None:
    """Apply ``mapper`` to ``node_name``'s input when its edge starts it (after the node's own mapper; a ``Send``'s
    input is given as it is). Kept by ``copy()``/``with_config()``, which share the nodes."""
    node = compiled.nodes[node_name]
    inner = node.mapper
    if inner is None:
        set_node_mapper(node, mapper)
        return

    def mapped(value: Any) -> Any:
        return mapper(inner(value))

    set_node_mapper(node, mapped)


def send_writes(config: RunnableConfig, writes: list[tuple[str, Any]]) -> None:
    """Write ``writes`` to their channels from inside a node, as LangGraph's own writers do."""
    config[CONF][CONFIG_KEY_SEND](writes)


def task_run_marker(configurable: Mapping[str, Any]) -> Any:
    """An object that lives exactly as long as the current run of the current task, weakly referenceable; None
    outside a LangGraph task: the task's scratchpad (made for each run of a task) is slotted, so its
    ``get_null_resume``, a closure made with it, stands for it."""
    pad = configurable.get(CONFIG_KEY_SCRATCHPAD)
    return getattr(pad, "get_null_resume", None)


def task_steps(configurable: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(step, stop)`` of the current task's run (LangGraph stops before step ``stop``: the invocation's first step
    plus its recursion limit), from the task's scratchpad; None outside a task."""
    pad = configurable.get(CONFIG_KEY_SCRATCHPAD)
    step, stop = getattr(pad, "step", None), getattr(pad, "stop", None)
    return (step, stop) if isinstance(step, int) and isinstance(stop, int) else None


def is_internal_config_key(key: str) -> bool:
    """Whether ``key`` of ``config["configurable"]`` is one of LangGraph's internals (the channels, the scratchpad,
    the checkpointer lent to a task...)."""
    return key.startswith("__pregel_")


# --- PostgresSaver internals run control reads the thread with (run_control/lease.py) ----------------------------
PG_LOAD_CHECKPOINT_TUPLE = "_load_checkpoint_tuple"
"""``PostgresSaver``/``AsyncPostgresSaver``'s method that turns a row of its ``SELECT_SQL`` into a checkpoint tuple."""


def pg_checkpoint_query(saver: Any, config: Any) -> tuple[str, tuple[Any, ...]]:
    """``PostgresSaver.get_tuple``'s query for ``config`` (the checkpoint it names, else the thread's latest)."""
    from langgraph.checkpoint.base import get_checkpoint_id

    configurable = config["configurable"]
    thread_id, checkpoint_ns = configurable["thread_id"], configurable.get("checkpoint_ns", "")
    checkpoint_id = get_checkpoint_id(config)
    if checkpoint_id:
        return (saver.SELECT_SQL + "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
                (thread_id, checkpoint_ns, checkpoint_id))
    return (saver.SELECT_SQL + "WHERE thread_id = %s AND checkpoint_ns = %s ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, checkpoint_ns))
