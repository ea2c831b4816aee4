"""Agents on the real ``ChatOpenAI`` (Chat Completions and Responses) and ``ChatAnthropic`` clients, over the wire
to the local provider double: every assertion is on what the provider received or what the user got."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool

from middleware_kit import create_agent
from tests.providers.conftest import anthropic_model, openai_model
from tests.providers.double import ProviderDouble, Reply, ToolCallReply

# The provider clients cache their async HTTP client per base URL (langchain-openai and langchain-anthropic do): one
# event loop for the module, as in an application, instead of pytest-asyncio's loop per test.
SESSION_LOOP = pytest.mark.asyncio(loop_scope="session")

MODES = ["invoke", "ainvoke", "stream", "astream"]
CLIENTS: dict[str, Callable[[ProviderDouble], BaseChatModel]] = {
    "openai-chat": lambda p: openai_model(p),
    "openai-responses": lambda p: openai_model(p, use_responses_api=True),
    "anthropic": lambda p: anthropic_model(p),
}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def run(agent: Any, mode: str, payload: Any, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The final state, under each of the four ways of running an agent."""
    if mode == "invoke":
        result: dict[str, Any] = agent.invoke(payload, config)
        return result
    if mode == "ainvoke":
        result = await agent.ainvoke(payload, config)
        return result
    last: dict[str, Any] = {}
    if mode == "stream":
        for state in agent.stream(payload, config, stream_mode="values"):
            last = state
    else:
        async for state in agent.astream(payload, config, stream_mode="values"):
            last = state
    return last


def tool_results(body: dict[str, Any]) -> list[str]:
    """The tool results a provider received, in its own format."""
    found: list[str] = []
    for item in body.get("messages") or body.get("input") or []:
        if item.get("role") == "tool":  # Chat Completions
            found.append(str(item["content"]))
        if item.get("type") == "function_call_output":  # Responses
            found.append(str(item["output"]))
        for block in item.get("content") or [] if isinstance(item.get("content"), list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":  # Anthropic
                found.append(json.dumps(block.get("content")))
    return found


def offered_tools(body: dict[str, Any]) -> list[str]:
    return [t.get("name") or t.get("function", {}).get("name") for t in body.get("tools") or []]


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("client", list(CLIENTS))
async def test_a_tool_loop_over_the_wire(provider: ProviderDouble, client: str, mode: str) -> None:
    provider.script(Reply(tool_calls=[ToolCallReply("add", {"a": 2, "b": 3})]), Reply(text="2 + 3 = 5"))
    agent = create_agent(CLIENTS[client](provider), [add], system_prompt="You add.")
    result = await run(agent, mode, {"messages": [HumanMessage("What is 2 + 3?")]})
    assert result["messages"][-1].content in ("2 + 3 = 5", [{"type": "text", "text": "2 + 3 = 5", "annotations": []}]) \
        or result["messages"][-1].text == "2 + 3 = 5"
    first, second = provider.bodies()
    assert offered_tools(first) == ["add"]
    assert "5" in "".join(tool_results(second))
    (answer,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert answer.content == "5" and answer.name == "add"
    # The system prompt reached the provider where each API wants it.
    wire = json.dumps(first)
    assert "You add." in wire


@pytest.mark.parametrize("client", list(CLIENTS))
def test_token_streaming_reaches_the_user_chunk_by_chunk(provider: ProviderDouble, client: str) -> None:
    provider.script(Reply(text="one two three four", chunk_size=4))
    agent = create_agent(CLIENTS[client](provider))
    chunks = [c for c, _ in agent.stream({"messages": [HumanMessage("count")]}, stream_mode="messages")
              if isinstance(c, AIMessageChunk)]
    text = "".join(c.text for c in chunks)
    assert text == "one two three four"
    assert len([c for c in chunks if c.text]) >= 4


@pytest.mark.parametrize("client", list(CLIENTS))
def test_usage_with_cached_and_reasoning_tokens_reaches_the_message(provider: ProviderDouble, client: str) -> None:
    provider.script(Reply(text="ok", input_tokens=100, output_tokens=20, cached_tokens=60, reasoning_tokens=5))
    result = create_agent(CLIENTS[client](provider)).invoke({"messages": [HumanMessage("hi")]})
    usage = result["messages"][-1].usage_metadata
    assert usage is not None and usage["output_tokens"] == 20
    assert usage["input_token_details"]["cache_read"] == 60
    assert isinstance(result["messages"][-1], AIMessage)
