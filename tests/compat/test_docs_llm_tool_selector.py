"""LangChain 1.5's documentation example for ``LLMToolSelectorMiddleware`` (the "LLM tool selector" section of the
prebuilt middleware page), rewritten: imports changed, ``model="gpt-5.4"`` / ``model="gpt-5.4-mini"`` replaced by
``ScriptedChatModel``s, and ``tools=[tool1, ..., tool5, ...]`` made real. Each test asserts what the page says:
"If the model selects more, only the first max_tools will be used", always-included tools "do not count against the
max_tools limit", and the selection model "defaults to the agent's main model"."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool

from middleware_kit import create_agent
from middleware_kit.middlewares.llm_tool_selector import LLMToolSelectorMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner


def _tool(name: str) -> BaseTool:
    def run(query: str) -> str:
        return f"{name}: {query}"

    return StructuredTool.from_function(run, name=name, description=f"The {name} tool.")


tool1, tool2, tool3, tool4, tool5, search = (_tool(n) for n in ("tool1", "tool2", "tool3", "tool4", "tool5", "search"))
Q: dict[str, Any] = {"messages": [HumanMessage("Which tools do you need?")]}


def selection(*names: str) -> AIMessage:
    return AIMessage("", tool_calls=[tool_call("select_tools", {"tools": list(names)})])


def test_the_example_selects_at_most_three_tools_and_always_includes_search(run: Runner) -> None:
    main = ScriptedChatModel(["done"])  # model="gpt-5.4"
    selector = ScriptedChatModel([selection("tool5", "tool2", "tool4", "tool1")])  # model="gpt-5.4-mini"
    agent = create_agent(
        model=main,
        tools=[tool1, tool2, tool3, tool4, tool5, search],
        middleware=[
            LLMToolSelectorMiddleware(
                model=selector,
                max_tools=3,
                always_include=["search"],
            ),
        ],
    )
    run(agent, Q)
    # the first three selected (tool5, tool2, tool4) plus `search`, which does not count against max_tools
    assert set(main.calls[0].tools) == {"tool5", "tool2", "tool4", "search"}
    assert "tool1" not in main.calls[0].tools and "tool3" not in main.calls[0].tools


def test_the_selection_model_defaults_to_the_agents_main_model(run: Runner) -> None:
    main = ScriptedChatModel([selection("tool3"), "done"])
    agent = create_agent(model=main, tools=[tool1, tool2, tool3], middleware=[LLMToolSelectorMiddleware(max_tools=3)])
    run(agent, Q)
    assert [c.tools for c in main.calls] == [("select_tools",), ("tool3",)]


def test_the_system_prompt_is_the_selection_models_instructions(run: Runner) -> None:
    selector = ScriptedChatModel([selection("tool1")])
    mw = LLMToolSelectorMiddleware(model=selector, system_prompt="Pick the tools for a travel agent.")
    run(create_agent(model=ScriptedChatModel(["ok"]), tools=[tool1, tool2], middleware=[mw]), Q)
    assert str(selector.calls[0].messages[0].content).startswith("Pick the tools for a travel agent.")
