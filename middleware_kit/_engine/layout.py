"""The layout of an agent's graph: which hooks share a node, the nodes' names and order, and each node's successor.

A pure function of the pipeline (no LangGraph graph is built), returning a frozen :class:`Layout` that
:func:`middleware_kit._engine.graph.build_graph` turns into nodes and edges, and that the plan prints.

Rules (the whole of them):

- ``before_agent`` hooks share a node, then the loop: ``before_model`` hooks, the model call and the ``after_model``
  hooks share the ``model`` node; ``after_agent`` hooks share a node.
- A hook declared ``may_interrupt`` gets a node of its own, named ``"{middleware}.{hook}"``, splitting its phase.
- A shared node of hooks is named after the hook (``before_agent``); a second one in the same phase gets ``_2``.
- Successors: each node goes to the next one of its phase; the last ``before_agent`` node to the loop's entry; the
  loop's last node decides (``next`` None: tools, the loop's entry or the end); the last ``after_agent`` node to
  ``END``. The end of the run is the first ``after_agent`` node, or ``END``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from middleware_kit._engine.phases import Item, ModelStep, NodeStep

__all__ = ["END", "MODEL_NODE", "TOOLS_NODE", "Layout", "NodeSpec", "lay_out"]

MODEL_NODE = "model"
TOOLS_NODE = "tools"
END = "__end__"
"""LangGraph's ``END`` (a test pins the two together)."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of hooks (and, in ``model``, the model call)."""

    name: str
    items: tuple[Item, ...]
    next: str | None
    """The static successor; None for the node that decides between tools, the model and the end."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Every node of hooks in run order, and the three places runs enter."""

    nodes: tuple[NodeSpec, ...]
    agent_entry: str
    """Where a run starts."""
    loop_entry: str
    """Where each model turn starts (a jump to ``model`` goes here)."""
    end_entry: str
    """Where the run ends (a jump to ``end`` goes here): the first ``after_agent`` node, or ``END``."""
    has_tool_node: bool

    @property
    def order(self) -> tuple[str, ...]:
        """Node names in the order a run meets them, the tool node included."""
        names = [n.name for n in self.nodes]
        loop_end = max(i for i, n in enumerate(self.nodes) if n.next is None)
        if self.has_tool_node:
            names.insert(loop_end + 1, TOOLS_NODE)
        return tuple(names)

    @property
    def node_of(self) -> dict[tuple[str, str], str]:
        """``(middleware, hook) -> node`` for every node hook."""
        return {
            (item.owner, item.hook): node.name
            for node in self.nodes
            for item in node.items
            if isinstance(item, NodeStep)
        }


def _split(items: Sequence[Item]) -> list[tuple[Item, ...]]:
    """Consecutive items share a node; a may-interrupt hook gets a node of its own."""
    segments: list[list[Item]] = []
    for item in items:
        alone = isinstance(item, NodeStep) and item.may_interrupt
        previous_alone = bool(segments) and isinstance(segments[-1][0], NodeStep) and segments[-1][0].may_interrupt
        if alone or not segments or previous_alone:
            segments.append([item])
        else:
            segments[-1].append(item)
    return [tuple(seg) for seg in segments]


def _names(segments: Sequence[tuple[Item, ...]]) -> list[str]:
    counts: dict[str, int] = {}
    names = []
    for segment in segments:
        first = segment[0]
        if any(isinstance(item, ModelStep) for item in segment):
            names.append(MODEL_NODE)
        elif len(segment) == 1:
            assert isinstance(first, NodeStep)
            names.append(f"{first.owner}.{first.hook}")
        else:
            assert isinstance(first, NodeStep)
            counts[first.hook] = counts.get(first.hook, 0) + 1
            names.append(first.hook if counts[first.hook] == 1 else f"{first.hook}_{counts[first.hook]}")
    return names


def lay_out(phases: Mapping[str, Sequence[NodeStep]], model: ModelStep, *, has_tool_node: bool) -> Layout:
    """The layout for the node hooks of ``phases`` (each in run order) around ``model``."""
    groups = [
        _split(phases["before_agent"]),
        _split([*phases["before_model"], model, *phases["after_model"]]),
        _split(phases["after_agent"]),
    ]
    named = [list(zip(_names(segments), segments, strict=True)) for segments in groups]
    agent, loop, end = named
    loop_entry = loop[0][0]
    end_entry = end[0][0] if end else END
    afters = (loop_entry, None, END)  # what follows the last node of each group
    nodes = [
        NodeSpec(name, segment, group[k + 1][0] if k + 1 < len(group) else after)
        for group, after in zip(named, afters, strict=True)
        for k, (name, segment) in enumerate(group)
    ]
    return Layout(tuple(nodes), agent[0][0] if agent else loop_entry, loop_entry, end_entry, has_tool_node)
