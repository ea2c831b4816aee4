"""LangChain 1.5's documentation examples for ``LLMToolEmulator`` (the "LLM tool emulator" section of the prebuilt
middleware page: the short example and the "Full example"), rewritten: imports changed, ``model="gpt-5.4"`` replaced
by a ``ScriptedChatModel`` that calls both tools, and the emulation model given as a ``ScriptedChatModel``
(``model=``: the page's default, "the agent's model", is not what LangChain's code does, see the last test). Each
test asserts what the page says: ``None`` (default) emulates ALL tools, a list emulates only those, ``[]`` none."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit.middlewares import llm_tool_emulator
from middleware_kit.middlewares.llm_tool_emulator import LLMToolEmulator
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner


@tool
def get_weather(location: str) -> str:
    """Get the current weather for a location."""
    return f"Weather in {location}"


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    return "Email sent"


Q: dict[str, Any] = {"messages": [HumanMessage("Weather in Paris, and mail it to Ann.")]}


def agent_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            AIMessage(
                "",
                tool_calls=[
                    tool_call("get_weather", {"location": "Paris"}, id="w"),
                    tool_call("send_email", {"to": "ann@example.com", "subject": "Weather", "body": "..."}, id="m"),
                ],
            ),
            "Done.",
        ]
    )


def emulation_model() -> ScriptedChatModel:
    """Answers for the tool named in the emulation prompt (the two calls run in parallel: in either order)."""
    return ScriptedChatModel(
        default=lambda messages: AIMessage(
            "EMULATED mail" if "send_email" in str(messages[-1].content) else "EMULATED weather"
        )
    )


def answers(result: dict[str, Any]) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in result["messages"] if isinstance(m, ToolMessage)}


def test_emulate_all_tools_by_default(run: Runner) -> None:
    agent = create_agent(
        model=agent_model(),
        tools=[get_weather, send_email],
        middleware=[LLMToolEmulator(model=emulation_model())],
    )
    assert answers(run(agent, Q)) == {"w": "EMULATED weather", "m": "EMULATED mail"}


def test_emulate_specific_tools_only(run: Runner) -> None:
    agent2 = create_agent(
        model=agent_model(),
        tools=[get_weather, send_email],
        middleware=[LLMToolEmulator(tools=["get_weather"], model=ScriptedChatModel(["EMULATED weather"]))],
    )
    assert answers(run(agent2, Q)) == {"w": "EMULATED weather", "m": "Email sent"}


def test_emulate_specific_tools_by_instance_and_none_with_an_empty_list(run: Runner) -> None:
    by_instance = create_agent(
        model=agent_model(),
        tools=[get_weather, send_email],
        middleware=[LLMToolEmulator(tools=[get_weather], model=ScriptedChatModel(["EMULATED weather"]))],
    )
    assert answers(run(by_instance, Q)) == {"w": "EMULATED weather", "m": "Email sent"}
    none = create_agent(
        model=agent_model(),
        tools=[get_weather, send_email],
        middleware=[LLMToolEmulator(tools=[], model=ScriptedChatModel([]))],
    )
    assert answers(run(none, Q)) == {"w": "Weather in Paris", "m": "Email sent"}


def test_use_a_custom_model_for_emulation(run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    custom = emulation_model()
    monkeypatch.setattr(
        llm_tool_emulator, "init_chat_model", lambda name, **kw: custom if name == "claude-sonnet-4-6" else None
    )
    agent4 = create_agent(
        model=agent_model(),
        tools=[get_weather, send_email],
        middleware=[LLMToolEmulator(model="claude-sonnet-4-6")],
    )
    assert answers(run(agent4, Q)) == {"w": "EMULATED weather", "m": "EMULATED mail"}


def test_the_default_model_is_langchains_default_not_the_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page says the default is "the agent's model"; LangChain's code uses "anthropic:claude-sonnet-4-5-20250929"
    (langchain#34274), deprecated since 1.5. We do the same; without langchain-anthropic it is an ImportError."""

    def missing(name: str, **kwargs: Any) -> Any:
        raise MiddlewareConfigError("Unable to import langchain_anthropic", middleware="resolve_model", hook="model")

    monkeypatch.setattr(llm_tool_emulator, "init_chat_model", missing)
    with pytest.warns(DeprecationWarning), pytest.raises(ImportError, match="'anthropic:claude-sonnet-4-5-20250929'"):
        LLMToolEmulator()
