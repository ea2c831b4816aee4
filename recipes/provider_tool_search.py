"""Provider tool search: defer a 30-tool CRM toolkit on Anthropic and OpenAI, and send it whole to a fallback.

What it shows
    ``ProviderToolSearchMiddleware(searchable_tools=CRM_TOOLS, on_unsupported="send_all")`` on an agent with two
    everyday tools and thirty CRM tools. On a model whose provider has server-side tool search (Anthropic, OpenAI:
    recognised by their ``ls_provider``), the CRM tools are sent deferred (copies with ``extras["defer_loading"]``)
    plus the provider's search tool, so each request carries two full schemas instead of thirty-two. The stand-in
    models below report themselves as Anthropic / OpenAI and record what they are sent (no network). The model then
    calls a CRM tool it found, and the agent runs it as usual.

    Checked: the payload for Anthropic and for OpenAI (deferred flags and the search tool), the agent's own tool
    objects untouched, the found tool executed, the ``tools_deferred`` event (naming the deferred tools),
    and a ``ModelFallbackMiddleware`` listed first: when the Anthropic model fails, the local backup model gets every
    tool normally (``on_unsupported="send_all"``); all under invoke and ainvoke.

When to use it
    Agents with large toolkits (MCP servers, internal APIs) on providers that support tool search.

Run it: ``python recipes/provider_tool_search.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from pydantic import Field

from middleware_kit import create_agent
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.provider_tool_search import (
    ANTHROPIC_TOOL_SEARCH,
    OPENAI_TOOL_SEARCH,
    ProviderToolSearchMiddleware,
)
from middleware_kit.testing import ScriptedChatModel, tool_call


class RecordingModel(ScriptedChatModel):
    """A scripted model that keeps what each call was bound with (what the provider integration would send)."""

    sent: list[list[Any]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.sent.append(list(tools))
        return super().bind_tools(tools, **kwargs)


class AnthropicStandIn(RecordingModel):
    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": "anthropic", "ls_model_type": "chat"}


class OpenAIStandIn(RecordingModel):
    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": "openai", "ls_model_type": "chat"}


@tool
def get_time(city: str) -> str:
    """Current local time in a city."""
    return f"12:00 in {city}"


@tool
def send_message(to: str, text: str) -> str:
    """Send a chat message to a colleague."""
    return "sent"


def crm_tool(number: int) -> BaseTool:
    def run(customer: str) -> str:
        return f"crm_{number:02d}({customer}): ok"

    return StructuredTool.from_function(run, name=f"crm_{number:02d}", description=f"CRM operation #{number}.")


CRM = [crm_tool(n) for n in range(30)]
TOOLS = [get_time, send_message, *CRM]


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def run(agent: Any, use_async: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    inp = {"messages": [HumanMessage("What does the CRM say about ACME?")]}
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}

    def record(kind: str, chunk: Any) -> None:
        nonlocal final
        if kind == "custom":
            events.append(chunk)
        else:
            final = chunk

    if use_async:

        async def consume() -> None:
            async for kind, chunk in agent.astream(inp, stream_mode=["custom", "values"]):
                record(kind, chunk)

        asyncio.run(consume())
    else:
        for kind, chunk in agent.stream(inp, stream_mode=["custom", "values"]):
            record(kind, chunk)
    return final, events


def middleware() -> ProviderToolSearchMiddleware:
    return ProviderToolSearchMiddleware(searchable_tools=CRM, on_unsupported="send_all")


def main() -> None:
    for use_async in (False, True):
        mode = "ainvoke" if use_async else "invoke"
        for label, cls, search_tool in (
            ("Anthropic", AnthropicStandIn, ANTHROPIC_TOOL_SEARCH),
            ("OpenAI", OpenAIStandIn, OPENAI_TOOL_SEARCH),
        ):
            print(f"- {label} ({mode}): 30 CRM tools deferred behind the provider's tool search")
            model = cls(
                responses=[AIMessage("", tool_calls=[tool_call("crm_07", {"customer": "ACME"})]), "ACME is fine."]
            )
            final, events = run(create_agent(model, TOOLS, middleware=[middleware()]), use_async)
            sent = model.sent[-1]
            deferred = [t.name for t in sent if isinstance(t, BaseTool) and (t.extras or {}).get("defer_loading")]
            loaded = [t.name for t in sent if isinstance(t, BaseTool) and t.name not in deferred]
            print(f"    loaded: {loaded}, deferred: {len(deferred)}, search tool: {sent[-1]}")
            check(loaded == ["get_time", "send_message"] and len(deferred) == 30, f"sent: {loaded} / {deferred}")
            check(sent[-1] == search_tool, f"the {label} search tool must be added: {sent[-1]}")
            check(all(t.extras is None for t in CRM), "the agent's own tools must stay untouched")
            results = [m.content for m in final["messages"] if isinstance(m, ToolMessage)]
            check(results == ["crm_07(ACME): ok"], f"the found tool runs as usual: {results}")
            check(events[0]["event"] == "tools_deferred" and events[0]["deferred"] == [t.name for t in CRM],
                  f"events: {events}")

        print(f"- Anthropic down, local backup ({mode}): the backup gets every tool normally")
        primary = AnthropicStandIn(responses=[ConnectionError("overloaded")])
        backup = RecordingModel(responses=["Answered by the local model."])
        agent = create_agent(primary, TOOLS, middleware=[ModelFallbackMiddleware(backup), middleware()])
        final, events = run(agent, use_async)
        check(final["messages"][-1].content == "Answered by the local model.", "the backup answers")
        check(primary.sent[-1][-1] == ANTHROPIC_TOOL_SEARCH, "the primary got the deferred request")
        check(backup.sent[-1] == TOOLS, "the backup got every tool, none deferred")
        check([e["event"] for e in events] == ["tools_deferred", "fallback", "tool_search_unsupported"], f"{events}")

    print("\nOK: tools were deferred for Anthropic and OpenAI, found tools ran, and the fallback got every tool.")


if __name__ == "__main__":
    main()
