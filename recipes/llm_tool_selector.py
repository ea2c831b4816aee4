"""Tool selection for a 12-tool support agent: the main model sees 3 tools, never the selector's tokens.

What it shows
    ``LLMToolSelectorMiddleware(model=selector, max_tools=2, always_include=["escalate"])`` in front of a support agent
    with twelve tools. Before each model call the small selection model picks the relevant tools for the latest user
    message; the main model is sent only those (plus ``escalate``), in the agent's own tool order.

    Three scenarios, each checked: a normal question (2 tools selected + 1 always included; the selector's answer
    never appears in ``stream_mode="messages"``); the selector's provider failing (the run goes on with all twelve
    tools and a ``tool_selection_failed`` event); the selector inventing a tool (dropped and reported, under
    ``ainvoke``).

When to use it
    Agents with dozens of tools (MCP servers, large internal toolkits): fewer schemas per call cost less and make the
    main model choose better. Give the selector a small, fast model.

Run it: ``python recipes/llm_tool_selector.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool

from middleware_kit import create_agent
from middleware_kit.middlewares.llm_tool_selector import SELECT_TOOLS_NAME, LLMToolSelectorMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call

TOOL_DESCRIPTIONS = {
    "lookup_order": "Find an order by its number.",
    "refund_order": "Refund an order.",
    "track_parcel": "Track a parcel by tracking number.",
    "update_address": "Change a customer's delivery address.",
    "list_invoices": "List a customer's invoices.",
    "reset_password": "Send a password reset link.",
    "product_search": "Search the product catalogue.",
    "stock_level": "Stock level of a product.",
    "create_ticket": "Open a support ticket.",
    "close_ticket": "Close a support ticket.",
    "loyalty_points": "A customer's loyalty points.",
    "escalate": "Hand the conversation to a human agent.",
}


def make_tool(name: str, description: str) -> BaseTool:
    def run(query: str) -> str:
        return f"{name}({query}): ok"

    return StructuredTool.from_function(run, name=name, description=description)


TOOLS = [make_tool(name, description) for name, description in TOOL_DESCRIPTIONS.items()]


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def select(*names: str) -> AIMessage:
    return AIMessage("", tool_calls=[tool_call(SELECT_TOOLS_NAME, {"tools": list(names)})])


def build(selector: ScriptedChatModel, main: ScriptedChatModel) -> Any:
    mw = LLMToolSelectorMiddleware(model=selector, max_tools=2, always_include=["escalate"])
    return create_agent(main, TOOLS, middleware=[mw], system_prompt="You are a support agent.")


def run(agent: Any, question: str, *, use_async: bool = False) -> tuple[list[str], list[dict[str, Any]]]:
    """Stream one run: the tokens the user would see, and the middleware events."""
    tokens: list[str] = []
    events: list[dict[str, Any]] = []

    def record(kind: str, chunk: Any) -> None:
        if kind == "custom":
            events.append(chunk)
            print(f"    event: {chunk}")
        elif isinstance(chunk[0], AIMessage) and chunk[0].text:  # what the user reads (tool results aside)
            tokens.append(chunk[0].text)

    inp = {"messages": [HumanMessage(question)]}
    if use_async:

        async def consume() -> None:
            async for kind, chunk in agent.astream(inp, stream_mode=["custom", "messages"]):
                record(kind, chunk)

        asyncio.run(consume())
    else:
        for kind, chunk in agent.stream(inp, stream_mode=["custom", "messages"]):
            record(kind, chunk)
    return tokens, events


def main() -> None:
    print("1. 'Where is my parcel?': the selector picks 2 of 12 tools; escalate is always there")
    pick = select("track_parcel", "lookup_order", "refund_order")
    selector = ScriptedChatModel([pick, pick])  # one selection per model call: before the tool, and after it
    main_model = ScriptedChatModel(
        [
            AIMessage("", tool_calls=[tool_call("track_parcel", {"query": "ZX-81"})]),
            "Your parcel ZX-81 arrives tomorrow.",
        ]
    )
    tokens, events = run(build(selector, main_model), "Where is my parcel ZX-81?")
    sent = [call.tools for call in main_model.calls]
    print(f"    tools sent to the main model: {sent[0]}")
    check(sent[0] == ("lookup_order", "track_parcel", "escalate"), f"unexpected tools: {sent[0]}")
    check(selector.call_count == 2 and sent[1] == sent[0], "one selection per model call, the same both times")
    check(
        events[0]["event"] == "tools_selected" and events[0]["dropped"][:2] == ["refund_order", "update_address"],
        f"events: {events}",
    )
    check(not any("track_parcel" in t or "tools" in t for t in tokens), f"selector tokens leaked: {tokens}")
    check(tokens[-1] == "Your parcel ZX-81 arrives tomorrow.", f"tokens: {tokens}")

    print("2. the selector's provider is down: every tool is sent and the run goes on")
    selector = ScriptedChatModel([ConnectionError("503 from the selector's provider")])
    main_model = ScriptedChatModel(["I can help with orders, parcels and more."])
    _, events = run(build(selector, main_model), "What can you do?")
    check(len(main_model.calls[0].tools) == 12, f"expected all 12 tools, got {main_model.calls[0].tools}")
    check(
        events
        == [
            {
                "event": "tool_selection_failed",
                "middleware": "LLMToolSelectorMiddleware",
                "reason": "the selection model raised",
                "error": "ConnectionError: 503 from the selector's provider",
            }
        ],
        f"events: {events}",
    )

    print("3. the selector invents 'teleport_parcel' (ainvoke): dropped and reported")
    selector = ScriptedChatModel([select("teleport_parcel", "stock_level")])
    main_model = ScriptedChatModel(["Item 42 is in stock."])
    _, events = run(build(selector, main_model), "Is item 42 in stock?", use_async=True)
    check(main_model.calls[0].tools == ("stock_level", "escalate"), f"tools: {main_model.calls[0].tools}")
    check(events[0]["invalid"] == ["teleport_parcel"], f"events: {events}")

    print("\nOK: the main model saw only the relevant tools, selector failures never broke a run, nothing leaked.")


if __name__ == "__main__":
    main()
