"""Run control in flight (issue 23, item 3): the deadline and cancel cut a model call a hook makes for itself; a
cancel during ``after_agent`` of a finished run is a no-op; under ``ainvoke`` cancelling stops the work behind a
sync-only ``wrap_tool_call`` / ``wrap_model_call``. Each under ``invoke`` and ``ainvoke`` where the mode applies.

Nothing here is timed: a call that was abandoned is seen never to finish (a slow test double counts the calls that
got past their wait), and side effects are read from a ledger.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from pydantic import Field

from middleware_kit import create_agent
from middleware_kit._engine.internal_calls import InternalCallAbandoned, invoke_internal
from middleware_kit.hooks import ModelHandler, ToolHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares.summarization import SummarizationMiddleware
from middleware_kit.run_control import RunControl, RunHandle, current_handle
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.types import AgentState, ModelRequest, ToolCallRequest
from tests.run_control.helpers import Ledger, assert_paired, cfg

pytestmark = pytest.mark.timeout(120)

DEADLINE = 1.0
"""Seconds: deadlines end runs whose slow part waits for the test (released only after the run returned)."""


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class SlowModel(ScriptedChatModel):
    """Every call waits until ``release`` is set (at most ``delay`` seconds; under ainvoke the wait is cancellable).
    ``reached`` is set when a call starts waiting; ``finished`` records the calls that got past their wait (an
    abandoned async call never does)."""

    delay: float = 10.0
    release: threading.Event = Field(default_factory=threading.Event)
    reached: threading.Event = Field(default_factory=threading.Event)
    finished: list[str] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.reached.set()
        self.release.wait(self.delay)
        self.finished.append("sync")
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        self.reached.set()
        await asyncio.to_thread(self.release.wait, self.delay)
        self.finished.append("async")
        return super()._generate(messages, stop, None, **kwargs)

    async def settled(self, expected: list[str]) -> None:
        """Release the waiting calls, then wait (up to 10 s) until ``finished`` is ``expected``; a call that would
        still finish gets 0.3 s more to show up."""
        self.release.set()
        for _ in range(200):
            if self.finished == expected:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        assert self.finished == expected


async def run(agent: Any, mode: str, inp: Any, thread: str = "t") -> list[Any]:
    """One run's ``values`` and ``custom`` chunks (``stream`` in a worker thread, or ``astream``)."""
    modes = ["values", "custom"]
    if mode == "invoke":
        return await asyncio.to_thread(lambda: list(agent.stream(inp, cfg(thread), stream_mode=modes)))
    return [chunk async for chunk in agent.astream(inp, cfg(thread), stream_mode=modes)]


def final(chunks: list[Any]) -> list[BaseMessage]:
    """The messages of a run's last ``values`` chunk."""
    return list([c for kind, c in chunks if kind == "values"][-1]["messages"])


def ends(chunks: list[Any]) -> list[str]:
    return [c["event"] for kind, c in chunks if kind == "custom" and str(c.get("event", "")).startswith("run_")]


async def cancel(agent: Any, mode: str, reached: threading.Event, thread: str = "t") -> bool:
    """Wait until the run reached its slow part, then cancel it (from another thread under invoke)."""
    assert await asyncio.to_thread(reached.wait, 10), "the run never reached its slow part"
    if mode == "invoke":
        return bool(await asyncio.to_thread(agent.cancel, thread))
    return bool(await agent.acancel(thread))


async def state_of(agent: Any, thread: str = "t") -> list[BaseMessage]:
    return list((await agent.aget_state(cfg(thread))).values["messages"])


HISTORY = [HumanMessage("a"), AIMessage("b"), HumanMessage("c"), AIMessage("d"), HumanMessage("e")]


# -- 1. a model call made inside a hook -----------------------------------------------------------------------------
@pytest.mark.parametrize("stop", ["deadline", "cancel"])
async def test_a_summarizer_call_in_flight_is_cut_and_its_summary_dropped(stop: str, mode: str) -> None:
    """The summarizer's call waits until the test releases it, after the run returned: the run did not wait for it.
    Under ainvoke the call was cancelled (it never finishes); under invoke it runs on in a worker thread (Python
    cannot stop it) and its answer is dropped."""
    summarizer = SlowModel(default="SUMMARY")
    summarize = SummarizationMiddleware(model=summarizer, trigger=("messages", 3), keep=("messages", 1))
    control = RunControl(deadline=DEADLINE) if stop == "deadline" else RunControl()
    agent = create_agent(ScriptedChatModel(default="answer"), [], middleware=[summarize],
                         checkpointer=InMemorySaver(), run_control=control)
    running = asyncio.create_task(run(agent, mode, {"messages": HISTORY}))
    if stop == "cancel":
        assert await cancel(agent, mode, summarizer.reached)
    chunks = await running

    assert summarizer.finished == []  # the run returned while the summarizer's call still waited
    assert ends(chunks) == ["run_cancelled" if stop == "cancel" else "run_deadline_exceeded"]
    messages = await state_of(agent)
    assert [m.content for m in messages[:-1]] == [m.content for m in HISTORY]  # no summary: history untouched
    assert messages[-1].response_metadata["run_control"] == ("cancelled" if stop == "cancel" else "deadline")
    await summarizer.settled([] if mode == "ainvoke" else ["sync"])
    assert await state_of(agent) == messages  # what the abandoned call returned reached nothing

    chunks = await run(agent, mode, {"messages": [HumanMessage("next")]})  # the next turn is normal, and summarizes
    assert ends(chunks) == []
    summarized = final(chunks)
    assert str(summarized[0].content).startswith("Here is a summary") and summarized[-1].content == "answer"


class Classifier(AgentMiddleware):
    """A guard whose ``before_model`` asks a model of its own (through ``invoke_internal``) and records the verdict in
    the conversation."""

    def __init__(self, model: SlowModel, ledger: Ledger) -> None:
        super().__init__()
        self.model = model
        self.ledger = ledger

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        verdict = invoke_internal(self.model, [HumanMessage("is this fine?")])
        self.ledger.add(str(verdict.content))
        return {"messages": [AIMessage(f"verdict: {verdict.content}")]}


class WrapClassifier(AgentMiddleware):
    """The same guard in ``wrap_model_call`` (sync-only): it asks its model, then calls the agent's."""

    def __init__(self, model: SlowModel, ledger: Ledger) -> None:
        super().__init__()
        self.model = model
        self.ledger = ledger

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        verdict = invoke_internal(self.model, [HumanMessage("is this fine?")])
        self.ledger.add(str(verdict.content))
        return handler(request)


@pytest.mark.parametrize("hook", ["before_model", "wrap_model_call"])
async def test_a_hooks_own_call_is_not_started_once_the_run_is_stopped_and_its_hook_is_dropped(
    hook: str, mode: str
) -> None:
    """The run is cancelled during the first classifier's call; a second classifier listed after it never calls its
    model, the agent's model is never called, and nothing the classifiers would write reaches state."""
    ledger, first, second = Ledger(), SlowModel(default="fine"), SlowModel(default="fine")
    model = ScriptedChatModel(default="answer")
    kind = Classifier if hook == "before_model" else WrapClassifier
    later = kind(second, ledger)
    later.name = "LaterClassifier"
    agent = create_agent(model, [], checkpointer=InMemorySaver(), run_control=RunControl(on_cancel="raise"),
                         middleware=[kind(first, ledger), later])
    running = asyncio.create_task(run(agent, mode, {"messages": [HumanMessage("hi")]}))
    assert await cancel(agent, mode, first.reached)
    from middleware_kit.run_control import RunCancelledError

    with pytest.raises(RunCancelledError):
        await running
    messages = await state_of(agent)
    assert [m.content for m in messages[:-1]] == ["hi"]  # no verdict written
    assert messages[-1].response_metadata["run_control"] == "cancelled"
    assert ledger.items == [] and second.calls == [] and model.calls == []
    await first.settled(["sync"])  # a sync hook's call runs on in its worker thread; its answer is dropped
    assert ledger.items == [] and await state_of(agent) == messages


async def test_outside_a_controlled_run_invoke_internal_is_a_plain_tagged_call() -> None:
    model = ScriptedChatModel(["one", "two"])
    assert invoke_internal(model, "q").content == "one"
    from middleware_kit._engine.internal_calls import ainvoke_internal, is_internal_call

    assert (await ainvoke_internal(model, "q", {"metadata": {"mine": 1}})).content == "two"
    assert not issubclass(InternalCallAbandoned, Exception)  # as asyncio.CancelledError: `except Exception` passes it
    assert not is_internal_call({"mine": 1})


# -- 2. a cancel during after_agent of a finished run ---------------------------------------------------------------
class Audit(AgentMiddleware):
    """An ``after_agent`` hook that waits for the test, then asks a model of its own and writes its answer."""

    def __init__(self, model: SlowModel, go: threading.Event, reached: threading.Event) -> None:
        super().__init__()
        self.model = model
        self.go = go
        self.reached = reached

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self.reached.set()
        assert self.go.wait(10)
        note = invoke_internal(self.model, [HumanMessage("audit")])
        return {"messages": [AIMessage(f"audit: {note.content}")]}


@pytest.mark.parametrize("stop", ["deadline", "cancel"])
async def test_a_stop_during_after_agent_of_a_finished_run_is_a_no_op(stop: str, mode: str) -> None:
    """The run has its answer; its ``after_agent`` hook is running when the cancel comes (or the deadline passes
    during the hook's own model call). The cancel is reported as a no-op, the raise policies do not fire, and the
    hook's call is not cut: its answer reaches state."""
    go, reached = threading.Event(), threading.Event()
    auditor = SlowModel(default="ok", delay=DEADLINE + 0.5)
    if stop == "cancel":
        auditor.release.set()
    control = RunControl(deadline=DEADLINE, on_deadline="raise") if stop == "deadline" else \
        RunControl(on_cancel="raise")
    agent = create_agent(ScriptedChatModel(default="answer"), [], middleware=[Audit(auditor, go, reached)],
                         checkpointer=InMemorySaver(), run_control=control)
    running = asyncio.create_task(run(agent, mode, {"messages": [HumanMessage("hi")]}))
    if stop == "cancel":
        assert not await cancel(agent, mode, reached)  # reported as a no-op: the run had finished
    go.set()
    chunks = await running  # no RunCancelledError / RunDeadlineExceededError: the result stands

    assert ends(chunks) == []
    messages = await state_of(agent)
    assert [m.content for m in messages] == ["hi", "answer", "audit: ok"]  # the audit's own call was not cut
    assert auditor.finished == ["sync"]


# -- 3. the work behind a sync-only wrapper under ainvoke -----------------------------------------------------------
def work_tool(ledger: Ledger, reached: threading.Event, release: threading.Event) -> BaseTool:
    """``work``: waits until ``release`` is set (under ainvoke the wait is cancellable), then records its side
    effect."""

    def work(job: str) -> str:
        reached.set()
        release.wait(10)
        ledger.add(job)
        return f"worked {job}"

    async def awork(job: str) -> str:
        reached.set()
        await asyncio.to_thread(release.wait, 10)
        ledger.add(job)
        return f"worked {job}"

    return StructuredTool.from_function(work, coroutine=awork, name="work", description="Do the job.")


def calls_work(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(f"done: {messages[-1].content}")
    return AIMessage("", tool_calls=[tool_call("work", {"job": "pay"}, id="call_1")])


class SyncOnlyToolWrapper(AgentMiddleware):
    """A sync-only ``wrap_tool_call`` (a rate limiter, say): under ainvoke it runs in a worker thread. It waits for
    ``go`` before calling the tool (when given), records the run handle it sees, and returns a result of its own
    when the tool call fails."""

    def __init__(self, go: threading.Event | None, seen: list[Any], done: threading.Event) -> None:
        super().__init__()
        self.go = go
        self.seen = seen
        self.done = done
        self.entered = threading.Event()

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        self.seen.append((threading.current_thread(), current_handle()))
        self.entered.set()
        try:
            if self.go is not None:
                assert self.go.wait(10)
            try:
                return handler(request)
            except BaseException:  # what the thread makes after the cancel must not reach state
                return ToolMessage("made by the thread after the cancel", tool_call_id=request.tool_call["id"])
        finally:
            self.done.set()


@pytest.mark.parametrize(("mode", "when"), [
    ("ainvoke", "before_the_guard"), ("ainvoke", "during_the_tool"), ("invoke", "before_the_guard"),
])
async def test_cancel_stops_the_tool_behind_a_sync_only_wrap_tool_call(mode: str, when: str) -> None:
    """``before_the_guard``: the cancel comes while the wrapper waits in its worker thread, before it calls the tool;
    ``during_the_tool``: while the (async) tool runs behind it (under invoke a running sync tool cannot be cut). Either
    way the tool's side effect never happens, the run handle was visible in the thread, and what the thread returns
    after the cancel is dropped."""
    ledger, reached, release, done = Ledger(), threading.Event(), threading.Event(), threading.Event()
    seen: list[Any] = []
    go = threading.Event() if when == "before_the_guard" else None
    wrapper = SyncOnlyToolWrapper(go, seen, done)
    agent: Any = create_agent(ScriptedChatModel(default=calls_work), [work_tool(ledger, reached, release)],
                              middleware=[wrapper], checkpointer=InMemorySaver(), run_control=RunControl())
    running = asyncio.create_task(run(agent, mode, {"messages": [HumanMessage("go")]}))
    if go is not None:
        assert await cancel(agent, mode, wrapper.entered)  # the wrapper is waiting in its worker thread
        go.set()
    else:
        assert await cancel(agent, mode, reached)
    returned = final(await running)
    assert await asyncio.to_thread(done.wait, 10)  # the wrapper's thread has finished
    release.set()
    await asyncio.sleep(0.3)  # a tool left running would record its side effect now

    assert ledger.items == [] and not (when == "before_the_guard" and reached.is_set())
    [(thread, handle)] = seen
    assert thread is not threading.main_thread() and isinstance(handle, RunHandle)  # the handle reached the thread
    messages = await state_of(agent)
    assert messages == returned
    assert_paired(messages)
    [answer] = [m for m in messages if isinstance(m, ToolMessage)]
    # Not what the thread made after the cancel: the call is answered as stopped (the outer layer cannot know how
    # far the work behind the wrapper got, so it does not claim that nothing ran; the ledger above proves it here).
    expected = "was not executed" if mode == "invoke" else "was stopped while it ran"  # the guard / the outer layer
    assert answer.status == "error" and expected in str(answer.content)
    assert messages[-1].response_metadata["run_control"] == "cancelled"


class SyncOnlyModelWrapper(AgentMiddleware):
    """A sync-only ``wrap_model_call``: under ainvoke it runs in a worker thread."""

    def __init__(self, done: threading.Event) -> None:
        super().__init__()
        self.done = done

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        try:
            return handler(request)
        finally:
            self.done.set()


async def test_cancel_stops_the_model_call_behind_a_sync_only_wrap_model_call() -> None:
    model, done = SlowModel(default="answer"), threading.Event()
    agent = create_agent(model, [], middleware=[SyncOnlyModelWrapper(done)], checkpointer=InMemorySaver(),
                         run_control=RunControl())
    running = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("go")]}, cfg("t")))
    assert await cancel(agent, "ainvoke", model.reached)
    out = await running
    assert await asyncio.to_thread(done.wait, 10)  # the wrapper's thread has finished
    await model.settled([])  # the model call was cancelled, not left to complete
    assert out["messages"][-1].response_metadata["run_control"] == "cancelled"
    assert [m.content for m in await state_of(agent)] == ["go", out["messages"][-1].content]
