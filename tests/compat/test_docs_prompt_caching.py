"""LangChain 1.5's documentation examples for ``AnthropicPromptCachingMiddleware`` (``langchain_anthropic.middleware``;
the "Prompt caching" section of the Anthropic middleware page), rewritten for middleware_kit: only the middleware's
import changed. ``from langchain_anthropic import ChatAnthropic`` imports the fake provider package of
tests/compat/_fake_providers.py (a scripted model named ``ChatAnthropic``, recognised by its class name)."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import MemorySaver

from middleware_kit import create_agent
from middleware_kit.middlewares.prompt_caching import AnthropicPromptCachingMiddleware

pytestmark = pytest.mark.usefixtures("fake_providers")


def test_basic_example() -> None:
    from langchain_anthropic import ChatAnthropic  # type: ignore[import-not-found]  # the fake_providers fixture

    agent = create_agent(
        model=ChatAnthropic(model="claude-sonnet-4-5-20250929"),
        system_prompt="<Your long system prompt here>",
        middleware=[AnthropicPromptCachingMiddleware(ttl="5m")],
    )
    result = agent.invoke({"messages": [HumanMessage("hi")]})
    assert result["messages"][-1].content == "scripted claude-sonnet-4-5-20250929"


def test_full_example(capsys: pytest.CaptureFixture[str]) -> None:
    from langchain_anthropic import ChatAnthropic

    LONG_PROMPT = """
Please be a helpful assistant.

<Lots more context ...>
"""

    model = ChatAnthropic(model="claude-sonnet-4-5-20250929")
    agent = create_agent(
        model=model,
        system_prompt=LONG_PROMPT,
        middleware=[AnthropicPromptCachingMiddleware(ttl="5m")],
        checkpointer=MemorySaver(),  # Persists conversation history
    )

    # Use a thread_id to maintain conversation state
    config: RunnableConfig = {"configurable": {"thread_id": "user-123"}}

    # First invocation: Creates cache with system prompt, tools, and "Hi, my name is Bob"
    agent.invoke({"messages": [HumanMessage("Hi, my name is Bob")]}, config=config)

    # Second invocation: Reuses cached system prompt, tools, and previous messages
    # The checkpointer maintains conversation history, so the agent remembers "Bob"
    result = agent.invoke({"messages": [HumanMessage("What's my name?")]}, config=config)
    print(result["messages"][-1].content)

    assert capsys.readouterr().out == "scripted claude-sonnet-4-5-20250929\n"
    system, *history = model.calls[1].messages
    assert system.content[-1]["cache_control"] == {"type": "ephemeral"}
    assert history[0].content == "Hi, my name is Bob"  # the cached prefix is sent byte for byte as before
    assert history[-1].content == [{"type": "text", "text": "What's my name?", "cache_control": {"type": "ephemeral"}}]
