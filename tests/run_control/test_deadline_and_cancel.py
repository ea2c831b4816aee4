"""Deadlines and cancellation during a slow model call, a slow tool, a sync-only wrapper and a retry backoff, under
``invoke`` and ``ainvoke``; each followed by a normal turn on the same thread whose history has no dangling call."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit.hooks import ToolHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.run_control import RunCancelledError, RunControl, RunDeadlineExceededError
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.types import ToolCallRequest
from tests.run_control.helpers import APPROVE, Ledger, assert_paired, build, cfg, saver_for

pytestmark = pytest.mark.timeout(120)

SLOW = 2.4
"""Seconds the slow part takes. Deadlines are 1.0 s; cancels come once the run reached its slow part. A run
reaches its slow part in under 0.1 s on a quiet machine; the margin is for CI workers under load (0.6 s was once
not enough there)."""
DEADLINE = 1.0
REACHED = threading.Event()
"""Set when a run reaches its slow part (tests run one at a time; each clears it first)."""


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Model(ScriptedChatModel):
    """``model`` in the last user turn: a slow answer; ``tool``/``wrapped``: calls ``work``; ``flaky``: fails once
    per turn, then answers; anything else: a quick answer. After a tool result: ``done: ...``."""

    failed: set[str] = set()  # noqa: RUF012 (per instance: replaced in __init__)

    def __init__(self) -> None:
        super().__init__(default=self._reply)
        self.failed = set()

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(f"done: {messages[-1].content}")
        text = str([m for m in messages if isinstance(m, HumanMessage)][-1].content)
        if text.startswith(("tool", "wrapped")):
            return AIMessage("", tool_calls=[tool_call("work", {"job": text}, id=f"call_{len(messages)}")])
        if text.startswith("flaky") and text not in self.failed:
            self.failed.add(text)
            REACHED.set()
            raise ConnectionError("provider hiccup")
        return AIMessage(f"answer: {text}")

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> Any:
        if self._slow(messages):
            REACHED.set()
            time.sleep(SLOW)
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> Any:
        if self._slow(messages):
            REACHED.set()
            await asyncio.sleep(SLOW)
        return super()._generate(messages, stop, None, **kwargs)

    @staticmethod
    def _slow(messages: list[BaseMessage]) -> bool:
        return not isinstance(messages[-1], ToolMessage) and str(messages[-1].content).startswith("model")


def work_tool(ledger: Ledger) -> BaseTool:
    """``work``: slow for ``tool`` jobs (``asyncio.sleep`` under ainvoke: cancellable), instant otherwise."""

    def work(job: str) -> str:
        if job.startswith("tool"):
            REACHED.set()
            time.sleep(SLOW)
        ledger.add(job)
        return f"worked {job}"

    async def awork(job: str) -> str:
        if job.startswith("tool"):
            REACHED.set()
            await asyncio.sleep(SLOW)
        ledger.add(job)
        return f"worked {job}"

    return StructuredTool.from_function(work, coroutine=awork, name="work", description="Do the job.")


class SlowSyncWrapper(AgentMiddleware):
    """A sync-only tool wrapper that waits (a rate limiter, say) before calling the tool."""

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        if str(request.tool_call["args"].get("job", "")).startswith("wrapped"):
            REACHED.set()
            time.sleep(SLOW)
        return handler(request)


def agent_for(control: RunControl, ledger: Ledger, model: Model, saver: Any, *, wrapped: bool = False) -> Any:
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=SLOW, jitter=False, retry_on=(ConnectionError,))
    stack: list[Any] = [retry, SlowSyncWrapper()] if wrapped else [retry]
    return build(saver, control, tools=[work_tool(ledger)], model=model, middleware=stack, review=False)


async def run_collecting(agent: Any, mode: str, inp: Any, config: Any) -> list[Any]:
    """The custom events of one run (``stream`` in a worker thread, or ``astream``)."""
    if mode == "invoke":
        return await asyncio.to_thread(lambda: list(agent.stream(inp, config, stream_mode="custom")))
    return [chunk async for chunk in agent.astream(inp, config, stream_mode="custom")]


async def state_of(agent: Any, mode: str, thread: str) -> Any:
    if mode == "invoke":
        return await asyncio.to_thread(agent.get_state, cfg(thread))
    return await agent.aget_state(cfg(thread))


SCENARIOS = ["model", "tool", "wrapped", "flaky"]


@pytest.mark.parametrize("where", SCENARIOS)
@pytest.mark.parametrize("stop", ["deadline", "cancel"])
async def test_stopping_a_run_mid_flight_leaves_a_consistent_thread(
    where: str, stop: str, mode: str, tmp_path: Path
) -> None:
    ledger, model = Ledger(), Model()
    control = RunControl(deadline=DEADLINE) if stop == "deadline" else RunControl()
    agent = agent_for(control, ledger, model, InMemorySaver(), wrapped=where == "wrapped")
    REACHED.clear()
    started = time.monotonic()
    run = asyncio.create_task(run_collecting(agent, mode, {"messages": [HumanMessage(f"{where} job")]}, cfg("t")))
    if stop == "cancel":
        assert await asyncio.to_thread(REACHED.wait, 10)
        if mode == "invoke":
            assert await asyncio.to_thread(agent.cancel, "t")  # from another thread
        else:
            assert await agent.acancel("t")  # from another task
    events = await run
    took = time.monotonic() - started

    kind = "run_cancelled" if stop == "cancel" else "run_deadline_exceeded"
    assert [e["event"] for e in events if isinstance(e, dict) and e.get("event", "").startswith("run_")] == [kind]
    state = await state_of(agent, mode, "t")
    messages = state.values["messages"]
    assert_paired(messages)
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.response_metadata["run_control"] == ("cancelled" if stop == "cancel" else "deadline")
    if where in ("tool", "wrapped"):
        assert REACHED.is_set(), f"{where}: the deadline came before the run reached its slow part"
        [answer] = [m for m in messages if isinstance(m, ToolMessage)]
        if where == "tool" and mode == "invoke":  # a sync tool cannot be stopped: it ran, its real answer stands
            assert answer.status == "success" and answer.content == "worked tool job"
        elif mode == "ainvoke":  # abandoned while it ran: the model is not told it did not run
            assert answer.status == "error" and "was stopped while it ran" in str(answer.content)
        else:  # the guard stopped it before the tool was called
            assert answer.status == "error" and "was not executed" in str(answer.content)
    if where == "wrapped" or (where == "tool" and mode == "ainvoke"):
        await asyncio.sleep(SLOW)  # let abandoned work reach its next check
        assert ledger.items == []  # the tool never ran (or was cancelled before its side effect)
    if where == "flaky":
        assert model.call_count == 1  # the retry after the backoff never reached the model
    if mode == "ainvoke":
        assert took < SLOW, f"{where}: the run took {took:.2f}s; the call in flight should have been abandoned"

    # the next turn on the same thread is normal
    if mode == "invoke":
        out = await asyncio.to_thread(agent.invoke, {"messages": [HumanMessage("hello")]}, cfg("t"))
    else:
        out = await agent.ainvoke({"messages": [HumanMessage("hello")]}, cfg("t"))
    assert out["messages"][-1].content == "answer: hello"
    assert_paired(out["messages"])


@pytest.mark.parametrize("stop", ["deadline", "cancel"])
async def test_raise_policies_close_the_thread_then_raise(stop: str, mode: str) -> None:
    ledger, model = Ledger(), Model()
    control = RunControl(deadline=DEADLINE, on_deadline="raise") if stop == "deadline" else \
        RunControl(on_cancel="raise")
    agent = agent_for(control, ledger, model, InMemorySaver())
    expected = RunDeadlineExceededError if stop == "deadline" else RunCancelledError
    REACHED.clear()
    run = asyncio.create_task(run_collecting(agent, mode, {"messages": [HumanMessage("tool job")]}, cfg("t")))
    if stop == "cancel":
        assert await asyncio.to_thread(REACHED.wait, 10)
        assert agent.cancel("t", reason="user pressed stop")
    with pytest.raises(expected) as info:
        await run
    assert info.value.thread_id == "t" and "every open tool call was answered" in str(info.value)
    if stop == "cancel":
        assert "user pressed stop" in str(info.value)
    assert_paired((await state_of(agent, mode, "t")).values["messages"])
    if mode == "invoke":
        out = await asyncio.to_thread(agent.invoke, {"messages": [HumanMessage("hi")]}, cfg("t"))
    else:
        out = await agent.ainvoke({"messages": [HumanMessage("hi")]}, cfg("t"))
    assert out["messages"][-1].content == "answer: hi"


async def test_time_waiting_for_a_human_does_not_count(mode: str, tmp_path: Path) -> None:
    """Deadline SLOW + 0.8 s. Slice 1: a SLOW model call, then a pause for review; the human takes 2 s; slice 2:
    the approved tool takes SLOW. Had the wait counted (SLOW + 2 s), the resume would stop before the tool starts;
    had the slices not added up, slice 2 (SLOW) would finish. The tool starts, and the run ends at the deadline."""
    from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware

    ledger, model = Ledger(), Model()

    def reply(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("all done")
        return AIMessage("", tool_calls=[tool_call("work", {"job": "tool approved"}, id="call_1")])

    model.default = reply
    async with saver_for("memory", mode, tmp_path) as saver:
        agent = build(saver, RunControl(deadline=SLOW + 0.8), tools=[work_tool(ledger)], model=model,
                      middleware=[HumanInTheLoopMiddleware({"work": True})], review=False)
        paused = await run_collecting(agent, mode, {"messages": [HumanMessage("model please")]}, cfg("t"))
        assert not [e for e in paused if e.get("event", "").startswith("run_")]
        state = await state_of(agent, mode, "t")
        assert state.interrupts and SLOW - 0.05 < state.values["run_control_elapsed"] < SLOW + 0.7
        await asyncio.sleep(2.0)  # the human thinks
        REACHED.clear()
        events = await run_collecting(agent, mode, Command(resume=APPROVE), cfg("t"))
        assert REACHED.is_set()  # the approved tool started: the wait did not count
        [end] = [e for e in events if e.get("event", "").startswith("run_")]
        assert end["event"] == "run_deadline_exceeded" and end["elapsed"] >= SLOW + 0.8  # both slices counted
        messages = (await state_of(agent, mode, "t")).values["messages"]
        assert_paired(messages)
        assert messages[-1].response_metadata["run_control"] == "deadline"


async def test_cancelling_the_asyncio_task_still_works_and_frees_the_thread() -> None:
    ledger, model = Ledger(), Model()
    agent = agent_for(RunControl(), ledger, model, InMemorySaver())
    REACHED.clear()
    task = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("tool job")]}, cfg("t")))
    assert await asyncio.to_thread(REACHED.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    out = await agent.ainvoke({"messages": [HumanMessage("next")]}, cfg("t"))  # no ThreadBusyError: released
    assert out["messages"][-1].content == "answer: next"
    assert_paired(out["messages"])
    assert not agent.cancel("t")  # nothing runs on the thread now


async def test_a_deadline_holds_without_a_checkpointer(mode: str) -> None:
    """No checkpointer (as on LangGraph Server, which brings its own): no lease to take, the deadline still ends
    the run with every tool call answered."""
    ledger = Ledger()
    agent = build(None, RunControl(deadline=DEADLINE, on_deadline="raise"), tools=[work_tool(ledger)],
                  model=Model(), review=False)
    with pytest.raises(RunDeadlineExceededError):
        if mode == "invoke":
            await asyncio.to_thread(agent.invoke, {"messages": [HumanMessage("tool job")]})
        else:
            await agent.ainvoke({"messages": [HumanMessage("tool job")]})
    out = await run_collecting(agent, mode, {"messages": [HumanMessage("hello")]}, None)
    assert out == []  # a quick run: no terminal event
