"""LangChain 1.5's documentation examples for ``OpenAIModerationMiddleware`` (``langchain_openai.middleware``; the
"Content moderation" section of the OpenAI middleware page), rewritten: the middleware's import changed;
``from langchain_openai import ChatOpenAI`` imports the fake provider package of tests/compat/_fake_providers.py;
the undefined tools are defined. Building them needs neither the ``openai`` package nor a
key (the SDK is imported at the first check); the last test runs the strict example with an SDK-shaped fake client."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from middleware_kit import create_agent
from middleware_kit.middlewares.moderation import OpenAIModerationError, OpenAIModerationMiddleware
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner

pytestmark = pytest.mark.usefixtures("fake_providers")


@tool
def search_tool(query: str) -> str:
    """Search."""
    return query


@tool
def database_tool(sql: str) -> str:
    """Query."""
    return sql


customer_data_tool = database_tool


def test_basic_example() -> None:
    from langchain_openai import ChatOpenAI  # type: ignore[import-not-found]  # the fake_providers fixture

    agent = create_agent(
        model=ChatOpenAI(model="gpt-5.5"),
        tools=[search_tool, database_tool],
        middleware=[
            OpenAIModerationMiddleware(
                model="omni-moderation-latest",
                check_input=True,
                check_output=True,
                exit_behavior="end",
            ),
        ],
    )
    assert agent is not None


def strict_middleware(**extra: Any) -> OpenAIModerationMiddleware:
    return OpenAIModerationMiddleware(
        model="omni-moderation-latest",
        check_input=True,
        check_output=True,
        check_tool_results=True,
        exit_behavior="error",
        violation_message=(
            "Content policy violation detected: {categories}. "
            "Please rephrase your request."
        ),
        **extra,
    )


def test_full_example() -> None:
    from langchain_openai import ChatOpenAI

    # Basic moderation
    agent = create_agent(
        model=ChatOpenAI(model="gpt-5.5"),
        tools=[search_tool, customer_data_tool],
        middleware=[
            OpenAIModerationMiddleware(
                model="omni-moderation-latest",
                check_input=True,
                check_output=True,
            ),
        ],
    )

    # Strict moderation with custom message
    agent_strict = create_agent(
        model=ChatOpenAI(model="gpt-5.5"),
        tools=[search_tool, customer_data_tool],
        middleware=[strict_middleware()],
    )

    # Moderation with replacement behavior
    agent_replace = create_agent(
        model=ChatOpenAI(model="gpt-5.5"),
        tools=[search_tool],
        middleware=[
            OpenAIModerationMiddleware(
                check_input=True,
                exit_behavior="replace",
                violation_message="[Content removed due to safety policies]",
            ),
        ],
    )
    assert agent is not None and agent_strict is not None and agent_replace is not None


class _Moderations:
    def create(self, *, model: str, input: str) -> Any:  # the SDK's keyword names
        flagged = "harass" in input
        result = SimpleNamespace(flagged=flagged, categories={"harassment": flagged},
                                 category_scores={"harassment": 0.97 if flagged else 0.01})
        return SimpleNamespace(results=[result])


class _AsyncModerations(_Moderations):
    async def create(self, *, model: str, input: str) -> Any:
        return _Moderations.create(self, model=model, input=input)


def test_strict_example_runs(run: Runner) -> None:
    middleware = strict_middleware(client=SimpleNamespace(moderations=_Moderations()),
                                   async_client=SimpleNamespace(moderations=_AsyncModerations()))
    agent = create_agent(model=ScriptedChatModel(["ok"]), tools=[search_tool], middleware=[middleware])
    with pytest.raises(OpenAIModerationError) as caught:
        run(agent, {"messages": [HumanMessage("let me harass them")]})
    assert caught.value.violation_message == (
        "Content policy violation detected: harassment. Please rephrase your request."
    )
