"""A looping model, stopped: nudge, take the tool away, force the answer; and never a GraphRecursionError.

What it shows
    Three scripted models that get stuck the way real ones do, each with ``LoopGuardMiddleware()``:

    1. a model that repeats one search with the same arguments: the third identical call is refused with a nudge,
       the next one removes the tool, and the final call (no tools) gives an answer; the tool ran twice, not forever;
    2. a model that flip-flops between two lookups (``A B A B``): the oscillation is detected;
    3. a model that always finds one more page to crawl (new arguments every time, so no loop to detect) under
       ``recursion_limit=15``: the guard turns the last call it can afford into a final-answer call. The same agent
       without the guard raises ``GraphRecursionError``.

    Each step is printed as it arrives on the custom stream (``loop_detected``, ``loop_guard_tool_removed``,
    ``loop_guard_final_answer``), under ``astream`` for the async path.

When to use it
    Any tool-using agent in production, together with a ``recursion_limit`` you chose and a budget.

Run it: ``python recipes/loop_guard.py``.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.errors import GraphRecursionError

from middleware_kit import create_agent
from middleware_kit.middlewares.loop_guard import DEFAULT_FINAL_PROMPT, LoopGuardMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call

RAN: list[str] = []


@tool
def search(query: str) -> str:
    """Search the web."""
    RAN.append(f"search:{query}")
    return "no results"


@tool
def lookup(key: str) -> str:
    """Look a key up in the knowledge base."""
    RAN.append(f"lookup:{key}")
    return f"{key} depends on the other one"


@tool
def crawl(page: int) -> str:
    """Fetch one page of the site."""
    RAN.append(f"crawl:{page}")
    return f"page {page}: more links"


def final_call(messages: list[BaseMessage]) -> bool:
    return isinstance(messages[-1], HumanMessage) and messages[-1].content == DEFAULT_FINAL_PROMPT


def stubborn(messages: list[BaseMessage]) -> AIMessage | str:
    if final_call(messages):
        return "I searched twice and found nothing about the Atlantis weather; I'll stop here."
    return AIMessage("", tool_calls=[tool_call("search", {"query": "weather in Atlantis"})])


FLIP = itertools.cycle("ab")


def flip_flop(messages: list[BaseMessage]) -> AIMessage | str:
    if final_call(messages):
        return "a and b depend on each other; I cannot resolve them further."
    return AIMessage("", tool_calls=[tool_call("lookup", {"key": next(FLIP)})])


PAGES = itertools.count(1)


def crawler(messages: list[BaseMessage]) -> AIMessage | str:
    if final_call(messages):
        return "Summary of the pages read so far."
    return AIMessage("", tool_calls=[tool_call("crawl", {"page": next(PAGES)})])


async def run(name: str, reply: Any, tools: list[Any], **config: Any) -> Any:
    print(f"-- {name}")
    agent = create_agent(ScriptedChatModel(default=reply), tools, middleware=[LoopGuardMiddleware()])
    final: Any = {}
    chunk: Any
    async for mode, chunk in agent.astream({"messages": [HumanMessage("Go.")]}, cast(Any, config or None),
                                           stream_mode=["custom", "values"]):
        if mode == "custom":
            print("   event:", {k: v for k, v in chunk.items() if k != "middleware"})
        else:
            final = chunk
    print("   answer:", final["messages"][-1].content)
    return final


def paired(messages: list[Any]) -> bool:
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    answers = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return calls == answers


async def main() -> None:
    out = await run("1. the same search again and again", stubborn, [search])
    assert RAN == ["search:weather in Atlantis"] * 2, RAN
    assert out["messages"][-1].content.startswith("I searched twice"), out["messages"][-1]
    assert paired(out["messages"])

    RAN.clear()
    out = await run("2. flip-flopping between two lookups", flip_flop, [lookup])
    assert RAN == ["lookup:a", "lookup:b", "lookup:a"], RAN  # the 4th call closed the A B A B cycle: refused
    assert any("alternating" in m.text for m in out["messages"] if isinstance(m, ToolMessage))
    assert out["messages"][-1].content.startswith("a and b depend"), out["messages"][-1]

    RAN.clear()
    out = await run("3. always one more page (recursion_limit=15)", crawler, [crawl], recursion_limit=15)
    assert out["messages"][-1].content == "Summary of the pages read so far.", out["messages"][-1]
    assert len(RAN) >= 4 and paired(out["messages"]), RAN
    unguarded = create_agent(ScriptedChatModel(default=crawler), [crawl])
    try:
        await unguarded.ainvoke({"messages": [HumanMessage("Go.")]}, {"recursion_limit": 15})
    except GraphRecursionError:
        print("   without the guard: GraphRecursionError")
    else:
        raise AssertionError("the unguarded crawler should have hit the recursion limit")

    print("OK: repeats, oscillation and an endless crawl all ended with an answer; no GraphRecursionError")


if __name__ == "__main__":
    asyncio.run(main())
