"""LangChain 1.5's API reference for ``AutoModeMiddleware`` (``langchain.agents.middleware.auto_mode``; the prebuilt
middleware page has no section for it), its example rewritten: imports changed, ``tools=[delete_file]`` with a
scripted ``BaseDecisionModel`` as ``classifier`` and a ``ScriptedChatModel`` as the agent's model. Each test asserts
what the reference says: listed tools are classified right before execution with a ``Noul`` question; calls below
0.5 execute normally, calls at or above it return an error ``ToolMessage`` without invoking the tool; tools not
listed bypass classification; the classifier receives the proposed call, the tool description and up to 30 recent
messages; classification failures propagate and the tool handler is not called."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from middleware_kit import create_agent
from middleware_kit.middlewares.auto_mode import AutoModeMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner
from tests.middlewares.test_model_router import ScriptedDecisionModel

EXECUTED: list[str] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    EXECUTED.append(f"read {path}")
    return "contents"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    EXECUTED.append(f"delete {path}")
    return "deleted"


def agent_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            AIMessage(
                "",
                tool_calls=[
                    tool_call("read_file", {"path": "a.txt"}, id="r"),
                    tool_call("delete_file", {"path": "tmp.txt"}, id="d1"),
                    tool_call("delete_file", {"path": "/"}, id="d2"),
                ],
            ),
            "Done.",
        ]
    )


def test_the_reference_example(run: Runner) -> None:
    EXECUTED.clear()
    classifier = ScriptedDecisionModel(answers=[0.2, 0.5], requests=[])
    auto_mode = AutoModeMiddleware(
        tools=[delete_file],
        classifier=classifier,
    )
    agent = create_agent(
        agent_model(),
        tools=[read_file, delete_file],
        middleware=[auto_mode],
    )
    history: list[BaseMessage] = [HumanMessage(f"message {i}") for i in range(40)]
    result = run(agent, {"messages": history})
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert sorted(EXECUTED) == ["delete tmp.txt", "read a.txt"]  # below 0.5 runs; read_file bypasses classification
    assert answers["d2"].status == "error"  # at 0.5: blocked, the tool was never invoked
    assert len(classifier.requests) == 2
    state, questions = classifier.requests[0]
    assert questions["is_risky"].type == "noul"
    assert state["tool_call"]["name"] == "delete_file" and state["tool_description"] == "Delete a file."
    assert len(state["messages"]) == 30


def test_classification_failures_propagate_without_calling_the_tool(run: Runner) -> None:
    EXECUTED.clear()
    auto_mode = AutoModeMiddleware(
        tools=[delete_file], classifier=ScriptedDecisionModel(answers=[ConnectionError("down")] * 2, requests=[])
    )
    agent: Any = create_agent(agent_model(), tools=[read_file, delete_file], middleware=[auto_mode])
    with pytest.raises(ConnectionError):
        run(agent, {"messages": [HumanMessage("clean up")]})
    assert not any(e.startswith("delete") for e in EXECUTED)
