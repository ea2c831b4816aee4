"""The examples of LangChain 1.5's "Human-in-the-loop" page (docs.langchain.com/oss/python/langchain/
human-in-the-loop), rewritten for middleware_kit: imports changed, the model scripted. Each test asserts what the
page says happens: the interrupt's action requests and review configs, and the approve, edit and reject decisions,
one per action in order.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

QUERY = "DELETE FROM records WHERE created_at < NOW() - INTERVAL '30 days';"
CONFIG = {"configurable": {"thread_id": "some_id"}}


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {path}"


@tool
def execute_sql(query: str) -> str:
    """Execute SQL."""
    return f"executed {query}"


@tool
def read_data(table: str) -> str:
    """Read data."""
    return f"rows of {table}"


def make_agent(*steps: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel([*steps, "Done."])
    agent = create_agent(
        model,
        tools=[write_file, execute_sql, read_data],
        middleware=[
            HumanInTheLoopMiddleware(
                interrupt_on={
                    "write_file": True,  # All decisions (approve, edit, reject) allowed
                    "execute_sql": {"allowed_decisions": ["approve", "reject"]},  # No editing allowed
                    "read_data": False,  # Safe operation, no approval needed
                },
                description_prefix="Tool execution pending approval",
            ),
        ],
        checkpointer=InMemorySaver(),
    )
    return agent, model


def sql_call() -> AIMessage:
    return AIMessage("", tool_calls=[tool_call("execute_sql", {"query": QUERY}, id="sql_1")])


def test_the_interrupt_holds_action_requests_and_review_configs(run: Runner) -> None:
    agent, _ = make_agent(sql_call())
    result = run(agent, {"messages": [{"role": "user", "content": "Delete old records from the database"}]},
                 config=CONFIG)
    value = result["__interrupt__"][0].value
    (action,) = value["action_requests"]
    assert action["name"] == "execute_sql" and action["args"] == {"query": QUERY}
    assert action["description"].startswith("Tool execution pending approval\n\nTool: execute_sql\nArgs: ")
    assert value["review_configs"] == [{"action_name": "execute_sql", "allowed_decisions": ["approve", "reject"]}]


def test_approve(run: Runner) -> None:
    agent, _ = make_agent(sql_call())
    run(agent, {"messages": [{"role": "user", "content": "Delete old records from the database"}]}, config=CONFIG)
    result = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=CONFIG)
    assert result["messages"][2].content == f"executed {QUERY}" and result["messages"][-1].content == "Done."


def test_edit(run: Runner) -> None:
    agent, _ = make_agent(AIMessage("", tool_calls=[tool_call("write_file", {"path": "a.txt", "content": "x"})]))
    run(agent, {"messages": [{"role": "user", "content": "Write a file"}]}, config=CONFIG)
    edited = {"type": "edit", "edited_action": {"name": "write_file", "args": {"path": "b.txt", "content": "x"}}}
    result = run(agent, Command(resume={"decisions": [edited]}), config=CONFIG)
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == 1 and "wrote b.txt" in str(answers[0].content)
    assert result["messages"][1].tool_calls[0]["args"] == {"path": "a.txt", "content": "x"}  # the model's call stays
    assert "Executed instead: write_file" in str(answers[0].content)


def test_reject_adds_the_message_as_feedback(run: Runner) -> None:
    agent, model = make_agent(sql_call())
    run(agent, {"messages": [{"role": "user", "content": "Delete old records"}]}, config=CONFIG)
    feedback = "No, this is wrong because it deletes too much, instead archive the records."
    result = run(agent, Command(resume={"decisions": [{"type": "reject", "message": feedback}]}), config=CONFIG)
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == 1 and feedback in str(answers[0].content) and answers[0].status == "error"
    assert any(feedback in str(m.content) for m in model.calls[-1].messages)  # the model reads it
    assert result["messages"][-1].content == "Done."


def test_multiple_decisions_in_action_order(run: Runner) -> None:
    calls = AIMessage("", tool_calls=[
        tool_call("write_file", {"path": "a.txt", "content": "x"}, id="w"),
        tool_call("read_data", {"table": "t"}, id="r"),
        tool_call("execute_sql", {"query": QUERY}, id="s"),
    ])
    agent, _ = make_agent(calls)
    first = run(agent, {"messages": [{"role": "user", "content": "do it all"}]}, config=CONFIG)
    assert [a["name"] for a in first["__interrupt__"][0].value["action_requests"]] == ["write_file", "execute_sql"]
    result = run(agent, Command(resume={"decisions": [{"type": "approve"}, {"type": "reject", "message": "no"}]}),
                 config=CONFIG)
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert answers["w"].content == "wrote a.txt" and answers["r"].content == "rows of t"
    assert answers["s"].status == "error"


def test_a_disallowed_decision_is_refused(run: Runner) -> None:
    agent, _ = make_agent(sql_call())
    run(agent, {"messages": [{"role": "user", "content": "Delete old records"}]}, config=CONFIG)
    edited = {"type": "edit", "edited_action": {"name": "execute_sql", "args": {"query": "SELECT 1"}}}
    with pytest.raises(ValueError, match="edit"):
        run(agent, Command(resume={"decisions": [edited]}), config=CONFIG)
