"""The graph layout as a pure value: grouping, names, order, successors (no graph is built)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.constants import END as LANGGRAPH_END

from middleware_kit._engine.layout import END, MODEL_NODE, TOOLS_NODE, Layout, lay_out
from middleware_kit._engine.phases import ModelStep, NodeStep

MODEL = ModelStep(lambda view, runtime: iter(()))  # type: ignore[arg-type, return-value]


def step(owner: str, hook: str, *, alone: bool = False) -> NodeStep:
    return NodeStep(owner, hook, "sync", lambda s, r: None, None, frozenset(), alone)


def phases(**given: list[NodeStep]) -> dict[str, tuple[NodeStep, ...]]:
    names = ("before_agent", "before_model", "after_model", "after_agent")
    return {name: tuple(given.get(name, ())) for name in names}


def test_end_is_langgraphs() -> None:
    assert END == LANGGRAPH_END


def test_no_middleware_is_one_model_node() -> None:
    layout = lay_out(phases(), MODEL, has_tool_node=True)
    assert [n.name for n in layout.nodes] == [MODEL_NODE]
    assert layout.order == (MODEL_NODE, TOOLS_NODE)
    assert (layout.agent_entry, layout.loop_entry, layout.end_entry) == (MODEL_NODE, MODEL_NODE, END)
    assert layout.nodes[0].next is None  # the model node decides


def test_hooks_share_nodes_and_interrupting_hooks_get_their_own() -> None:
    layout = lay_out(
        phases(
            before_agent=[step("A", "before_agent"), step("B", "before_agent")],
            before_model=[step("A", "before_model"), step("H", "before_model", alone=True), step("B", "before_model")],
            after_model=[step("B", "after_model"), step("A", "after_model")],
            after_agent=[step("B", "after_agent"), step("A", "after_agent", alone=True), step("C", "after_agent"),
                         step("D", "after_agent")],
        ),
        MODEL,
        has_tool_node=False,
    )
    assert layout.order == (
        "before_agent", "A.before_model", "H.before_model", MODEL_NODE, "B.after_agent", "A.after_agent", "after_agent",
    )  # a node of one hook is named after it; a shared node after the hook
    successors = {n.name: n.next for n in layout.nodes}
    assert successors == {
        "before_agent": "A.before_model",
        "A.before_model": "H.before_model",
        "H.before_model": MODEL_NODE,
        MODEL_NODE: None,
        "B.after_agent": "A.after_agent",
        "A.after_agent": "after_agent",
        "after_agent": END,
    }
    assert (layout.agent_entry, layout.loop_entry, layout.end_entry) == ("before_agent", "A.before_model",
                                                                         "B.after_agent")
    assert layout.node_of[("B", "after_model")] == MODEL_NODE
    assert layout.node_of[("H", "before_model")] == "H.before_model"
    model_node = next(n for n in layout.nodes if n.name == MODEL_NODE)
    assert [getattr(i, "owner", "model") for i in model_node.items] == ["B", "model", "B", "A"]


def test_two_shared_nodes_of_one_phase_are_numbered() -> None:
    layout = lay_out(
        phases(before_agent=[step("A", "before_agent"), step("B", "before_agent"),
                             step("H", "before_agent", alone=True), step("C", "before_agent"),
                             step("D", "before_agent")]),
        MODEL,
        has_tool_node=True,
    )
    assert layout.order[:3] == ("before_agent", "H.before_agent", "before_agent_2")


def test_layout_is_frozen() -> None:
    layout = lay_out(phases(), MODEL, has_tool_node=False)
    with pytest.raises(AttributeError):
        layout.loop_entry = "x"  # type: ignore[misc]
    assert isinstance(layout, Layout)



def test_an_interrupting_after_model_hook_is_the_deciding_node_and_the_tools_follow_it() -> None:
    layout = lay_out(
        phases(after_model=[step("A", "after_model"), step("H", "after_model", alone=True)]), MODEL, has_tool_node=True
    )
    successors = {n.name: n.next for n in layout.nodes}
    assert successors == {MODEL_NODE: "H.after_model", "H.after_model": None}  # the loop's last node decides
    assert layout.order == (MODEL_NODE, "H.after_model", TOOLS_NODE)
    assert layout.node_of[("A", "after_model")] == MODEL_NODE


def test_consecutive_interrupting_hooks_each_get_a_node_and_the_loop_may_start_with_one() -> None:
    layout = lay_out(
        phases(before_model=[step("H1", "before_model", alone=True), step("H2", "before_model", alone=True),
                             step("A", "before_model")]),
        MODEL,
        has_tool_node=False,
    )
    assert layout.order == ("H1.before_model", "H2.before_model", MODEL_NODE)
    assert layout.agent_entry == layout.loop_entry == "H1.before_model"  # no before_agent hook: the loop is the start
    assert layout.node_of[("A", "before_model")] == MODEL_NODE  # a shared hook joins the model's node


def test_the_end_of_the_run_is_the_first_after_agent_node_even_one_of_its_own() -> None:
    layout = lay_out(
        phases(after_agent=[step("H", "after_agent", alone=True), step("A", "after_agent")]), MODEL,
        has_tool_node=True,
    )
    assert layout.end_entry == "H.after_agent"
    assert [(n.name, n.next) for n in layout.nodes if n.name != MODEL_NODE] == [
        ("H.after_agent", "A.after_agent"), ("A.after_agent", END)  # a node of one hook is named after it
    ]


@given(
    st.lists(st.tuples(st.sampled_from(["before_agent", "before_model", "after_model", "after_agent"]), st.booleans()),
             max_size=12),
    st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_every_hook_runs_in_exactly_one_node_and_the_chain_of_successors_is_the_run_order(
    spec: list[tuple[str, bool]], tools: bool
) -> None:
    given_phases: dict[str, list[NodeStep]] = {}
    for i, (hook, alone) in enumerate(spec):
        given_phases.setdefault(hook, []).append(step(f"m{i}", hook, alone=alone))
    layout = lay_out(phases(**given_phases), MODEL, has_tool_node=tools)
    assert sorted(layout.node_of) == sorted((f"m{i}", hook) for i, (hook, _) in enumerate(spec))
    names = [n.name for n in layout.nodes]
    assert len(set(names)) == len(names)
    # Following the static successors from the start visits every node before the deciding one, in order.
    walk: list[Any] = [layout.agent_entry]
    by_name = {n.name: n for n in layout.nodes}
    while walk[-1] in by_name and by_name[walk[-1]].next is not None:
        walk.append(by_name[walk[-1]].next)
    assert walk[-1] == MODEL_NODE or by_name[walk[-1]].next is None
    assert tuple(n for n in layout.order if n != TOOLS_NODE)[: len(walk)] == tuple(walk)
