"""The examples of LangChain 1.5's "Runtime" page (docs.langchain.com/oss/python/langchain/runtime), rewritten for
middleware_kit: imports changed, the model scripted. Each test asserts what the page says happens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore

from middleware_kit import AgentState, ModelRequest, after_model, before_model, create_agent, dynamic_prompt
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

QUESTION = {"messages": [{"role": "user", "content": "What's my name?"}]}


@dataclass
class Context:
    user_name: str


def test_access_context(run: Runner) -> None:
    model = ScriptedChatModel(["John Smith"])
    agent = create_agent(model, tools=[], context_schema=Context)
    assert run(agent, QUESTION, context=Context(user_name="John Smith"))["messages"][-1].content == "John Smith"


@dataclass
class UserContext:
    user_id: str


@tool
def fetch_user_email_preferences(runtime: ToolRuntime[UserContext]) -> str:
    """Fetch the user's email preferences from the store."""
    user_id = runtime.context.user_id
    preferences: str = "The user prefers you to write a brief and polite email."
    if runtime.store and (memory := runtime.store.get(("users",), user_id)):
        preferences = memory.value["preferences"]
    return preferences


def test_inside_tools(run: Runner) -> None:
    store = InMemoryStore()
    store.put(("users",), "user_1", {"preferences": "Long and formal."})
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("fetch_user_email_preferences", {})]), "ok"],
                              cycle=True)
    agent = create_agent(model, tools=[fetch_user_email_preferences], context_schema=UserContext, store=store)
    assert run(agent, QUESTION, context=UserContext(user_id="user_1"))["messages"][2].content == "Long and formal."
    unknown = run(agent, QUESTION, context=UserContext(user_id="nobody"))
    assert unknown["messages"][2].content == "The user prefers you to write a brief and polite email."


@tool
def context_aware_tool(runtime: ToolRuntime) -> str:
    """A tool that uses execution and server info."""
    info: Any = runtime.execution_info
    print(f"Thread: {info.thread_id}, Run: {info.run_id}")
    server = runtime.server_info
    if server is not None:
        print(f"Assistant: {server.assistant_id}")
    return "done"


def test_execution_info_inside_tools(run: Runner, capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("context_aware_tool", {})]), "ok"])
    agent = create_agent(model, tools=[context_aware_tool], checkpointer=InMemorySaver())
    result = run(agent, QUESTION, config={"configurable": {"thread_id": "thread-7"}})
    assert result["messages"][2].content == "done"
    out = capsys.readouterr().out
    assert "Thread: thread-7, Run: " in out and "Assistant:" not in out  # server_info is None locally


@dynamic_prompt
def dynamic_system_prompt(request: ModelRequest) -> str:
    user_name = request.runtime.context.user_name  # type: ignore[attr-defined]
    return f"You are a helpful assistant. Address the user as {user_name}."


@before_model
def log_before_model(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any] | None:
    print(f"Processing request for user: {runtime.context.user_name}")
    return None


@after_model
def log_after_model(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any] | None:
    print(f"Completed request for user: {runtime.context.user_name}")
    return None


def test_inside_middleware(run: Runner, capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedChatModel(["Hello John Smith"])
    agent = create_agent(model, tools=[], middleware=[dynamic_system_prompt, log_before_model, log_after_model],
                         context_schema=Context)
    run(agent, QUESTION, context=Context(user_name="John Smith"))
    assert model.calls[0].messages[0].content == "You are a helpful assistant. Address the user as John Smith."
    out = capsys.readouterr().out
    assert "Processing request for user: John Smith" in out and "Completed request for user: John Smith" in out


@before_model
def auth_gate(state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
    """Block unauthenticated users when running on LangGraph Server."""
    server = runtime.server_info
    if server is not None and server.user is None:
        raise ValueError("Authentication required")
    print(f"Thread: {runtime.execution_info.thread_id}")  # type: ignore[union-attr]
    return None


def test_execution_info_inside_middleware(run: Runner, capsys: pytest.CaptureFixture[str]) -> None:
    agent = create_agent(ScriptedChatModel(["ok"]), tools=[], middleware=[auth_gate], checkpointer=InMemorySaver())
    run(agent, QUESTION, config={"configurable": {"thread_id": "thread-9"}})
    assert "Thread: thread-9" in capsys.readouterr().out
