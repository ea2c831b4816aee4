"""The examples of LangChain 1.5's "Built-in middleware" page (docs.langchain.com/oss/python/langchain/middleware/
built-in) for the middlewares of this module set: summarization, call limits, model fallback, todo list, tool and
model retry, context editing. Rewritten for middleware_kit: imports changed, models scripted; model strings resolve
through fake provider packages on sys.path (tests/compat/_fake_providers.py). Each test asserts what the page says.

(The human-in-the-loop, PII, LLM tool selector/emulator and shell/file-search sections have their own files.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import create_agent
from middleware_kit import flow as flow_module
from middleware_kit.middlewares.context_editing import ClearToolUsesEdit, ContextEditingMiddleware
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.limits import ModelCallLimitMiddleware, ToolCallLimitMiddleware
from middleware_kit.middlewares.retry import ModelRetryMiddleware, ToolRetryMiddleware
from middleware_kit.middlewares.summarization import SummarizationMiddleware, is_summary
from middleware_kit.middlewares.todo_list import TodoListMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner


@tool
def weather_tool(city: str) -> str:
    """Get the weather."""
    return f"sunny in {city}"


@tool
def calculator_tool(expression: str) -> str:
    """Calculate."""
    return "4"


@tool
def search_tool(query: str) -> str:
    """Search."""
    return f"results for {query}"


def calls(name: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[tool_call(name, args)])


@pytest.fixture(autouse=True)
def no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The page's retry settings wait 1s, 2s, ...; record the waits instead (the documented patch points)."""
    slept: list[float] = []

    async def fake_asleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(flow_module, "sleep", slept.append)
    monkeypatch.setattr(flow_module, "asleep", fake_asleep)
    return slept


# -- Summarization -----------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("fake_providers")
def test_summarization(run: Runner) -> None:
    summarizer = SummarizationMiddleware(model="gpt-4o-mini", trigger=("tokens", 4000), keep=("messages", 20))
    assert type(summarizer.model).__name__ == "ChatOpenAI" and summarizer.model.model == "gpt-4o-mini"  # type: ignore[attr-defined]
    model = ScriptedChatModel(["final answer"], cycle=True)
    agent = create_agent(model, tools=[weather_tool, calculator_tool], middleware=[summarizer])
    long_history = []
    for i in range(30):
        long_history += [HumanMessage(f"question {i} " + "word " * 60), AIMessage(f"answer {i} " + "word " * 60)]
    result = run(agent, {"messages": [*long_history, HumanMessage("and now?")]})
    messages = result["messages"]
    # Older messages were replaced by a summary; the most recent 20 messages were kept (plus the new answer).
    assert is_summary(messages[0]) and messages[0].content.endswith("scripted gpt-4o-mini")
    assert len(messages) == 1 + 20 + 1 and messages[-2].content == "and now?"


# -- Model call limit --------------------------------------------------------------------------------------------
def test_model_call_limit(run: Runner) -> None:
    model = ScriptedChatModel([calls("search_tool", query="x")], cycle=True)  # a model that never stops
    agent = create_agent(
        model,
        tools=[search_tool],
        checkpointer=InMemorySaver(),  # required for thread limiting
        middleware=[ModelCallLimitMiddleware(thread_limit=10, run_limit=5, exit_behavior="end")],
    )
    config = {"configurable": {"thread_id": "t"}}
    result = run(agent, {"messages": [HumanMessage("loop")]}, config=config)
    assert model.call_count == 5 and result["messages"][-1].content == "Model call limits exceeded: run limit (5/5)"
    result = run(agent, {"messages": [HumanMessage("again")]}, config=config)
    assert model.call_count == 10
    result = run(agent, {"messages": [HumanMessage("and again")]}, config=config)
    assert model.call_count == 10
    assert result["messages"][-1].content == "Model call limits exceeded: thread limit (10/10)"


# -- Tool call limit ---------------------------------------------------------------------------------------------
def test_tool_call_limit(run: Runner) -> None:
    global_limiter = ToolCallLimitMiddleware(thread_limit=20, run_limit=10)
    search_limiter = ToolCallLimitMiddleware(tool_name="search_tool", thread_limit=5, run_limit=3)
    model = ScriptedChatModel([calls("search_tool", query="again")] * 4 + ["done"])
    agent = create_agent(model, tools=[search_tool, calculator_tool],
                         middleware=[global_limiter, search_limiter], checkpointer=InMemorySaver())
    result = run(agent, {"messages": [HumanMessage("research")]}, config={"configurable": {"thread_id": "t"}})
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in answers] == ["success", "success", "success", "error"]
    assert answers[-1].content == "Tool call limit exceeded. Do not call 'search_tool' again."
    assert result["messages"][-1].content == "done"


def test_tool_call_limit_end_behavior(run: Runner) -> None:
    limiter = ToolCallLimitMiddleware(run_limit=1, exit_behavior="end")
    model = ScriptedChatModel([calls("search_tool", query="a"), calls("search_tool", query="b"), "never"])
    result = run(create_agent(model, tools=[search_tool], middleware=[limiter]), {"messages": [HumanMessage("go")]})
    assert result["messages"][-1].content == "Tool call limit reached: run limit exceeded (2/1 calls)."
    assert model.call_count == 2


# -- Model fallback ----------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("fake_providers")
def test_model_fallback(run: Runner) -> None:
    fallback = ModelFallbackMiddleware("gpt-4o-mini", "claude-3-5-sonnet-20241022")
    assert [type(m).__name__ for m in fallback.models] == ["ChatOpenAI", "ChatAnthropic"]
    primary = ScriptedChatModel([ConnectionError("primary down")], cycle=True)
    result = run(create_agent(primary, tools=[search_tool], middleware=[fallback]), {"messages": [HumanMessage("hi")]})
    assert result["messages"][-1].content == "scripted gpt-4o-mini"


# -- To-do list --------------------------------------------------------------------------------------------------
def test_todo_list(run: Runner) -> None:
    plan = [{"content": "read the files", "status": "in_progress"}, {"content": "refactor", "status": "pending"}]
    model = ScriptedChatModel([calls("write_todos", todos=plan), "started"])
    result = run(create_agent(model, tools=[search_tool], middleware=[TodoListMiddleware()]),
                 {"messages": [HumanMessage("Help me refactor my codebase")]})
    assert result["todos"] == plan
    assert model.calls[0].tools == ("search_tool", "write_todos")


# -- Tool retry --------------------------------------------------------------------------------------------------
def test_tool_retry(run: Runner, no_real_sleep: list[float]) -> None:
    failures = [ConnectionError("blip"), ConnectionError("blip")]

    @tool
    def flaky_search(query: str) -> str:
        """Search (flaky)."""
        if failures:
            raise failures.pop()
        return f"results for {query}"

    model = ScriptedChatModel([calls("flaky_search", query="x"), "done"])
    retry = ToolRetryMiddleware(max_retries=3, backoff_factor=2.0, initial_delay=1.0, jitter=False)
    result = run(create_agent(model, tools=[flaky_search], middleware=[retry]), {"messages": [HumanMessage("go")]})
    assert result["messages"][2].content == "results for x"
    assert no_real_sleep == [1.0, 2.0]


def test_tool_retry_gives_up_with_a_message(run: Runner) -> None:
    @tool
    def broken(query: str) -> str:
        """Always fails."""
        raise ConnectionError("down")

    model = ScriptedChatModel([calls("broken", query="x"), "ok"])
    retry = ToolRetryMiddleware(max_retries=2, on_failure="continue")
    result = run(create_agent(model, tools=[broken], middleware=[retry]), {"messages": [HumanMessage("go")]})
    answer = result["messages"][2]
    assert answer.status == "error" and answer.content.startswith("Tool 'broken' failed after 3 attempts with "
                                                                   "ConnectionError")


# -- Model retry -------------------------------------------------------------------------------------------------
def test_model_retry(run: Runner, no_real_sleep: list[float]) -> None:
    model = ScriptedChatModel([TimeoutError("slow"), ConnectionError("blip"), "finally"])
    retry = ModelRetryMiddleware(max_retries=3, backoff_factor=2.0, initial_delay=1.0, jitter=False)
    result = run(create_agent(model, tools=[search_tool], middleware=[retry]), {"messages": [HumanMessage("hi")]})
    assert result["messages"][-1].content == "finally" and no_real_sleep == [1.0, 2.0]


def test_model_retry_custom_failure_message(run: Runner) -> None:
    model = ScriptedChatModel([ConnectionError("down")], cycle=True)
    retry = ModelRetryMiddleware(max_retries=1, on_failure=lambda exc: f"Sorry, the model is unavailable ({exc}).")
    result = run(create_agent(model, middleware=[retry]), {"messages": [HumanMessage("hi")]})
    assert result["messages"][-1].content == "Sorry, the model is unavailable (down)."


# -- Context editing ---------------------------------------------------------------------------------------------
def test_context_editing(run: Runner) -> None:
    steps: list[Any] = [calls("search_tool", query=f"q{i}") for i in range(6)]
    model = ScriptedChatModel([*steps, "done"])
    editing = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=100, keep=3)])
    result = run(create_agent(model, tools=[search_tool], middleware=[editing]), {"messages": [HumanMessage("go")]})
    sent = [m.content for m in model.calls[-1].messages if isinstance(m, ToolMessage)]
    assert sent[:3] == ["[cleared]"] * 3 and sent[3:] == ["results for q3", "results for q4", "results for q5"]
    stored = [m.content for m in result["messages"] if isinstance(m, ToolMessage)]
    assert stored[0] == "results for q0"  # only the model's view is edited


def test_async_and_sync_share_the_retry_settings() -> None:
    # The page's retry settings hold under ainvoke too (no NotImplementedError for the other mode).
    model = ScriptedChatModel([ConnectionError("blip"), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(max_retries=3, jitter=False)])
    assert asyncio.run(agent.ainvoke({"messages": [HumanMessage("hi")]}))["messages"][-1].content == "ok"
