"""The middleware examples of LangChain 1.5's "Short-term memory" page (docs.langchain.com/oss/python/langchain/
short-term-memory), rewritten for middleware_kit: imports changed, models scripted. Each test asserts what the page
says happens.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel

from middleware_kit import AgentState, ModelRequest, after_model, before_model, create_agent, dynamic_prompt
from middleware_kit.middlewares.summarization import SummarizationMiddleware, is_summary
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

CONFIG: RunnableConfig = {"configurable": {"thread_id": "1"}}


@tool
def get_user_info_plain() -> str:
    """Look up user info."""
    return "User is John Smith"


def test_usage_with_a_checkpointer(run: Runner) -> None:
    model = ScriptedChatModel(["Hi Bob!", "Your name is Bob."])
    agent = create_agent(model, [get_user_info_plain], checkpointer=InMemorySaver())
    run(agent, {"messages": [{"role": "user", "content": "Hi! My name is Bob."}]}, config=CONFIG)
    run(agent, {"messages": [{"role": "user", "content": "What's my name?"}]}, config=CONFIG)
    # The second call sees the whole thread.
    assert [m.content for m in model.calls[1].messages] == ["Hi! My name is Bob.", "Hi Bob!", "What's my name?"]


class CustomAgentState(AgentState):
    user_id: str
    preferences: dict[str, Any]


def test_customizing_agent_memory(run: Runner) -> None:
    agent = create_agent(ScriptedChatModel(["hello"]), [get_user_info_plain], state_schema=CustomAgentState,
                         checkpointer=InMemorySaver())
    result = run(agent, {"messages": [{"role": "user", "content": "Hello"}], "user_id": "user_123",
                         "preferences": {"theme": "dark"}}, config=CONFIG)
    assert result["user_id"] == "user_123" and result["preferences"] == {"theme": "dark"}


# -- Trim messages (and "Before model") --------------------------------------------------------------------------
@before_model
def trim_messages(state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
    """Keep only the last few messages to fit context window."""
    messages = state["messages"]
    if len(messages) <= 3:
        return None
    first_msg = messages[0]
    recent_messages = messages[-3:] if len(messages) % 2 == 0 else messages[-4:]
    new_messages = [first_msg, *recent_messages]
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new_messages]}


def test_trim_messages(run: Runner) -> None:
    model = ScriptedChatModel(["Hi Bob!", "Cats...", "Dogs...", "Your name is Bob. You told me that earlier."])
    agent = create_agent(model, tools=[], middleware=[trim_messages], checkpointer=InMemorySaver())
    for text in ("hi, my name is bob", "write a short poem about cats", "now do the same but for dogs"):
        run(agent, {"messages": text}, config=CONFIG)
    final_response = run(agent, {"messages": "what's my name?"}, config=CONFIG)
    assert final_response["messages"][-1].content == "Your name is Bob. You told me that earlier."
    # The model saw the first message (the name) and the most recent ones only.
    seen = [m.content for m in model.calls[-1].messages]
    assert seen[0] == "hi, my name is bob" and seen[-1] == "what's my name?" and len(seen) in (4, 5)
    assert "write a short poem about cats" not in seen  # trimmed away


# -- Delete messages ---------------------------------------------------------------------------------------------
@after_model
def delete_old_messages(state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
    """Remove old messages to keep conversation manageable."""
    messages = state["messages"]
    if len(messages) > 2:
        return {"messages": [RemoveMessage(id=m.id) for m in messages[:2] if m.id]}
    return None


def test_delete_messages() -> None:
    model = ScriptedChatModel(["Hi Bob!", "Your name is Bob."])
    agent = create_agent(model, tools=[], system_prompt="Please be concise and to the point.",
                         middleware=[delete_old_messages], checkpointer=InMemorySaver())

    def snapshots(text: str) -> list[list[tuple[str, Any]]]:
        return [
            [(m.type, m.content) for m in event["messages"]]
            for event in agent.stream({"messages": [{"role": "user", "content": text}]}, CONFIG, stream_mode="values")
        ]

    first = snapshots("hi! I'm bob")
    assert first[-1] == [("human", "hi! I'm bob"), ("ai", "Hi Bob!")]
    second = snapshots("what's my name?")
    # The page's final state: the two oldest messages deleted after the model answered.
    assert second[-1] == [("human", "what's my name?"), ("ai", "Your name is Bob.")]
    # LangChain prints a snapshot after the model node *and* after the delete_old_messages node; here the hook runs in
    # the fused "model" node, so the intermediate 4-message snapshot is not streamed (docs/migration.md).
    assert second == [
        [("human", "hi! I'm bob"), ("ai", "Hi Bob!"), ("human", "what's my name?")],
        [("human", "what's my name?"), ("ai", "Your name is Bob.")],
    ]


# -- Summarize messages ------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("fake_openai")
def test_summarize_messages(run: Runner) -> None:
    checkpointer = InMemorySaver()
    summarizer = SummarizationMiddleware(model="gpt-4o-mini", trigger={"tokens": 4000}, keep={"messages": 20})
    model = ScriptedChatModel([("word " * 700), ("word " * 700), ("word " * 700), "Your name is Bob!"])
    agent = create_agent(model, tools=[], middleware=[summarizer], checkpointer=checkpointer)
    for text in ("hi, my name is bob", "write a short poem about cats", "now do the same but for dogs"):
        run(agent, {"messages": text}, config=CONFIG)
    final_response = run(agent, {"messages": "what's my name?"}, config=CONFIG)
    assert final_response["messages"][-1].content == "Your name is Bob!"
    history = agent.get_state(CONFIG).values["messages"]
    # Under 4000 tokens nothing is summarized; the thread above stays below it.
    assert not any(is_summary(m) for m in history)
    low = SummarizationMiddleware(model="gpt-4o-mini", trigger={"tokens": 40}, keep={"messages": 2})
    model = ScriptedChatModel(["poem " * 30, "Your name is Bob!"])
    agent = create_agent(model, tools=[], middleware=[low], checkpointer=InMemorySaver())
    run(agent, {"messages": "hi, my name is bob, write a poem"}, config=CONFIG)
    result = run(agent, {"messages": "what's my name?"}, config=CONFIG)
    assert is_summary(result["messages"][0]) and result["messages"][0].content.endswith("scripted gpt-4o-mini")


# -- Access memory: tools ----------------------------------------------------------------------------------------
class UserState(AgentState):
    user_id: str


@tool
def get_user_info(runtime: ToolRuntime) -> str:
    """Look up user info."""
    user_id = runtime.state["user_id"]
    return "User is John Smith" if user_id == "user_123" else "Unknown user"


def test_read_short_term_memory_in_a_tool(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("get_user_info", {})]), "User is John Smith."])
    agent = create_agent(model, tools=[get_user_info], state_schema=UserState)
    result = run(agent, {"messages": "look up user information", "user_id": "user_123"})
    assert result["messages"][2].content == "User is John Smith"
    assert model.calls[0].tools == ("get_user_info",)  # the runtime parameter is hidden from the model


class NameState(AgentState):
    user_name: NotRequired[str]


class CustomContext(BaseModel):
    user_id: str


@tool
def update_user_info(runtime: ToolRuntime[CustomContext, NameState]) -> Command[Any]:
    """Look up and update user info."""
    user_id = runtime.context.user_id
    name = "John Smith" if user_id == "user_123" else "Unknown user"
    return Command(update={
        "user_name": name,
        "messages": [ToolMessage("Successfully looked up user information", tool_call_id=runtime.tool_call_id)],
    })


@tool
def greet(runtime: ToolRuntime[CustomContext, NameState]) -> str | Command[Any]:
    """Use this to greet the user once you found their info."""
    user_name = runtime.state.get("user_name", None)
    if user_name is None:
        return Command(update={"messages": [ToolMessage(
            "Please call the 'update_user_info' tool it will get and update the user's name.",
            tool_call_id=runtime.tool_call_id,
        )]})
    return f"Hello {user_name}!"


def test_write_short_term_memory_from_tools(run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("greet", {})]),
        AIMessage("", tool_calls=[tool_call("update_user_info", {})]),
        AIMessage("", tool_calls=[tool_call("greet", {})]),
        "Greeted.",
    ])
    agent = create_agent(model, tools=[update_user_info, greet], state_schema=NameState, context_schema=CustomContext)
    result = run(agent, {"messages": [{"role": "user", "content": "greet the user"}]},
                 context=CustomContext(user_id="user_123"))
    tool_answers = [m.content for m in result["messages"] if isinstance(m, ToolMessage)]
    assert tool_answers == [
        "Please call the 'update_user_info' tool it will get and update the user's name.",
        "Successfully looked up user information",
        "Hello John Smith!",
    ]
    assert result["user_name"] == "John Smith"


# -- Access memory: prompt ---------------------------------------------------------------------------------------
class PromptContext(TypedDict):
    user_name: str


@tool
def get_weather(city: str) -> str:
    """Get the weather in a city."""
    return f"The weather in {city} is always sunny!"


@dynamic_prompt
def dynamic_system_prompt(request: ModelRequest) -> str:
    user_name = request.runtime.context["user_name"]  # type: ignore[index]
    return f"You are a helpful assistant. Address the user as {user_name}."


def test_prompt_from_context(run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("get_weather", {"city": "San Francisco"})]),
        "Hi John Smith, the weather in San Francisco is always sunny!",
    ])
    agent = create_agent(model, tools=[get_weather], middleware=[dynamic_system_prompt], context_schema=PromptContext)
    result = run(agent, {"messages": [{"role": "user", "content": "What is the weather in SF?"}]},
                 context=PromptContext(user_name="John Smith"))
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    assert result["messages"][2].content == "The weather in San Francisco is always sunny!"
    assert model.calls[0].messages[0].content == "You are a helpful assistant. Address the user as John Smith."


# -- Access memory: after model ----------------------------------------------------------------------------------
@after_model
def validate_response(state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
    """Remove messages containing sensitive words."""
    stop_words = ["password", "secret"]
    last_message = state["messages"][-1]
    if any(word in last_message.content for word in stop_words) and last_message.id:
        return {"messages": [RemoveMessage(id=last_message.id)]}
    return None


def test_after_model_removes_sensitive_answers(run: Runner) -> None:
    model = ScriptedChatModel(["the password is hunter2", "fine"])
    agent = create_agent(model, tools=[], middleware=[validate_response], checkpointer=InMemorySaver())
    result = run(agent, {"messages": [HumanMessage("what is the password?")]}, config=CONFIG)
    assert [m.content for m in result["messages"]] == ["what is the password?"]
    result = run(agent, {"messages": [HumanMessage("ok")]}, config=CONFIG)
    assert [m.content for m in result["messages"]] == ["what is the password?", "ok", "fine"]
