"""TodoListMiddleware: write_todos, PlanningState, the prompt, parallel calls."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import MiddlewareConfigError, create_agent, dynamic_prompt
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.todo_list import (
    PARALLEL_WRITE_TODOS_ERROR,
    WRITE_TODOS_SYSTEM_PROMPT,
    WRITE_TODOS_TOOL_DESCRIPTION,
    TodoListMiddleware,
    write_todos,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add
from tests.helpers import kinds

PLAN = [{"content": "research", "status": "in_progress"}, {"content": "write", "status": "pending"}]


def test_write_todos_updates_state_and_answers(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("write_todos", {"todos": PLAN}, id="t1")]), "ok"])
    result = run(create_agent(model, middleware=[TodoListMiddleware()]), {"messages": [HumanMessage("plan")]})
    assert result["todos"] == PLAN
    answer = result["messages"][2]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "t1" and answer.name == "write_todos"
    assert answer.content == f"Updated todo list to {PLAN}"
    assert model.calls[0].tools == ("write_todos",)


def test_prompt_is_appended_to_the_system_message_not_stored(run: Runner) -> None:
    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, system_prompt="You are helpful.", middleware=[TodoListMiddleware()])
    result = run(agent, {"messages": [HumanMessage("hi")]})
    # LangChain's shape: the system message's content blocks plus a text block with the prompt.
    assert model.calls[0].messages[0].content == [
        {"type": "text", "text": "You are helpful."},
        {"type": "text", "text": f"\n\n{WRITE_TODOS_SYSTEM_PROMPT}"},
    ]
    assert model.calls[0].messages[0].text == f"You are helpful.\n\n{WRITE_TODOS_SYSTEM_PROMPT}"
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage"]
    assert "todos" not in result


def test_prompt_without_system_message_and_with_blocks(run: Runner) -> None:
    model = ScriptedChatModel(["ok"], cycle=True)
    run(create_agent(model, middleware=[TodoListMiddleware(system_prompt="Plan.")]), {"messages": [HumanMessage("a")]})
    assert model.calls[0].messages[0].content == [{"type": "text", "text": "Plan."}]
    blocks = SystemMessage(content=[{"type": "text", "text": "Base."}])
    run(create_agent(model, system_prompt=blocks, middleware=[TodoListMiddleware(system_prompt="Plan.")]),
        {"messages": [HumanMessage("b")]})
    expected = [{"type": "text", "text": "Base."}, {"type": "text", "text": "\n\nPlan."}]
    assert model.calls[1].messages[0].content == expected


def test_listed_after_a_dynamic_prompt_it_appends_to_it(run: Runner) -> None:
    @dynamic_prompt
    def per_user(request: Any) -> str:
        return "Dynamic."

    model = ScriptedChatModel(["ok"])
    run(create_agent(model, middleware=[per_user, TodoListMiddleware(system_prompt="Plan.")]),
        {"messages": [HumanMessage("a")]})
    assert model.calls[0].messages[0].text == "Dynamic.\n\nPlan."
    # Listed after it (inner), a dynamic prompt replaces the system message, planning prompt included.
    model = ScriptedChatModel(["ok"])
    run(create_agent(model, middleware=[TodoListMiddleware(system_prompt="Plan."), per_user]),
        {"messages": [HumanMessage("a")]})
    assert model.calls[0].messages[0].content == "Dynamic."


def test_parallel_calls_each_get_an_error_and_todos_stay(run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("write_todos", {"todos": PLAN})]),
        AIMessage("", tool_calls=[
            tool_call("write_todos", {"todos": []}, id="w1"),
            tool_call("add", {"a": 1, "b": 2}, id="a1"),
            tool_call("write_todos", {"todos": []}, id="w2"),
        ]),
        "done",
    ])
    result = run(create_agent(model, [add], middleware=[TodoListMiddleware()]), {"messages": [HumanMessage("go")]})
    assert result["todos"] == PLAN
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    for call_id in ("w1", "w2"):
        assert answers[call_id].status == "error" and answers[call_id].content == PARALLEL_WRITE_TODOS_ERROR
    assert answers["a1"].content == "3"          # the other call of that message still ran
    # The model saw every call answered, right after its AIMessage.
    assert kinds(list(model.calls[2].messages))[4:] == ["AIMessage", "ToolMessage", "ToolMessage", "ToolMessage"]


def test_after_model_called_directly_refuses_like_langchain() -> None:
    import asyncio

    calls = [tool_call("write_todos", {"todos": []}, id=i) for i in ("w1", "w2")]
    state: Any = {"messages": [HumanMessage("go"), AIMessage("", tool_calls=calls)]}
    refusals = [ToolMessage(PARALLEL_WRITE_TODOS_ERROR, tool_call_id=i, status="error") for i in ("w1", "w2")]
    expected = {"messages": refusals}
    mw = TodoListMiddleware()
    assert mw.after_model(state, None) == expected
    assert asyncio.run(mw.aafter_model(state, None)) == expected
    one: Any = {"messages": [HumanMessage("go"), AIMessage("", tool_calls=calls[:1])]}
    assert mw.after_model(one, None) is None


def test_invalid_status_becomes_an_error_message(run: Runner) -> None:
    bad = [{"content": "x", "status": "someday"}]
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("write_todos", {"todos": bad})]), "fixed"])
    result = run(create_agent(model, middleware=[TodoListMiddleware()]), {"messages": [HumanMessage("go")]})
    assert result["messages"][2].status == "error" and "todos" not in result


def test_custom_description_and_todos_persist_in_the_thread(run: Runner) -> None:
    mw = TodoListMiddleware(tool_description="Track tasks.")
    assert mw.tools[0].description == "Track tasks." and mw.tools[0] is not write_todos
    assert TodoListMiddleware().tools[0] is write_todos
    assert write_todos.description == WRITE_TODOS_TOOL_DESCRIPTION
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("write_todos", {"todos": PLAN})]), "ok", "again"])
    agent = create_agent(model, middleware=[mw], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": [HumanMessage("plan")]}, config=config)
    assert run(agent, {"messages": [HumanMessage("status?")]}, config=config)["todos"] == PLAN


def test_hook_called_directly() -> None:
    mw = TodoListMiddleware()
    state: Any = {"messages": [AIMessage("", tool_calls=[tool_call("write_todos", {"todos": []})] * 1)]}
    assert mw.after_model(state, None) is None  # type: ignore[arg-type]


def test_the_prompt_keeps_the_system_messages_id_and_kwargs(run: Runner) -> None:
    model = ScriptedChatModel(["ok"])
    system = SystemMessage("Base.", id="sys-1", additional_kwargs={"origin": "app"})
    run(create_agent(model, system_prompt=system, middleware=[TodoListMiddleware(system_prompt="Plan.")]),
        {"messages": [HumanMessage("a")]})
    sent = model.calls[0].messages[0]
    assert (sent.id, sent.additional_kwargs, sent.text) == ("sys-1", {"origin": "app"}, "Base.\n\nPlan.")


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    mw = TodoListMiddleware(system_prompt="Plan.")
    create_agent(ScriptedChatModel(["hi"]), middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'system_prompt'"):
        mw.system_prompt = "Other."
    with pytest.raises(FrozenMiddlewareError):
        mw.tools = ()
    changed = mw.replace(system_prompt="Plan more.", tool_description="Track.")
    assert (mw.system_prompt, changed.system_prompt, changed.tools[0].description) == ("Plan.", "Plan more.", "Track.")
    model = ScriptedChatModel(["ok"])
    run(create_agent(model, middleware=[changed]), {"messages": [HumanMessage("a")]})
    assert model.calls[0].messages[0].text == "Plan more."


def test_default_texts_are_langchains() -> None:
    assert WRITE_TODOS_SYSTEM_PROMPT.startswith("## `write_todos`\n\nYou have access to the `write_todos` tool")
    assert WRITE_TODOS_TOOL_DESCRIPTION.startswith("Use this tool to create and manage a structured task list")


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [({"system_prompt": None}, "system_prompt"), ({"tool_description": ""}, "tool_description"),
     ({"tool_description": 42}, "tool_description")],
)
def test_constructor_errors_name_the_parameter(kwargs: dict[str, Any], param: str) -> None:
    with pytest.raises(MiddlewareConfigError, match=f"TodoListMiddleware: {param} must be a str") as err:
        TodoListMiddleware(**kwargs)
    assert err.value.hook == param and isinstance(err.value, ValueError)
