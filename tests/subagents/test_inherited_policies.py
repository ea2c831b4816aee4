"""Policies carried into sub-agents (docs/subagents.md): an agent run inside another agent's run applies the
caller's inherited middleware around its own stack, at any depth, under invoke and ainvoke."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Callable
from typing import Any, NotRequired

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.middlewares.budget import BudgetLimit, BudgetMiddleware
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.pii import PIIMiddleware
from middleware_kit.run_control import RunControl
from middleware_kit.testing import ScriptedChatModel, TraceRecorder, tool_call
from middleware_kit.types import AgentState, ExtendedModelResponse
from tests.conftest import Runner

EMAIL = "bob@example.com"


def pii(kind: str = "email") -> PIIMiddleware:
    mw = PIIMiddleware(kind, strategy="redact")
    mw.inherited = True  # the bundled default (helper S); set here so the test holds either way
    return mw


def task_tool(invoke: Callable[[str], str], ainvoke: Callable[[str], Any], name: str = "task") -> BaseTool:
    """A deepagents-style ``task`` tool: hands ``description`` to a sub-agent, returns its last answer."""
    return StructuredTool.from_function(func=invoke, coroutine=ainvoke, name=name,
                                        description="Delegate a task to a sub-agent.")


def agent_task(child: Any, name: str = "task") -> BaseTool:
    def invoke(description: str) -> str:
        return str(child.invoke({"messages": [HumanMessage(description)]})["messages"][-1].content)

    async def ainvoke(description: str) -> str:
        out = await child.ainvoke({"messages": [HumanMessage(description)]})
        return str(out["messages"][-1].content)

    return task_tool(invoke, ainvoke, name)


def delegate(*descriptions: str, answer: str = "parent done", tool: str = "task") -> ScriptedChatModel:
    calls = [tool_call(tool, {"description": d}) for d in descriptions]
    return ScriptedChatModel([AIMessage(content="", tool_calls=calls), answer])


def seen_by(model: ScriptedChatModel) -> list[str]:
    return [str(m.content) for call in model.calls for m in call.messages]


# -- PII redaction held inside the sub-agent ---------------------------------------------------------------------
def test_a_sub_agent_called_from_a_tool_never_sends_the_raw_value_to_its_model(run: Runner) -> None:
    child_model = ScriptedChatModel(["child done"])
    child = create_agent(child_model, name="child")
    parent = create_agent(delegate(f"write to {EMAIL}"), [agent_task(child)], middleware=[pii()], name="parent")
    out = run(parent, {"messages": [HumanMessage("hi")]})
    assert out["messages"][-1].content == "parent done"
    assert seen_by(child_model) == ["write to [REDACTED_EMAIL]"]


def test_the_sub_agents_own_state_never_holds_the_raw_value(run: Runner) -> None:
    def lookup() -> str:
        """Look the customer up."""
        return f"customer: {EMAIL}"

    child_model = ScriptedChatModel([AIMessage(content="", tool_calls=[tool_call("lookup")]), "found"])
    child = create_agent(child_model, [lookup], name="child")
    states: list[Any] = []

    def invoke(description: str) -> str:
        states.append(child.invoke({"messages": [HumanMessage(description)]}))
        return "ok"

    async def ainvoke(description: str) -> str:
        states.append(await child.ainvoke({"messages": [HumanMessage(description)]}))
        return "ok"

    guard = PIIMiddleware("email", strategy="redact", apply_to_tool_results=True)
    guard.inherited = True
    parent = create_agent(delegate(f"find {EMAIL}"), [task_tool(invoke, ainvoke)], middleware=[guard])
    run(parent, {"messages": [HumanMessage("hi")]})
    [state] = states
    texts = [str(m.content) for m in state["messages"]]
    assert texts == ["find [REDACTED_EMAIL]", "", "customer: [REDACTED_EMAIL]", "found"]
    assert all(EMAIL not in t for call in child_model.calls for t in (str(m.content) for m in call.messages))


def test_a_config_of_its_own_does_not_leave_the_callers_policies_behind(run: Runner) -> None:
    child_model = ScriptedChatModel(["child done"])
    child = create_agent(child_model, name="child")
    fresh: RunnableConfig = {"configurable": {"user_id": "u-1"}}  # taken by LangGraph in place of the caller's

    def invoke(description: str) -> str:
        return str(child.invoke({"messages": [HumanMessage(description)]}, fresh)["messages"][-1].content)

    async def ainvoke(description: str) -> str:
        return str((await child.ainvoke({"messages": [HumanMessage(description)]}, fresh))["messages"][-1].content)

    parent = create_agent(delegate(f"write to {EMAIL}"), [task_tool(invoke, ainvoke)], middleware=[pii()])
    run(parent, {"messages": [HumanMessage("hi")]})
    assert seen_by(child_model) == ["write to [REDACTED_EMAIL]"]


def test_opting_out_keeps_the_policy_at_the_top_level(run: Runner) -> None:
    child_model = ScriptedChatModel(["child done"])
    child = create_agent(child_model, name="child")
    mw = pii()
    mw.inherited = False  # before the agent is built: the opt-out
    parent = create_agent(delegate(f"write to {EMAIL}"), [agent_task(child)], middleware=[mw], name="parent")
    run(parent, {"messages": [HumanMessage("hi")]})
    assert seen_by(child_model) == [f"write to {EMAIL}"]
    assert parent.middleware_plan.inherited == ()


def test_the_opt_out_is_read_when_the_agent_is_built() -> None:
    from middleware_kit.middlewares._frozen import FrozenMiddlewareError

    mw = pii()
    create_agent(ScriptedChatModel(["x"]), middleware=[mw])
    with pytest.raises(FrozenMiddlewareError, match="inherited"):
        mw.inherited = False


def test_a_sub_agent_as_a_subgraph_node_applies_the_callers_policies(run: Runner) -> None:
    child_model = ScriptedChatModel(["child done"])
    child = create_agent(child_model, name="child")
    wrapper = StateGraph(MessagesState)
    wrapper.add_node("child", child)
    wrapper.add_edge(START, "child")
    graph = wrapper.compile()

    def invoke(description: str) -> str:
        return str(graph.invoke({"messages": [HumanMessage(description)]})["messages"][-1].content)

    async def ainvoke(description: str) -> str:
        return str((await graph.ainvoke({"messages": [HumanMessage(description)]}))["messages"][-1].content)

    parent = create_agent(delegate(f"mail {EMAIL}"), [task_tool(invoke, ainvoke)], middleware=[pii()])
    run(parent, {"messages": [HumanMessage("hi")]})
    assert seen_by(child_model) == ["mail [REDACTED_EMAIL]"]


def test_a_sub_agent_inside_a_sub_agent_applies_every_callers_policies_outermost_first(run: Runner) -> None:
    grandchild_model = ScriptedChatModel(["grandchild done"])
    grandchild = create_agent(grandchild_model, name="grandchild")
    child_model = delegate("see http://internal.example/x and " + EMAIL, answer="child done", tool="deeper")
    child = create_agent(child_model, [agent_task(grandchild, "deeper")], middleware=[pii("url")], name="child")
    parent = create_agent(delegate(f"handle {EMAIL}"), [agent_task(child)], middleware=[pii()], name="parent")
    run(parent, {"messages": [HumanMessage("hi")]})
    assert seen_by(child_model)[0] == "handle [REDACTED_EMAIL]"  # the child: its caller's policy only
    assert seen_by(grandchild_model) == ["see [REDACTED_URL] and [REDACTED_EMAIL]"]  # both callers'


def test_two_parallel_sub_agents_each_apply_the_callers_policies(run: Runner) -> None:
    barrier = threading.Barrier(2, timeout=5)

    def reply(messages: list[Any]) -> str:
        return f"done: {messages[-1].content}"

    child_model = ScriptedChatModel(default=reply)
    child = create_agent(child_model, name="child")

    def invoke(description: str) -> str:
        barrier.wait()  # both sub-agents are running at once
        return str(child.invoke({"messages": [HumanMessage(description)]})["messages"][-1].content)

    async def ainvoke(description: str) -> str:
        return str((await child.ainvoke({"messages": [HumanMessage(description)]}))["messages"][-1].content)

    parent_model = delegate(f"one {EMAIL}", "two carol@example.org")
    parent = create_agent(parent_model, [task_tool(invoke, ainvoke)], middleware=[pii()])
    out = run(parent, {"messages": [HumanMessage("hi")]})
    assert sorted(seen_by(child_model)) == ["one [REDACTED_EMAIL]", "two [REDACTED_EMAIL]"]
    answers = sorted(str(m.content) for m in out["messages"] if isinstance(m, ToolMessage))
    assert answers == ["done: one [REDACTED_EMAIL]", "done: two [REDACTED_EMAIL]"]


def test_a_top_level_run_of_the_same_agent_applies_nothing_inherited(run: Runner) -> None:
    child_model = ScriptedChatModel(["x"])
    child = create_agent(child_model, name="child")
    create_agent(delegate(EMAIL), [agent_task(child)], middleware=[pii()])
    run(child, {"messages": [HumanMessage(f"direct {EMAIL}")]})
    assert seen_by(child_model) == [f"direct {EMAIL}"]


def test_the_sub_agents_model_calls_name_the_inherited_layers(mode: str) -> None:
    child_model = ScriptedChatModel(["child done"])
    child = create_agent(child_model, name="child")
    events: list[Any] = []

    def invoke(description: str) -> str:
        for part in child.stream({"messages": [HumanMessage(description)]}, stream_mode="custom"):
            events.append(part)
        return "ok"

    async def ainvoke(description: str) -> str:
        async for part in child.astream({"messages": [HumanMessage(description)]}, stream_mode="custom"):
            events.append(part)
        return "ok"

    parent = create_agent(delegate("x"), [task_tool(invoke, ainvoke)], middleware=[pii()], name="parent")
    if mode == "invoke":
        parent.invoke({"messages": [HumanMessage("hi")]})
    else:
        asyncio.run(parent.ainvoke({"messages": [HumanMessage("hi")]}))
    found = [e for e in events if e.get("event") == "inherited_policies"]
    assert [(e["callers"], e["layers"]) for e in found] == [(["parent"], ["PIIMiddleware[email]"])]


def test_the_plan_shows_what_is_inherited() -> None:
    agent = create_agent(ScriptedChatModel(["x"]), middleware=[pii(), BudgetMiddleware(run=BudgetLimit(tokens=10))])
    plan = agent.middleware_plan
    assert plan.inherited == ("PIIMiddleware[email]", "BudgetMiddleware")
    text = str(plan)
    assert "inherited:  PIIMiddleware[email], BudgetMiddleware" in text
    assert "sub-agent:  run inside another agent's run, it applies that caller's inherited policies" in text
    assert "inherited" not in plan.engine and "inherited.wrap_model_call" not in plan.model_chain


# -- budgets: one run, parent and child ----------------------------------------------------------------------------
def used(tokens: int, text: str = "", calls: list[Any] | None = None) -> AIMessage:
    return AIMessage(content=text, tool_calls=calls or [],
                     usage_metadata={"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens})


def test_a_budget_is_spent_by_parent_and_child_together(run: Runner) -> None:
    child_model = ScriptedChatModel([used(30, calls=[tool_call("noop")]), used(30, calls=[tool_call("noop")]),
                                     used(30, "never")])

    def noop() -> str:
        """Does nothing."""
        return "ok"

    child = create_agent(child_model, [noop], name="child")
    parent_model = ScriptedChatModel([used(50, calls=[tool_call("task", {"description": "go"})]), used(1, "x")])
    budget = BudgetMiddleware(run=BudgetLimit(tokens=100), warn_at=None)
    parent = create_agent(parent_model, [agent_task(child)], middleware=[budget], name="parent")
    out = run(parent, {"messages": [HumanMessage("hi")]})
    # child: 50 + 30 = 80 (goes on), + 30 = 110: its third call is refused; the parent stops at its next check
    assert child_model.call_count == 2
    assert parent_model.call_count == 1
    assert out["messages"][-1].content.startswith("Budget exceeded: the run budget is spent")
    book = out["budget"]
    assert book["run"]["total_tokens"] == 110
    assert book["by_source"]["run"]["subagent:child"]["total_tokens"] == 60


def test_a_child_refused_by_the_budget_ends_with_the_budget_message(run: Runner) -> None:
    child_model = ScriptedChatModel(["never"])
    child = create_agent(child_model, name="child")
    parent_model = ScriptedChatModel([used(100, calls=[tool_call("task", {"description": "go"})]), "x"])
    budget = BudgetMiddleware(run=BudgetLimit(tokens=100), warn_at=None)
    # the parent's own call spends it all: its after_model ends the run before the tool runs
    parent = create_agent(parent_model, [agent_task(child)], middleware=[budget])
    out = run(parent, {"messages": [HumanMessage("hi")]})
    assert child_model.call_count == 0
    assert out["messages"][-1].content.startswith("Budget exceeded")


# -- run control: the parent's cancel and deadline stop the child --------------------------------------------------
def test_the_parents_cancel_stops_the_childs_model_call(run: Runner) -> None:
    child_model = ScriptedChatModel(["never"])
    child = create_agent(child_model, name="child")
    holder: dict[str, Any] = {}

    def invoke(description: str) -> str:
        holder["parent"].cancel("t1", reason="user left")
        return str(child.invoke({"messages": [HumanMessage(description)]})["messages"][-1].content)

    async def ainvoke(description: str) -> str:
        await holder["parent"].acancel("t1", reason="user left")
        return str((await child.ainvoke({"messages": [HumanMessage(description)]}))["messages"][-1].content)

    parent = create_agent(delegate("go"), [task_tool(invoke, ainvoke)], checkpointer=InMemorySaver())
    holder["parent"] = parent
    out = run(parent, {"messages": [HumanMessage("hi")]}, config={"configurable": {"thread_id": "t1"}})
    assert child_model.call_count == 0
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert "cancelled" in str(answer.content)
    assert out["messages"][-1].response_metadata.get("run_control") == "cancelled"


def test_the_parents_deadline_stops_the_childs_model_call(run: Runner) -> None:
    import time

    child_model = ScriptedChatModel(["never"])
    child = create_agent(child_model, name="child")

    def invoke(description: str) -> str:
        time.sleep(0.1)  # past the parent's deadline
        return str(child.invoke({"messages": [HumanMessage(description)]})["messages"][-1].content)

    async def ainvoke(description: str) -> str:
        await asyncio.sleep(0.1)
        return str((await child.ainvoke({"messages": [HumanMessage(description)]}))["messages"][-1].content)

    parent = create_agent(delegate("go"), [task_tool(invoke, ainvoke)], run_control=RunControl(deadline=0.05))
    out = run(parent, {"messages": [HumanMessage("hi")]})
    assert child_model.call_count == 0
    assert out["messages"][-1].response_metadata.get("run_control") == "deadline"


# -- human review in the child, paused and resumed from the top ----------------------------------------------------
def reviewed_pair() -> tuple[Any, ScriptedChatModel, list[str]]:
    ran: list[str] = []

    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    child_model = ScriptedChatModel([AIMessage(content="", tool_calls=[tool_call("delete_file", {"path": "/a"})]),
                                     "child done"])
    child = create_agent(child_model, [delete_file], name="child")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the parent has no delete_file: a policy shared with its sub-agents
        review = HumanInTheLoopMiddleware({"delete_file": True})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parent = create_agent(delegate("clean up"), [agent_task(child)], middleware=[review],
                              checkpointer=InMemorySaver(), name="parent")
    return parent, child_model, ran


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_review_in_the_child_pauses_the_top_level_run_and_its_resume_reaches_the_child(
    run: Runner, decision: str
) -> None:
    parent, child_model, ran = reviewed_pair()
    config = {"configurable": {"thread_id": f"review-{decision}"}}
    paused = run(parent, {"messages": [HumanMessage("hi")]}, config=config)
    [pending] = paused["__interrupt__"]
    assert pending.value["action_requests"][0]["name"] == "delete_file"
    assert ran == [] and child_model.call_count == 1
    out = run(parent, Command(resume={"decisions": [{"type": decision}]}), config=config)
    assert ran == (["/a"] if decision == "approve" else [])
    assert child_model.call_count == 2  # resuming never re-ran the child's first model call
    assert out["messages"][-1].content == "parent done"


def test_the_plan_page_shows_the_inherited_layers() -> None:
    from middleware_kit.viz import render_plan_html

    page = render_plan_html(create_agent(ScriptedChatModel(["x"]), middleware=[pii()]))
    section = page[page.index("<h2>Sub-agents</h2>"):]
    assert '<td class="mono">PIIMiddleware[email]</td>' in section
    assert "applies that caller&#x27;s inherited policies at run time" in section
    plain = render_plan_html(create_agent(ScriptedChatModel(["x"])))
    assert "hands no inherited middleware" in plain


def test_a_child_paused_for_review_charges_the_same_budget_after_the_resume(run: Runner) -> None:
    ran: list[str] = []

    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    child_model = ScriptedChatModel([used(40, calls=[tool_call("delete_file", {"path": "/a"})]), used(40, "ok")])
    child = create_agent(child_model, [delete_file], name="child")
    parent_model = ScriptedChatModel([used(100, calls=[tool_call("task", {"description": "go"})]), used(10, "x")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parent = create_agent(parent_model, [agent_task(child)], checkpointer=InMemorySaver(), middleware=[
            BudgetMiddleware(run=BudgetLimit(tokens=1_000), warn_at=None),
            HumanInTheLoopMiddleware({"delete_file": True})])
    config = {"configurable": {"thread_id": "budget-review"}}
    assert "__interrupt__" in run(parent, {"messages": [HumanMessage("hi")]}, config=config)
    out = run(parent, Command(resume={"decisions": [{"type": "approve"}]}), config=config)
    assert ran == ["/a"]
    assert out["budget"]["by_source"]["run"]["subagent:child"]["total_tokens"] == 80  # both calls, across the pause
    assert out["budget"]["run"]["total_tokens"] == 190


class Inherited(TraceRecorder):
    inherited = True


def test_layers_run_outermost_caller_first_around_the_sub_agents_stack_and_node_hooks_stay_home(run: Runner) -> None:
    trace: list[str] = []

    def echo(text: str) -> str:
        """Echo."""
        trace.append("tool")
        return text

    grandchild_model = ScriptedChatModel([AIMessage(content="", tool_calls=[tool_call("echo", {"text": "x"})]), "ok"])
    grandchild = create_agent(grandchild_model, [echo], middleware=[TraceRecorder("G", trace)], name="grandchild")
    child = create_agent(delegate("deeper", answer="child done", tool="deeper"), [agent_task(grandchild, "deeper")],
                         middleware=[Inherited("C", trace)], name="child")
    parent = create_agent(delegate("go"), [agent_task(child)], middleware=[Inherited("P", trace)], name="parent")
    run(parent, {"messages": [HumanMessage("hi")]})
    start = trace.index("G.before_agent")
    first_model_call = trace[trace.index("G.before_model", start):trace.index("G.after_model", start)]
    # each caller's stack is one onion around the next one's (a composed chain is itself a layer)
    assert first_model_call == [
        "G.before_model", "P.modify_model_request", "P.wrap_model_call>", "C.modify_model_request",
        "C.wrap_model_call>", "G.modify_model_request", "G.wrap_model_call>", "G.wrap_model_call<",
        "C.wrap_model_call<", "P.wrap_model_call<",
    ]
    tool_call_run = trace[trace.index("P.before_tool", start):trace.index("tool", start) + 1]
    assert tool_call_run == ["P.before_tool", "P.wrap_tool_call>", "C.before_tool", "C.wrap_tool_call>",
                             "G.before_tool", "G.wrap_tool_call>", "tool"]
    # the callers' node hooks ran in their own agents only: once per run of each
    assert trace.count("P.before_agent") == 1 and trace.count("C.before_agent") == 1
    assert trace.count("P.after_agent") == 1 and trace.count("C.after_agent") == 1


def test_the_parents_cancel_cuts_the_childs_model_call_in_flight(run: Runner) -> None:
    holder: dict[str, Any] = {}

    def cancelled_meanwhile(messages: list[Any]) -> str:
        holder["parent"].cancel("t-flight", reason="user left")  # arrives while the child's model call runs
        return "too late"

    child_model = ScriptedChatModel([cancelled_meanwhile])
    child = create_agent(child_model, name="child")
    parent = create_agent(delegate("go"), [agent_task(child)], checkpointer=InMemorySaver())
    holder["parent"] = parent
    out = run(parent, {"messages": [HumanMessage("hi")]}, config={"configurable": {"thread_id": "t-flight"}})
    assert child_model.call_count == 1
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert "too late" not in str(answer.content)  # the answer of a call the cancel cut is never used
    assert out["messages"][-1].response_metadata.get("run_control") == "cancelled"


class NoteState(AgentState):
    noted: NotRequired[int]


class SyncOnlyNote(AgentMiddleware[NoteState, Any]):
    """An inherited sync-only wrapper that writes a state key of its agent's schema."""

    inherited = True
    state_schema = NoteState

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        response = handler(request.override(messages=[*request.messages, HumanMessage("(noted)")]))
        return ExtendedModelResponse(model_response=response, command=Command(update={"noted": 1}))


def test_an_inherited_layers_state_writes_are_dropped_in_the_sub_agent(run: Runner) -> None:
    child_model = ScriptedChatModel(["child done"])
    child = create_agent(child_model, name="child")  # no "noted" key in its state
    parent = create_agent(delegate("go"), [agent_task(child)], middleware=[SyncOnlyNote()])
    out = run(parent, {"messages": [HumanMessage("hi")]})
    assert [str(m.content) for m in child_model.calls[0].messages] == ["go", "(noted)"]  # it ran in the child
    assert out["noted"] == 1  # and wrote its own agent's state
