"""ModerationMiddleware and OpenAIModerationMiddleware: input, output and tool results, LangChain's exit behaviours."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field

from middleware_kit import create_agent
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.moderation import (
    KeywordModerationChecker,
    ModerationError,
    ModerationMiddleware,
    ModerationResult,
    OpenAIModerationError,
    OpenAIModerationMiddleware,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

CHECKER = KeywordModerationChecker({"violence": ["attack"], "weapons": ["bomb"]})


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"result: how to build a bomb ({query})" if "bad" in query else f"result: {query}"


def test_flagged_input_ends_the_run_before_the_model(run: Runner) -> None:
    model = ScriptedChatModel(["never"])
    agent = create_agent(model, middleware=[ModerationMiddleware(CHECKER)])
    result = run(agent, {"messages": [HumanMessage("plan an ATTACK now")]})
    assert model.calls == []
    assert result["messages"][-1].content == (
        "I'm sorry, but I can't comply with that request. It was flagged for violence."
    )
    assert isinstance(result["messages"][-1], AIMessage)


def test_clean_traffic_passes_untouched(run: Runner) -> None:
    model = ScriptedChatModel(["an attacker? no: attackers is a different word"])
    agent = create_agent(model, middleware=[ModerationMiddleware(CHECKER)])
    result = run(agent, {"messages": [HumanMessage("hello")]})
    assert result["messages"][-1].content.startswith("an attacker?")  # whole words only


def test_flagged_output_is_replaced_and_its_tool_calls_never_run(run: Runner) -> None:
    calls: list[str] = []

    @tool
    def launch(target: str) -> str:
        """Launch."""
        calls.append(target)
        return "launched"

    model = ScriptedChatModel([AIMessage("I will attack", id="m1", tool_calls=[tool_call("launch", {"target": "x"})])])
    agent = create_agent(model, [launch], middleware=[ModerationMiddleware(CHECKER, check_input=False)])
    result = run(agent, {"messages": [HumanMessage("go")]})
    last = result["messages"][-1]
    assert calls == [] and last.id == "m1" and not last.tool_calls
    assert "flagged for violence" in last.content and "attack" not in last.content.replace("flagged", "")
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]


def test_replace_keeps_the_run_going(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("lookup", {"query": "bad"})]), "summary"])
    mw = ModerationMiddleware(CHECKER, check_input=True, check_tool_results=True, exit_behavior="replace",
                              violation_message="[removed: {categories}]")
    result = run(create_agent(model, [lookup], middleware=[mw]), {"messages": [HumanMessage("attack plan")]})
    human, _, tool_message, answer = result["messages"]
    assert human.content == "[removed: violence]"
    assert isinstance(tool_message, ToolMessage) and tool_message.content == "[removed: weapons]"
    assert model.calls[0].messages[0].content == "[removed: violence]"
    assert model.calls[1].messages[-1].content == "[removed: weapons]"
    assert answer.content == "summary"


def test_error_raises_and_leaves_the_thread_usable(run: Runner) -> None:
    model = ScriptedChatModel(["fine"])
    mw = ModerationMiddleware(CHECKER, exit_behavior="error",
                              violation_message="{categories}|{category_scores}|{original_content}")
    agent = create_agent(model, middleware=[mw], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ModerationError) as caught:
        run(agent, {"messages": [HumanMessage("bomb attack")]}, config=config)
    error = caught.value
    assert (error.stage, error.content, error.hook) == ("input", "bomb attack", "before_model")
    assert error.result.categories == ("violence", "weapons")
    assert error.violation_message == 'violence, weapons|{"violence": 1.0, "weapons": 1.0}|bomb attack'
    assert str(error).startswith("ModerationMiddleware flagged the user input for violence, weapons")
    assert run(agent, {"messages": [HumanMessage("hello")]}, config=config)["messages"][-1].content == "fine"


def test_only_the_newest_user_message_and_latest_tool_results_are_checked(run: Runner) -> None:
    model = ScriptedChatModel(["ok"])
    mw = ModerationMiddleware(CHECKER, check_tool_results=True)
    history = [HumanMessage("attack!"), AIMessage("", tool_calls=[tool_call("lookup", {"query": "q"}, id="old")]),
               ToolMessage("bomb", tool_call_id="old"), AIMessage("noted"), HumanMessage("thanks")]
    result = run(create_agent(model, [lookup], middleware=[mw]), {"messages": history})
    assert result["messages"][-1].content == "ok"


class AsyncChecker:
    def __init__(self) -> None:
        self.modes: list[str] = []

    def check(self, text: str) -> ModerationResult:
        self.modes.append("sync")
        return ModerationResult(flagged="spam" in text, categories=("spam",) if "spam" in text else ())

    async def acheck(self, text: str) -> ModerationResult:
        self.modes.append("async")
        await asyncio.sleep(0)
        return self.check(text)


def test_async_checker_is_awaited_under_ainvoke(mode: str, run: Runner) -> None:
    checker = AsyncChecker()
    run(create_agent(ScriptedChatModel(["fine"]), middleware=[ModerationMiddleware(checker)]),
        {"messages": [HumanMessage("spam spam")]})
    assert checker.modes == (["sync"] if mode == "invoke" else ["async", "sync"])


# -- OpenAI, with the SDK's response shapes (no network) -------------------------------------------------------------
class _Categories(BaseModel):
    harassment: bool = False
    self_harm: bool = Field(False, alias="self-harm")
    violence: bool = False


class _Scores(BaseModel):
    harassment: float = 0.0
    self_harm: float = Field(0.0, alias="self-harm")
    violence: float = 0.0


class _Result(BaseModel):
    flagged: bool
    categories: _Categories
    category_scores: _Scores


class _Response(BaseModel):
    id: str = "modr-1"
    model: str
    results: list[_Result]


class FakeModerations:
    def __init__(self, flagged_words: dict[str, str]) -> None:
        self.flagged_words = flagged_words
        self.requests: list[dict[str, Any]] = []

    def create(self, *, model: str, input: str) -> _Response:
        self.requests.append({"model": model, "input": input})
        hit = {cat: True for word, cat in self.flagged_words.items() if word in input}
        categories = _Categories.model_validate(hit)
        scores = _Scores.model_validate(dict.fromkeys(hit, 0.9))
        return _Response(model=model, results=[_Result(flagged=bool(hit), categories=categories,
                                                       category_scores=scores)])


class FakeClient:
    def __init__(self, words: dict[str, str]) -> None:
        self.moderations = FakeModerations(words)


class FakeAsyncModerations(FakeModerations):
    async def create(self, *, model: str, input: str) -> _Response:  # type: ignore[override]
        return FakeModerations.create(self, model=model, input=input)


class FakeAsyncClient:
    def __init__(self, words: dict[str, str]) -> None:
        self.moderations = FakeAsyncModerations(words)


def test_openai_middleware_with_sdk_shapes(mode: str, run: Runner) -> None:
    client, aclient = FakeClient({"hurt": "self-harm"}), FakeAsyncClient({"hurt": "self-harm"})
    mw = OpenAIModerationMiddleware(model="omni-moderation-2024-09-26", client=client, async_client=aclient)
    result = run(create_agent(ScriptedChatModel(["never"]), middleware=[mw]), {"messages": [HumanMessage("hurt")]})
    assert result["messages"][-1].content.endswith("It was flagged for self-harm.")
    used = client.moderations if mode == "invoke" else aclient.moderations
    assert used.requests == [{"model": "omni-moderation-2024-09-26", "input": "hurt"}]


def test_openai_error_class(run: Runner) -> None:
    mw = OpenAIModerationMiddleware(exit_behavior="error", client=FakeClient({"x": "violence"}),
                                    async_client=FakeAsyncClient({"x": "violence"}))
    with pytest.raises(OpenAIModerationError) as caught:
        run(create_agent(ScriptedChatModel(["x marks"]), middleware=[mw]), {"messages": [HumanMessage("ok")]})
    assert caught.value.stage == "output" and caught.value.result.category_scores["violence"] == 0.9
    assert isinstance(caught.value, ModerationError)


def test_missing_openai_extra_names_the_extra(run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # import openai -> ImportError
    mw = OpenAIModerationMiddleware()  # constructing never imports the SDK
    with pytest.raises(MiddlewareConfigError) as caught:
        run(create_agent(ScriptedChatModel(["x"]), middleware=[mw]), {"messages": [HumanMessage("hi")]})
    assert "pip install 'middleware_kit[openai]'" in str(caught.value)


def test_events_on_the_custom_stream() -> None:
    agent = create_agent(ScriptedChatModel(["x"]), middleware=[ModerationMiddleware(CHECKER)])
    events = list(agent.stream({"messages": [HumanMessage("attack")]}, stream_mode="custom"))
    assert events == [{"event": "moderation_flagged", "middleware": "ModerationMiddleware", "hook": "before_model",
                       "stage": "input", "categories": ["violence"], "exit_behavior": "end"}]


def test_frozen_configuration(run: Runner) -> None:
    mw = ModerationMiddleware(CHECKER)
    changed = mw.replace(exit_behavior="error")
    agent = create_agent(ScriptedChatModel(["x"]), middleware=[changed])
    with pytest.raises(FrozenMiddlewareError):  # read-only once an agent adopts it
        changed.exit_behavior = "end"
    with pytest.raises(ModerationError):
        run(agent, {"messages": [HumanMessage("attack")]})
    mw.exit_behavior = "error"  # before adoption, as in LangChain
    assert mw.exit_behavior == "error"
    words = ["spam"]
    checker = KeywordModerationChecker(words)
    words.append("hello")
    assert not checker.check("hello").flagged


@pytest.mark.parametrize(
    ("build", "owner", "param"),
    [
        (lambda: ModerationMiddleware(object()), "ModerationMiddleware", "checker"),  # type: ignore[arg-type]
        (lambda: ModerationMiddleware(CHECKER, exit_behavior="stop"), "ModerationMiddleware", "exit_behavior"),  # type: ignore[arg-type]
        (lambda: ModerationMiddleware(CHECKER, violation_message="{nope}"), "ModerationMiddleware",
         "violation_message"),
        (lambda: OpenAIModerationMiddleware(exit_behavior="halt"), "OpenAIModerationMiddleware", "exit_behavior"),  # type: ignore[arg-type]
        (lambda: OpenAIModerationMiddleware(model=""), "OpenAIModerationChecker", "model"),
        (lambda: KeywordModerationChecker({"x": [""]}), "KeywordModerationChecker", "categories"),
    ],
)
def test_constructor_errors_name_class_and_parameter(build: Any, owner: str, param: str) -> None:
    with pytest.raises(MiddlewareConfigError) as caught:
        build()
    assert (caught.value.middleware, caught.value.hook) == (owner, param)
    assert str(caught.value).startswith(owner)


# -- one instance, concurrent runs (threads and asyncio at once) ---------------------------------------------------
def test_one_instance_moderates_concurrent_runs_in_isolation() -> None:
    from concurrent.futures import ThreadPoolExecutor

    mw = ModerationMiddleware(CHECKER)
    model = ScriptedChatModel([lambda messages: f"answer to {messages[-1].content}"], cycle=True)
    agent = create_agent(model, middleware=[mw])

    def text(i: int) -> str:
        return f"attack plan {i}" if i % 3 == 0 else f"hello {i}"

    def expected(i: int) -> str:
        if i % 3 == 0:
            return "I'm sorry, but I can't comply with that request. It was flagged for violence."
        return f"answer to hello {i}"

    async def many(ids: list[int]) -> list[Any]:
        return list(await asyncio.gather(*(agent.ainvoke({"messages": [HumanMessage(text(i))]}) for i in ids)))

    with ThreadPoolExecutor(4) as pool:
        threaded = {i: pool.submit(agent.invoke, {"messages": [HumanMessage(text(i))]}) for i in range(0, 24, 2)}
        gathered = dict(zip(range(1, 24, 2), asyncio.run(many(list(range(1, 24, 2)))), strict=True))
        results = {i: f.result() for i, f in threaded.items()} | gathered
    for i, result in results.items():
        assert result["messages"][-1].content == expected(i), i
        assert len(result["messages"]) == 2
