"""Keep prompt-cache hits: breakpoints for Claude, and an alarm when something breaks the cached prefix.

What it shows
    ``PromptCachingMiddleware`` listed last (innermost) in an agent whose model is recognised as ``ChatAnthropic``
    (a scripted stand-in: detection is by class name, so no provider package is needed). Over a three-turn thread
    the recipe checks that the system prompt and the newest message carry ``cache_control`` breakpoints, and that
    no ``prompt_cache_prefix_changed`` event fires while the prefix is stable. Then a "compaction" hook starts
    rewriting history (as a summarizer does), and the event reports the broken prefix: the component, the first
    differing message and that the history was rewritten in state.

When to use it
    Any long-running agent on a provider with prompt caching (Anthropic, Bedrock, and OpenAI's automatic caching for
    the stability check): the events tell you which change costs you the cache.

Run it: ``python recipes/prompt_caching.py``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import before_model, create_agent
from middleware_kit.middlewares.prompt_caching import PromptCachingMiddleware
from middleware_kit.testing import ScriptedChatModel


class ChatAnthropic(ScriptedChatModel):
    """Stands in for langchain_anthropic.ChatAnthropic."""


COMPACT = {"on": False}


@before_model
def compact(state: Any, runtime: Any) -> dict[str, Any] | None:
    """Drops the oldest exchange once switched on (what a summarizer does to history)."""
    messages = state["messages"]
    if not COMPACT["on"] or len(messages) < 4:
        return None
    return {"messages": [RemoveMessage(id=m.id) for m in messages[:2]]}


def turn(agent: Any, text: str, config: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in agent.stream({"messages": [HumanMessage(text)]}, config, stream_mode="custom")
            if e["event"] == "prompt_cache_prefix_changed"]


def main() -> None:
    model = ChatAnthropic(["Noted.", "Sure.", "Done.", "Yes."], cycle=True)
    agent = create_agent(model, system_prompt="You are a meticulous assistant. " * 50,
                         middleware=[compact, PromptCachingMiddleware()], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "customer-42"}}
    quiet = [turn(agent, text, config) for text in ("My order is #1234.", "It arrived damaged.", "Refund, please.")]
    assert quiet == [[], [], []], quiet
    last_call = model.calls[-1].messages
    assert last_call[0].content[-1]["cache_control"] == {"type": "ephemeral"}
    assert last_call[-1].content[-1]["cache_control"] == {"type": "ephemeral"}
    print(f"3 turns, {len(model.calls)} model calls, prefix stable, breakpoints on system + newest message")

    COMPACT["on"] = True
    [event] = turn(agent, "Any update?", config)
    print("event:", {k: event[k] for k in ("component", "message_index", "changed_in", "cached_messages")})
    print("      ", event["detail"])
    assert (event["component"], event["message_index"], event["changed_in"]) == ("messages", 0, "state")
    print("OK: breakpoints placed; the history rewrite that broke the cache was reported")


if __name__ == "__main__":
    main()
