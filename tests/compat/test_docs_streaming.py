"""The agent examples of LangChain 1.5's "Streaming" page (docs.langchain.com/oss/python/langchain/streaming),
rewritten for middleware_kit: imports changed, the model scripted. Each test asserts what the page says happens:
agent progress (``updates``), LLM tokens (``messages``), custom updates from tools and middleware (``custom``), and
several modes at once.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool
from langgraph.config import get_stream_writer

from middleware_kit import AgentState, before_model, create_agent
from middleware_kit.testing import ScriptedChatModel, tool_call

QUESTION = {"messages": [{"role": "user", "content": "What is the weather in SF?"}]}


@tool
def get_weather(city: str) -> str:
    """Get weather for a given city."""
    writer = get_stream_writer()
    writer(f"Looking up data for city: {city}")
    writer(f"Acquired data for city: {city}")
    return f"It's always sunny in {city}!"


def weather_model() -> ScriptedChatModel:
    return ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("get_weather", {"city": "San Francisco"})]),
        "It's always sunny in San Francisco!",
    ])


def test_agent_progress() -> None:
    agent = create_agent(weather_model(), tools=[get_weather])
    steps = [(step, data["messages"][-1]) for chunk in agent.stream(QUESTION, stream_mode="updates")
             for step, data in chunk.items()]
    assert [step for step, _ in steps] == ["model", "tools", "model"]
    assert steps[0][1].tool_calls[0]["name"] == "get_weather"
    assert steps[1][1].content == "It's always sunny in San Francisco!"
    assert steps[2][1].content == "It's always sunny in San Francisco!"


def test_llm_tokens() -> None:
    agent = create_agent(weather_model(), tools=[get_weather])
    tokens: list[Any] = list(agent.stream(QUESTION, stream_mode="messages"))
    nodes = {metadata["langgraph_node"] for _, metadata in tokens}
    assert nodes == {"model", "tools"}
    # A real model streams AIMessageChunks; the scripted one yields its whole message (an AIMessage) at once.
    text = "".join(str(token.content) for token, metadata in tokens
                   if metadata["langgraph_node"] == "model" and isinstance(token, (AIMessage, AIMessageChunk)))
    assert text.endswith("It's always sunny in San Francisco!")


def test_custom_updates() -> None:
    agent = create_agent(weather_model(), tools=[get_weather])
    chunks = list(agent.stream(QUESTION, stream_mode="custom"))
    assert chunks == ["Looking up data for city: San Francisco", "Acquired data for city: San Francisco"]


@before_model
def announce(state: AgentState, runtime: Any) -> None:
    runtime.stream_writer({"middleware": "announce", "messages": len(state["messages"])})


def test_custom_updates_from_middleware_and_multiple_modes() -> None:
    agent = create_agent(weather_model(), tools=[get_weather], middleware=[announce])
    seen: list[Any] = list(agent.stream(QUESTION, stream_mode=["updates", "custom"]))
    custom = [chunk for mode, chunk in seen if mode == "custom"]
    assert custom[0] == {"middleware": "announce", "messages": 1}
    assert "Looking up data for city: San Francisco" in custom
    assert [next(iter(chunk)) for mode, chunk in seen if mode == "updates"] == ["model", "tools", "model"]
