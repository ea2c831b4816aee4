"""LangChain 1.5's documentation examples for ``ProviderToolSearchMiddleware`` (the "Provider tool search" section of
the prebuilt middleware page: the short example and the "Full example"), rewritten: imports changed and
``model="anthropic:claude-opus-4-8"`` replaced by a ``ScriptedChatModel`` that reports itself as Anthropic (as
langchain-anthropic's model does) and records what it is sent. Each test asserts what the page says: the listed tools
are deferred; a tool built with ``extras={"defer_loading": True}`` is deferred on its own; with ``searchable_tools``
omitted only pre-marked tools are; other providers raise a ``ValueError``."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool, tool
from pydantic import Field

from middleware_kit import create_agent
from middleware_kit.middlewares.provider_tool_search import ProviderToolSearchMiddleware
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner


class ClaudeOpus(ScriptedChatModel):
    """Stands in for ``"anthropic:claude-opus-4-8"``: Anthropic as its LangSmith provider; records bound tools."""

    sent: list[list[Any]] = Field(default_factory=list)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": "anthropic", "ls_model_type": "chat"}

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.sent.append(list(tools))
        return super().bind_tools(tools, **kwargs)


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return "Sunny, 22C"


@tool
def lookup_order(order_id: str) -> str:
    """Look up the current delivery status of a customer order by ID."""
    return "OUT_FOR_DELIVERY"


def deferred(sent: list[Any]) -> list[str]:
    return [t.name for t in sent if isinstance(t, BaseTool) and (t.extras or {}).get("defer_loading")]


Q: dict[str, Any] = {"messages": [HumanMessage("Where is order 42?")]}


def test_the_example_defers_lookup_order(run: Runner) -> None:
    model = ClaudeOpus(responses=["It is out for delivery."])
    agent = create_agent(
        model=model,
        tools=[get_weather, lookup_order],
        middleware=[
            ProviderToolSearchMiddleware(searchable_tools=["lookup_order"]),
        ],
    )
    run(agent, Q)
    assert deferred(model.sent[-1]) == ["lookup_order"]
    assert model.sent[-1][-1]["type"].startswith("tool_search_tool")


def test_the_full_example_defers_a_tool_marked_at_construction(run: Runner) -> None:
    # Marked `defer_loading` at construction, so it's deferred on its own:
    # no need to list it in `searchable_tools`.
    @tool(extras={"defer_loading": True})
    def send_email(to: str) -> str:
        """Send an email."""
        return "sent"

    model = ClaudeOpus(responses=["ok"])
    agent = create_agent(
        model=model,
        tools=[send_email],
        middleware=[ProviderToolSearchMiddleware()],
    )
    run(agent, Q)
    assert deferred(model.sent[-1]) == ["send_email"]


def test_without_searchable_tools_only_pre_marked_tools_are_deferred(run: Runner) -> None:
    model = ClaudeOpus(responses=["ok"])
    run(create_agent(model=model, tools=[get_weather, lookup_order], middleware=[ProviderToolSearchMiddleware()]), Q)
    assert model.sent[-1] == [get_weather, lookup_order]  # nothing deferred: the request passes through


def test_other_providers_raise_a_value_error(run: Runner) -> None:
    agent = create_agent(
        model=ScriptedChatModel(["never"]),
        tools=[get_weather, lookup_order],
        middleware=[ProviderToolSearchMiddleware(searchable_tools=["lookup_order"])],
    )
    with pytest.raises(ValueError, match="has no server-side tool search"):
        run(agent, Q)
