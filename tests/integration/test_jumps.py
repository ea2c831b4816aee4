"""jump_to: every target, declared-only, and every routing error."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from middleware_kit import (
    AgentMiddleware,
    InvalidJumpError,
    MiddlewareConfigError,
    after_agent,
    after_model,
    before_agent,
    before_model,
    create_agent,
    hook_config,
)
from middleware_kit.testing import ScriptedChatModel, TraceRecorder, tool_call
from tests.conftest import Runner, add
from tests.helpers import kinds, tool_then_answer


def test_before_model_jump_to_end_skips_model_and_later_hooks_but_runs_after_agent(run: Runner) -> None:
    trace: list[str] = []

    @before_model(can_jump_to=["end"])
    def stop(state: Any, runtime: Any) -> dict[str, Any]:
        trace.append("stop")
        return {"messages": [AIMessage("stopped early")], "jump_to": "end"}

    model = ScriptedChatModel([])
    agent = create_agent(model, [add], middleware=[TraceRecorder("A", trace), stop, TraceRecorder("C", trace)])
    result = run(agent, {"messages": [HumanMessage("q")]})
    assert model.call_count == 0
    assert trace == [
        "A.before_agent", "C.before_agent", "A.before_model", "stop", "C.after_agent", "A.after_agent",
    ]
    assert [m.content for m in result["messages"]] == ["q", "stopped early"]
    assert "jump_to" not in result


def test_after_model_jump_to_end_closes_dangling_tool_calls(run: Runner) -> None:
    @after_model(can_jump_to=["end"])
    def halt(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end"}

    agent = create_agent(tool_then_answer(), [add], middleware=[halt])
    result = run(agent, {"messages": [HumanMessage("q")]})
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage"]
    closing = result["messages"][-1]
    assert closing.status == "error" and closing.tool_call_id == result["messages"][1].tool_calls[0]["id"]
    assert "not executed" in closing.content


def test_after_model_jump_to_model_loops_back_through_before_model(run: Runner) -> None:
    trace: list[str] = []

    class Again(AgentMiddleware):
        @hook_config(can_jump_to=["model"])
        def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            trace.append("after_model")
            if len(state["messages"]) < 4:
                return {"messages": [HumanMessage("try again")], "jump_to": "model"}
            return None

        def before_model(self, state: Any, runtime: Any) -> None:
            trace.append("before_model")

    model = ScriptedChatModel(["first", "second"])
    result = run(create_agent(model, middleware=[Again()]), {"messages": [HumanMessage("q")]})
    assert [m.content for m in result["messages"]] == ["q", "first", "try again", "second"]
    assert trace == ["before_model", "after_model", "before_model", "after_model"]


def test_before_agent_jump_to_tools_runs_pending_calls(run: Runner) -> None:
    @before_agent(can_jump_to=["tools"])
    async def resume_tools(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "tools"}

    model = ScriptedChatModel(["after tools"])
    history = [HumanMessage("q"), AIMessage("", tool_calls=[tool_call("add", {"a": 2, "b": 2}, id="t1")])]
    result = run(create_agent(model, [add], middleware=[resume_tools]), {"messages": history})
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert result["messages"][2].content == "4"


def test_jump_to_none_is_no_jump(run: Runner) -> None:
    @before_model(can_jump_to=["end"])
    def maybe(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": None}

    result = run(create_agent(ScriptedChatModel(["a"]), middleware=[maybe]), {"messages": [HumanMessage("q")]})
    assert result["messages"][-1].content == "a"


def test_undeclared_jump_raises_naming_middleware_hook_and_fix(run: Runner) -> None:
    @before_model
    def sneaky(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end"}

    with pytest.raises(InvalidJumpError) as err:
        run(create_agent(ScriptedChatModel(["a"]), middleware=[sneaky]), {"messages": [HumanMessage("q")]})
    assert (err.value.middleware, err.value.hook) == ("sneaky", "before_model")
    assert "can_jump_to=['end']" in str(err.value)


def test_unknown_jump_target_raises(run: Runner) -> None:
    @after_model(can_jump_to=["end"])
    def typo(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "finish"}

    with pytest.raises(InvalidJumpError, match="'model', 'tools' and 'end'"):
        run(create_agent(ScriptedChatModel(["a"]), middleware=[typo]), {"messages": [HumanMessage("q")]})


def test_jump_to_model_from_before_model_is_refused_at_build_time() -> None:
    @before_model(can_jump_to=["model"])
    def loop(state: Any, runtime: Any) -> None:
        return None

    with pytest.raises(MiddlewareConfigError, match="forever") as err:
        create_agent(ScriptedChatModel([]), middleware=[loop])
    assert (err.value.middleware, err.value.hook) == ("loop", "before_model")


def test_jump_to_tools_without_tools_is_refused_at_build_time() -> None:
    @after_model(can_jump_to=["tools"])
    def to_tools(state: Any, runtime: Any) -> None:
        return None

    with pytest.raises(MiddlewareConfigError, match="no tools"):
        create_agent(ScriptedChatModel([]), middleware=[to_tools])
    create_agent(ScriptedChatModel([]), [add], middleware=[to_tools])  # fine with tools


def test_after_agent_may_jump_only_to_end() -> None:
    # LangChain 1.5: after_agent may declare can_jump_to=["end"] (the run ends there); nothing else.
    @after_agent(can_jump_to=["end"])
    def late(state: Any, runtime: Any) -> None:
        return None

    create_agent(ScriptedChatModel([]), middleware=[late])

    @after_agent(can_jump_to=["model"])
    def looping(state: Any, runtime: Any) -> None:
        return None

    with pytest.raises(MiddlewareConfigError, match=r"allowed here: \['end'\]"):
        create_agent(ScriptedChatModel([]), middleware=[looping])


def test_unknown_declared_target_is_refused_at_build_time() -> None:
    @before_model(can_jump_to=["somewhere"])
    def odd(state: Any, runtime: Any) -> None:
        return None

    with pytest.raises(MiddlewareConfigError, match="somewhere"):
        create_agent(ScriptedChatModel([]), middleware=[odd])


def test_wrap_decorators_refuse_routing_options() -> None:
    from middleware_kit import wrap_model_call

    with pytest.raises(MiddlewareConfigError, match="only node hooks"):
        wrap_model_call(can_jump_to=["end"])


def test_jump_in_fused_node_stops_later_hooks_of_the_phase(run: Runner) -> None:
    ran: list[str] = []

    @after_model
    def outer(state: Any, runtime: Any) -> None:
        ran.append("outer")

    @after_model(can_jump_to=["end"])
    def middle(state: Any, runtime: Any) -> dict[str, Any]:
        ran.append("middle")
        return {"jump_to": "end"}

    @after_model
    def inner(state: Any, runtime: Any) -> None:
        ran.append("inner")

    run(create_agent(ScriptedChatModel(["a"]), middleware=[outer, middle, inner]), {"messages": [HumanMessage("q")]})
    assert ran == ["inner", "middle"]  # reverse order; 'outer' is skipped by the jump


def test_tool_calls_answered_by_middleware_are_not_executed(run: Runner) -> None:
    executed: list[str] = []

    @after_model
    def answer_it(state: Any, runtime: Any) -> dict[str, Any] | None:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            call = last.tool_calls[0]
            return {"messages": [ToolMessage("answered by middleware", tool_call_id=call["id"], name=call["name"])]}
        return None

    from middleware_kit import wrap_tool_call

    @wrap_tool_call
    def spy(request: Any, handler: Any) -> Any:
        executed.append(request.tool_call["name"])
        return handler(request)

    result = run(create_agent(tool_then_answer(), [add], middleware=[spy, answer_it]),
                 {"messages": [HumanMessage("q")]})
    assert executed == []
    assert [m.content for m in result["messages"]][2:] == ["answered by middleware", "done"]


def test_hook_answering_instead_of_the_model_closes_the_calls_in_place(run: Runner) -> None:
    @after_model(can_jump_to=["end"])
    def refuse(state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [AIMessage("I won't do that.")], "jump_to": "end"}

    result = run(create_agent(tool_then_answer(), [add], middleware=[refuse]), {"messages": [HumanMessage("q")]})
    # The answers stand right after the calls' AIMessage (providers reject anything else), before the hook's message.
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert result["messages"][2].status == "error"
    assert result["messages"][-1].content == "I won't do that."


def test_hook_appending_a_plain_answer_without_jumping_ends_and_closes(run: Runner) -> None:
    @after_model
    def overrule(state: Any, runtime: Any) -> dict[str, Any] | None:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return {"messages": [AIMessage("Answering myself instead.")]}
        return None

    executed: list[str] = []
    from middleware_kit import wrap_tool_call

    @wrap_tool_call
    def spy(request: Any, handler: Any) -> Any:
        executed.append(request.tool_call["name"])
        return handler(request)

    model = tool_then_answer()
    result = run(create_agent(model, [add], middleware=[spy, overrule]), {"messages": [HumanMessage("q")]})
    assert executed == []
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert result["messages"][-1].content == "Answering myself instead."


def test_next_turn_after_a_closed_refusal_sends_a_fully_paired_history(run: Runner) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    @after_model(can_jump_to=["end"])
    def refuse_once(state: Any, runtime: Any) -> dict[str, Any] | None:
        if sum(isinstance(m, AIMessage) for m in state["messages"]) == 1:
            return {"messages": [AIMessage("No.")], "jump_to": "end"}
        return None

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 1})]), "fine"])
    agent = create_agent(model, [add], middleware=[refuse_once], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": [HumanMessage("q")]}, config=config)
    run(agent, {"messages": [HumanMessage("again")]}, config=config)
    sent = model.calls[-1].messages
    assert kinds(list(sent)) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "HumanMessage"]
