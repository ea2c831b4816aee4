"""Middleware model calls paid once, in one process, on InMemorySaver and SQLite, under invoke and ainvoke: each
bundled middleware's own model call (summarizer, tool selector, auto mode's classifier, tool emulator) is recorded
with its step, and a replay of the step after a crash is given the recorded answer instead of calling the model
again; ``ledger=False`` calls again; the next turn, a changed input and a second call of one hook are asked anew.

A crash is a ``Crash`` (a ``BaseException``) raised where the process would die, after the middleware's call and
before the step is saved; ``tests/ledger/test_crash_matrix.py`` kills real worker processes (SIGKILL) inside and
after a middleware's model call, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command, interrupt

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit._engine.internal_calls import ainvoke_internal, invoke_internal
from middleware_kit.ledger import ledger_store
from middleware_kit.middlewares.auto_mode import AutoModeMiddleware
from middleware_kit.middlewares.llm_tool_emulator import LLMToolEmulator
from middleware_kit.middlewares.llm_tool_selector import SELECT_TOOLS_NAME, LLMToolSelectorMiddleware
from middleware_kit.middlewares.summarization import SummarizationMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.run_control.helpers import call, cfg


class Crash(BaseException):
    """Where the process would die (not an ``Exception``: nothing handles it on the way out)."""


class CrashAfter(AgentMiddleware):
    """Outermost: the model call (or each tool call named in ``tool_calls``) completes, then the run dies, once."""

    def __init__(self, *, model: bool = False, tool_calls: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.armed = {"model"} if model else set(tool_calls)

    def _after(self, what: str) -> None:
        if what in self.armed:
            self.armed.discard(what)
            raise Crash(what)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        response = handler(request)
        self._after("model")
        return response

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        response = await handler(request)
        self._after("model")
        return response

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        result = handler(request)
        self._after(str(request.tool_call["id"]))
        return result

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        result = await handler(request)
        self._after(str(request.tool_call["id"]))
        return result


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def search_web(query: str) -> str:
    """Search the web."""
    return "results"


@tool
def pay(ref: str) -> str:
    """Pay."""
    raise AssertionError("emulated, never run")


def history(text: str) -> dict[str, Any]:
    """A turn long enough to be summarized (three messages; the summarizer keeps the last)."""
    return {"messages": [HumanMessage("earlier question"), AIMessage("earlier answer"), HumanMessage(text)]}


def summarizer() -> ScriptedChatModel:
    return ScriptedChatModel(["summary one", "summary two", "summary three"])


def selector() -> ScriptedChatModel:
    answer = AIMessage("", tool_calls=[tool_call(SELECT_TOOLS_NAME, {"tools": ["get_weather"]})])
    return ScriptedChatModel([answer], cycle=True)


def summarizing_agent(saver: Any, summary: ScriptedChatModel, select: ScriptedChatModel, *extra: AgentMiddleware,
                      **kwargs: Any) -> Any:
    return create_agent(
        ScriptedChatModel(["the answer"], cycle=True), [get_weather, search_web], checkpointer=saver,
        middleware=[*extra, SummarizationMiddleware(summary, trigger=("messages", 3), keep=("messages", 1)),
                    LLMToolSelectorMiddleware(model=select, max_tools=1)],
        **kwargs,
    )


async def crashed(agent: Any, mode: str, inp: Any, thread: str) -> None:
    with pytest.raises(Crash):
        await call(agent, mode, inp, cfg(thread), durability="sync")


def summary_of(messages: list[BaseMessage]) -> str:
    return str(messages[0].content).rsplit("\n", 1)[-1]


async def sites(saver: Any, thread: str) -> list[tuple[str, int, str]]:
    store = ledger_store(saver)
    return sorted((key.site, key.ordinal, store.serde.loads_typed(answer.answer).text)
                  for key, answer in await store.aanswers(thread))


# -- paid once across a crash --------------------------------------------------------------------------------------
async def test_a_summary_and_a_tool_selection_are_paid_once_across_a_crash(saver: Any, mode: str) -> None:
    summary, select = summarizer(), selector()
    agent = summarizing_agent(saver, summary, select, CrashAfter(model=True))
    await crashed(agent, mode, history("weather in Paris?"), "t")
    assert (summary.call_count, select.call_count) == (1, 1)
    assert await sites(saver, "t") == [
        ("LLMToolSelectorMiddleware.wrap_model_call", 0, ""),
        ("SummarizationMiddleware.before_model", 0, "summary one"),
    ]
    out = await call(agent, mode, None, cfg("t"))  # the step run again: the recorded answers, no new calls
    assert (summary.call_count, select.call_count) == (1, 1)
    assert summary_of(out["messages"]) == "summary one"
    assert [m.content for m in out["messages"][1:]] == ["weather in Paris?", "the answer"]


async def test_with_the_ledger_off_the_replay_calls_the_models_again(saver: Any, mode: str) -> None:
    summary, select = summarizer(), selector()
    agent = summarizing_agent(saver, summary, select, CrashAfter(model=True), ledger=False)
    await crashed(agent, mode, history("weather in Paris?"), "t")
    out = await call(agent, mode, None, cfg("t"))
    assert (summary.call_count, select.call_count) == (2, 2), "needs create_agent(ledger=False) to set LEDGER_OFF"
    assert summary_of(out["messages"]) == "summary two"
    assert await sites(saver, "t") == []


async def test_the_next_turn_is_not_given_an_old_answer(saver: Any, mode: str) -> None:
    summary, select = summarizer(), selector()
    agent = summarizing_agent(saver, summary, select)
    first = await call(agent, mode, history("weather in Paris?"), cfg("t"))
    assert summary_of(first["messages"]) == "summary one"
    second = await call(agent, mode, {"messages": [HumanMessage("and in Rome?")]}, cfg("t"))
    assert (summary.call_count, select.call_count) == (2, 2)
    assert summary_of(second["messages"]) == "summary two"
    recorded = await sites(saver, "t")
    assert [s for s in recorded if s[0].startswith("Summarization")] == [
        ("SummarizationMiddleware.before_model", 0, "summary one"),
        ("SummarizationMiddleware.before_model", 0, "summary two"),
    ]  # the same site and ordinal, in two steps: two records


async def test_a_classification_and_an_emulation_are_paid_once_across_a_crash(saver: Any, mode: str) -> None:
    classifier = ScriptedChatModel(["0.1"], cycle=True)
    emulator = ScriptedChatModel(["emulated: paid a"], cycle=True)
    turn = AIMessage("", tool_calls=[tool_call("pay", {"ref": "a"}, id="c-pay")])
    agent = create_agent(  # the call is classified (allowed), then emulated; the worker dies before the step is saved
        ScriptedChatModel([turn], default=lambda ms: "done"), [pay], checkpointer=saver,
        middleware=[CrashAfter(tool_calls=("c-pay",)), AutoModeMiddleware(["pay"], classifier=classifier),
                    LLMToolEmulator(tools=["pay"], model=emulator)],
    )
    await crashed(agent, mode, {"messages": [HumanMessage("pay a")]}, "t")
    out = await call(agent, mode, None, cfg("t"))
    assert (classifier.call_count, emulator.call_count) == (1, 1)
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["emulated: paid a"]
    assert [s[:2] for s in await sites(saver, "t")] == [
        ("AutoModeMiddleware.wrap_tool_call", 0), ("LLMToolEmulator.wrap_tool_call", 0)]


async def test_a_classification_is_not_paid_again_when_its_tool_call_is_resumed(saver: Any, mode: str) -> None:
    @tool
    def confirmed_pay(ref: str) -> str:
        """Pay, once a person confirms."""
        return f"paid {ref}: {interrupt('confirm?')}"

    classifier = ScriptedChatModel(["0.1"], cycle=True)
    turn = AIMessage("", tool_calls=[tool_call("confirmed_pay", {"ref": "a"}, id="c-pay")])
    agent = create_agent(ScriptedChatModel([turn], default=lambda ms: "done"), [confirmed_pay], checkpointer=saver,
                         middleware=[AutoModeMiddleware(["confirmed_pay"], classifier=classifier)])
    paused = await call(agent, mode, {"messages": [HumanMessage("pay a")]}, cfg("t"))
    assert paused["__interrupt__"][0].value == "confirm?"
    out = await call(agent, mode, Command(resume="yes"), cfg("t"))  # the tool task run again, in this process
    assert classifier.call_count == 1
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["paid a: yes"]


# -- the key: site, ordinal, input ---------------------------------------------------------------------------------
class Asker(AgentMiddleware):
    """A middleware of one's own asking ``model`` ``times`` times per step (the same question), through
    ``invoke_internal``; what it was told goes to ``heard``."""

    def __init__(self, model: ScriptedChatModel, prompt: dict[str, str], heard: list[list[str]], times: int = 1):
        super().__init__()
        self.model, self.prompt, self.heard, self.times = model, prompt, heard, times

    def _question(self) -> list[BaseMessage]:
        return [HumanMessage(self.prompt["text"])]

    def before_model(self, state: Any, runtime: Any) -> None:
        self.heard.append([invoke_internal(self.model, self._question(), site="Asker.before_model").text
                           for _ in range(self.times)])

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self.heard.append([(await ainvoke_internal(self.model, self._question(), site="Asker.before_model")).text
                           for _ in range(self.times)])


async def test_two_calls_of_one_hook_are_two_records_given_back_in_order(saver: Any, mode: str) -> None:
    asked, heard = ScriptedChatModel(["one", "two", "three"]), list[list[str]]()
    agent = create_agent(ScriptedChatModel(["the answer"], cycle=True), checkpointer=saver,
                         middleware=[CrashAfter(model=True), Asker(asked, {"text": "same"}, heard, times=2)])
    await crashed(agent, mode, {"messages": [HumanMessage("go")]}, "t")
    await call(agent, mode, None, cfg("t"))
    assert asked.call_count == 2
    assert heard == [["one", "two"], ["one", "two"]]
    assert await sites(saver, "t") == [("Asker.before_model", 0, "one"), ("Asker.before_model", 1, "two")]


async def test_a_replay_that_asks_something_else_is_not_given_the_old_answer(saver: Any, mode: str) -> None:
    asked, heard, prompt = ScriptedChatModel(["old answer", "new answer"]), list[list[str]](), {"text": "version 1"}
    agent = create_agent(ScriptedChatModel(["the answer"], cycle=True), checkpointer=saver,
                         middleware=[CrashAfter(model=True), Asker(asked, prompt, heard)])
    await crashed(agent, mode, {"messages": [HumanMessage("go")]}, "t")
    prompt["text"] = "version 2"  # a new deployment asks differently
    await call(agent, mode, None, cfg("t"))
    assert asked.call_count == 2 and heard == [["old answer"], ["new answer"]]
    assert await sites(saver, "t") == [("Asker.before_model", 0, "new answer")]  # replaced


async def test_without_a_checkpointer_nothing_is_recorded_and_each_run_asks(mode: str) -> None:
    asked, heard = ScriptedChatModel(["one", "two"]), list[list[str]]()
    agent = create_agent(ScriptedChatModel(["the answer"], cycle=True),
                         middleware=[Asker(asked, {"text": "same"}, heard)])
    for _ in range(2):
        await call(agent, mode, {"messages": [HumanMessage("go")]}, cfg("t"))
    assert heard == [["one"], ["two"]]
