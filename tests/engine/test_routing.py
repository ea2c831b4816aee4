"""Routing as pure functions: where a run goes after the model turn, on a jump, after the tools; and the edges the
graph declares for it (no graph is built)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.types import Command, Send

from middleware_kit._engine.layout import END, MODEL_NODE, TOOLS_NODE, Layout, NodeSpec
from middleware_kit._engine.pairing import pending_tool_calls
from middleware_kit._engine.routing import Router, structured_answered, tool_task_input, with_goto
from middleware_kit.hooks import JUMP_TARGETS
from middleware_kit.structured_output import ToolStrategy, parse_model_output

LOOP, END_NODE = "before_model", "after_agent"


def layout(*, tools: bool = True) -> Layout:
    """before_model -> model (decides) ... after_agent -> END: entry, loop and end are three different nodes."""
    nodes = (NodeSpec(LOOP, (), MODEL_NODE), NodeSpec(MODEL_NODE, (), None), NodeSpec(END_NODE, (), END))
    return Layout(nodes, agent_entry=LOOP, loop_entry=LOOP, end_entry=END_NODE, has_tool_node=tools)


def call(name: str, call_id: str) -> dict[str, Any]:
    return {"name": name, "args": {}, "id": call_id, "type": "tool_call"}


def calling(*calls: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=list(calls))


def answer(call_id: str, name: str | None = "search") -> ToolMessage:
    return ToolMessage("done", tool_call_id=call_id, name=name)


def structured_answer(call_id: str) -> ToolMessage:
    """The ``ToolMessage`` the engine writes for a structured-output call whose arguments parsed."""
    ai = AIMessage("", tool_calls=[{"name": "Answer", "args": {"text": "hi"}, "id": call_id, "type": "tool_call"}])
    strategy: ToolStrategy[Any] = ToolStrategy({"title": "Answer", "type": "object", "properties": {}})
    response = parse_model_output(ai, strategy)
    found = [m for m in response.result if isinstance(m, ToolMessage)]
    assert found, "parse_model_output wrote no answer for the structured call"
    return found[0]


ROUTER = Router(layout())


# -- the edges declared for each node -----------------------------------------------------------------------------
def test_the_deciding_node_may_go_to_the_tools_the_loop_or_the_end() -> None:
    assert ROUTER.destinations(None, frozenset()) == tuple(sorted({LOOP, END_NODE, TOOLS_NODE}))
    assert Router(layout(tools=False)).destinations(None, frozenset()) == tuple(sorted({LOOP, END_NODE}))


def test_a_node_with_a_successor_goes_there_and_to_its_jump_targets() -> None:
    assert ROUTER.destinations(MODEL_NODE, frozenset()) == (MODEL_NODE,)
    assert ROUTER.destinations(MODEL_NODE, frozenset({"end"})) == tuple(sorted({MODEL_NODE, END_NODE}))
    assert ROUTER.destinations(MODEL_NODE, frozenset({"model"})) == tuple(sorted({MODEL_NODE, LOOP}))
    # a jump to the tools finds nothing pending at times: the loop's entry then
    assert ROUTER.destinations(MODEL_NODE, frozenset({"tools"})) == tuple(sorted({MODEL_NODE, TOOLS_NODE, LOOP}))


def test_every_jump_target_of_the_contract_has_an_edge() -> None:
    where = {"end": END_NODE, "model": LOOP, "tools": TOOLS_NODE}
    assert set(JUMP_TARGETS) == set(where)
    for target in JUMP_TARGETS:
        assert where[target] in ROUTER.destinations("A.before_agent", frozenset({target})), target


# -- after the model turn ------------------------------------------------------------------------------------------
def test_no_model_answer_yet_ends_the_run() -> None:
    assert ROUTER.after_model([HumanMessage("hi")]) == (END_NODE, [])


def test_an_answer_without_calls_ends_the_run() -> None:
    assert ROUTER.after_model([HumanMessage("hi"), AIMessage("hello")]) == (END_NODE, [])


def test_each_pending_call_is_sent_to_the_tool_node_on_its_own_in_call_order() -> None:
    history = [HumanMessage("hi"), calling(call("search", "c1"), call("fetch", "c2"), call("search", "c3"))]
    destination, fix = ROUTER.after_model(history)
    assert fix == []
    assert destination == [Send(TOOLS_NODE, [call("search", "c1")]), Send(TOOLS_NODE, [call("fetch", "c2")]),
                           Send(TOOLS_NODE, [call("search", "c3")])]


def test_calls_already_answered_by_a_middleware_are_not_sent_again() -> None:
    history = [calling(call("search", "c1"), call("fetch", "c2"), call("fetch", "c3")), answer("c1")]
    destination, _ = ROUTER.after_model(history)
    assert destination == [Send(TOOLS_NODE, [call("fetch", "c2")]), Send(TOOLS_NODE, [call("fetch", "c3")])]


def test_a_lone_pending_call_goes_by_the_edge_and_its_task_input_holds_it_with_the_state() -> None:
    """No ``Send`` for one call: the tool node's task gets the call as LangChain's ``Send`` payload carries it."""
    history = [calling(call("search", "c1"), call("fetch", "c2")), answer("c1")]
    destination, fix = ROUTER.after_model(history)
    assert (destination, fix) == (TOOLS_NODE, [])
    state = {"messages": history, "jump_to": None}
    assert tool_task_input(state) == {"__type": "tool_call_with_context", "tool_call": call("fetch", "c2"),
                                      "state": state}


def test_a_tool_task_started_otherwise_keeps_the_state_as_its_input() -> None:
    """Several calls pending (a ``Command(goto="tools")`` of the caller's), none, or no state: as LangGraph gives it."""
    several = {"messages": [calling(call("search", "c1"), call("fetch", "c2"))]}
    answered = {"messages": [calling(call("search", "c1")), answer("c1")]}
    for state in (several, answered, {"messages": []}, {}):
        assert tool_task_input(state) is state
    calls = [call("search", "c1")]
    assert tool_task_input(calls) is calls


def test_the_model_sees_the_answers_when_a_middleware_answered_every_call() -> None:
    assert ROUTER.after_model([calling(call("search", "c1")), answer("c1")]) == (LOOP, [])


def test_calls_of_an_agent_without_tools_are_closed_and_the_run_ends() -> None:
    history = [HumanMessage("hi"), calling(call("search", "c1"))]
    destination, fix = Router(layout(tools=False)).after_model(history)
    assert destination == END_NODE
    assert [(m.tool_call_id, m.status) for m in fix] == [("c1", "error")]
    assert "this agent has no tools to run" in fix[0].content
    assert pending_tool_calls([*history, *fix]) == []


def test_a_structured_answer_ends_the_run() -> None:
    history = [calling(call("Answer", "s1")), structured_answer("s1")]
    assert ROUTER.after_model(history) == (END_NODE, [])


def test_an_answer_after_a_calling_message_closes_its_calls_and_ends() -> None:
    """A hook added a final answer after the model called tools: the calls will never run."""
    history = [calling(call("search", "c1")), AIMessage("final")]
    destination, fix = ROUTER.after_model(history)
    assert destination == END_NODE
    assert fix, "the pending call must be closed"
    assert "the run ended before it ran" in str(fix)


# -- jumps -----------------------------------------------------------------------------------------------------------
def test_jump_to_model_goes_to_the_loops_entry() -> None:
    assert ROUTER.jump("model", {"messages": [calling(call("search", "c1"))]}) == (LOOP, [])


def test_jump_to_tools_sends_the_pending_calls_or_goes_back_to_the_model() -> None:
    pending = {"messages": [calling(call("search", "c1"), call("fetch", "c2")), answer("c2", "fetch")]}
    assert ROUTER.jump("tools", pending) == (TOOLS_NODE, [])
    two = {"messages": [calling(call("search", "c1"), call("fetch", "c2"))]}
    sends = [Send(TOOLS_NODE, [call("search", "c1")]), Send(TOOLS_NODE, [call("fetch", "c2")])]
    assert ROUTER.jump("tools", two) == (sends, [])
    assert ROUTER.jump("tools", {"messages": [AIMessage("no calls")]}) == (LOOP, [])
    assert ROUTER.jump("tools", {}) == (LOOP, [])


def test_jump_to_end_closes_pending_calls() -> None:
    history = [calling(call("search", "c1"), call("fetch", "c2")), answer("c1")]
    destination, fix = ROUTER.jump("end", {"messages": history})
    assert destination == END_NODE
    assert [m.tool_call_id for m in fix] == ["c2"]
    assert pending_tool_calls([*history, *fix]) == []
    assert ROUTER.jump("end", {"messages": [AIMessage("done")]}) == (END_NODE, [])


# -- after the tools -------------------------------------------------------------------------------------------------
def test_after_the_tools_the_model_runs_again() -> None:
    assert ROUTER.after_tools({"messages": [calling(call("search", "c1")), answer("c1")]}) == LOOP


def test_a_structured_answer_beside_regular_calls_ends_after_the_tools() -> None:
    history = [calling(call("search", "c1"), call("Answer", "s1")), answer("c1"), structured_answer("s1")]
    assert ROUTER.after_tools({"messages": history}) == END_NODE


@pytest.mark.parametrize(
    ("answer_name", "expected"),
    [
        ("lookup", END_NODE),  # the return_direct tool ran
        (None, END_NODE),  # the answer has no name: the call's name decides
        ("search", LOOP),  # a reviewer ran another tool in place of the call: that tool decides
    ],
)
def test_return_direct_is_decided_by_the_tool_that_ran(answer_name: str | None, expected: str) -> None:
    router = Router(layout(), return_direct=frozenset({"lookup"}))
    history = [calling(call("lookup", "c1")), answer("c1", answer_name)]
    assert router.after_tools({"messages": history}) == expected


def test_return_direct_of_another_tool_does_not_end_the_run() -> None:
    router = Router(layout(), return_direct=frozenset({"lookup"}))
    assert router.after_tools({"messages": [calling(call("search", "c1")), answer("c1")]}) == LOOP


# -- helpers ---------------------------------------------------------------------------------------------------------
def test_with_goto_adds_the_destination_to_any_node_output() -> None:
    assert with_goto(None, "x") == Command(goto="x")
    assert with_goto({"k": 1}, "x") == Command(update={"k": 1}, goto="x")
    first: Command[Any] = Command(update={"k": 1})
    assert with_goto([first], "x") == [first, Command(goto="x")]


def test_structured_answered_only_reads_the_answers_right_after_the_message() -> None:
    history = [calling(call("Answer", "s1")), answer("c0"), structured_answer("s1"), AIMessage("later")]
    assert structured_answered(history, 0)
    assert not structured_answered([calling(call("Answer", "s1")), AIMessage("x"), structured_answer("s1")], 0)


# -- every decision is an edge the graph declared ----------------------------------------------------------------
_histories = st.lists(
    st.one_of(
        st.just("human"),
        st.just("answer"),
        st.lists(st.sampled_from(["a", "b", "c"]), max_size=3).map(tuple),  # an AIMessage with these calls
    ),
    max_size=6,
)


def _build(spec: list[Any]) -> list[Any]:
    messages: list[Any] = []
    n = 0
    for item in spec:
        if item == "human":
            messages.append(HumanMessage("hi"))
        elif item == "answer":
            pending = pending_tool_calls(messages)
            if pending:
                messages.append(answer(pending[0]["id"] or "", pending[0]["name"]))
        else:
            calls = []
            for name in item:
                n += 1
                calls.append(call(name, f"id{n}"))
            messages.append(calling(*calls) if calls else AIMessage("text"))
    return messages


def _written(messages: list[Any], fix: list[Any]) -> list[Any]:
    """The history once ``fix`` is written: appended answers, or a rewrite (``RemoveMessage`` of all, then all)."""
    if fix and isinstance(fix[0], RemoveMessage):
        return fix[1:]
    return [*messages, *fix]


def _nodes(destination: Any) -> set[str]:
    return {s.node for s in destination} if isinstance(destination, list) else {destination}


@given(_histories, st.booleans())
@settings(max_examples=80, deadline=None)
def test_every_decision_goes_along_a_declared_edge_and_leaves_no_call_open(spec: list[Any], tools: bool) -> None:
    router = Router(layout(tools=tools))
    messages = _build(spec)
    destination, fix = router.after_model(messages)
    assert _nodes(destination) <= set(router.destinations(None, frozenset()))
    if _nodes(destination) == {END_NODE}:  # a run that ends leaves no call unanswered
        assert pending_tool_calls(_written(messages, fix)) == []
    for target in JUMP_TARGETS:
        jumped, _ = router.jump(target, {"messages": messages})
        assert _nodes(jumped) <= set(router.destinations(MODEL_NODE, frozenset({target}))), target


def _task_calls(destination: Any, state: dict[str, Any]) -> list[Any]:
    """The call each tool task of ``destination`` gets as its input (a ``Send``'s arg, or what the tool node's edge
    gives it: :func:`tool_task_input` of the state)."""
    if isinstance(destination, list):
        return [call for send in destination for call in send.arg]
    task_input = tool_task_input(state)
    return [task_input["tool_call"]] if task_input is not state else []


@given(_histories)
@settings(max_examples=80, deadline=None)
def test_the_tool_tasks_hold_exactly_the_pending_calls_once_each_in_call_order(spec: list[Any]) -> None:
    """However a turn ends (one call, several, some answered by a middleware), after the model or on a jump to the
    tools: one task per pending call, whose input is that call."""
    messages = _build(spec)
    pending = pending_tool_calls(messages)
    (routed, _), (jumped, _) = ROUTER.after_model(messages), ROUTER.jump("tools", {"messages": messages})
    assert (_nodes(jumped) == {TOOLS_NODE}) == bool(pending)  # (after the model, a newer answer may end the run)
    for destination in (routed, jumped):
        if _nodes(destination) == {TOOLS_NODE}:
            assert _task_calls(destination, {"messages": messages}) == pending
            assert isinstance(destination, list) == (len(pending) > 1)  # a Send only where several run in parallel
