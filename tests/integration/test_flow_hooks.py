"""Flow hooks inside an agent, under invoke and ainvoke: retries, exceptions thrown in, Sleep, interrupts."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

import middleware_kit.flow as flow_module
from middleware_kit import AgentMiddleware, ModelRequest, ToolCallRequest, create_agent, wrap_model_call, wrap_tool_call
from middleware_kit.flow import ModelCallFlow, Sleep, ToolCallFlow
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add

Q = {"messages": [HumanMessage("q")]}


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    record: list[tuple[str, float]] = []

    def fake_sleep(seconds: float) -> None:
        record.append(("sleep", seconds))

    async def fake_asleep(seconds: float) -> None:
        record.append(("asleep", seconds))

    monkeypatch.setattr(flow_module, "sleep", fake_sleep)
    monkeypatch.setattr(flow_module, "asleep", fake_asleep)
    return record


class RetryModel(AgentMiddleware):
    def wrap_model_call(self, request: ModelRequest[Any]) -> ModelCallFlow:
        for attempt in range(3):
            try:
                return (yield request)
            except TimeoutError:
                if attempt == 2:
                    raise
                yield Sleep(0.25 * (attempt + 1))
        raise AssertionError("unreachable")


def test_retry_flow_calls_the_model_three_times(run: Runner, mode: str, slept: list[tuple[str, float]]) -> None:
    model = ScriptedChatModel([TimeoutError("1"), TimeoutError("2"), "answer"])
    agent = create_agent(model, middleware=[RetryModel()])
    result = run(agent, Q)
    assert result["messages"][-1].content == "answer"
    assert model.call_count == 3
    kind = "sleep" if mode == "invoke" else "asleep"
    assert slept == [(kind, 0.25), (kind, 0.5)]
    assert "flow" in str(agent.middleware_plan)


def test_the_last_exception_propagates_out_of_the_agent(run: Runner, slept: list[tuple[str, float]]) -> None:
    model = ScriptedChatModel([TimeoutError("1"), TimeoutError("2"), TimeoutError("3")])
    agent = create_agent(model, middleware=[RetryModel()])
    with pytest.raises(TimeoutError, match="3"):
        run(agent, Q)
    assert model.call_count == 3


def test_flow_under_ainvoke_never_leaves_the_event_loop_thread() -> None:
    threads: set[int] = set()

    @wrap_model_call
    def probe(request: ModelRequest[Any]) -> ModelCallFlow:
        threads.add(threading.get_ident())
        response = yield request
        threads.add(threading.get_ident())
        return response

    @wrap_tool_call
    def tprobe(request: ToolCallRequest) -> ToolCallFlow:
        threads.add(threading.get_ident())
        return (yield request)

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "done"])
    agent = create_agent(model, [add], middleware=[probe, tprobe])

    async def main() -> int:
        await agent.ainvoke(Q)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads == {loop_thread}


@tool
def approve(x: int) -> str:
    """Ask a human."""
    answer = interrupt({"x": x})
    return f"approved {answer}"


@tool
def explode(x: int) -> str:
    """Always fails."""
    raise ValueError("boom")


def test_exception_from_a_tool_is_thrown_into_the_flow(run: Runner) -> None:
    seen: list[str] = []

    @wrap_tool_call
    def guard(request: ToolCallRequest) -> ToolCallFlow:
        try:
            return (yield request)
        except ValueError as exc:
            seen.append(str(exc))
            return ToolMessage(f"failed: {exc}", tool_call_id=request.tool_call["id"], status="error")

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("explode", {"x": 1})]), "done"])
    agent = create_agent(model, [explode], middleware=[guard])
    result = run(agent, Q)
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == ["failed: boom"]
    assert seen == ["boom"]


def test_interrupt_passes_through_a_flow_and_resumes(run: Runner) -> None:
    passes: list[str] = []

    @wrap_tool_call
    def around(request: ToolCallRequest) -> ToolCallFlow:
        passes.append("in")
        result = yield request
        passes.append("out")
        return result

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("approve", {"x": 7})]), "done"])
    agent = create_agent(model, [approve], middleware=[around], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    first = run(agent, Q, config=config)
    assert first["__interrupt__"][0].value == {"x": 7}
    assert passes == ["in"]
    final = run(agent, Command(resume="yes"), config=config)
    assert [m.content for m in final["messages"] if isinstance(m, ToolMessage)] == ["approved yes"]
    assert passes == ["in", "in", "out"]


def test_a_flow_that_swallows_an_interrupt_does_not_hide_it(run: Runner) -> None:
    @wrap_tool_call
    def swallow(request: ToolCallRequest) -> ToolCallFlow:
        try:
            return (yield request)
        except Exception:  # GraphInterrupt is an Exception: a careless catch-all swallows it
            return ToolMessage("swallowed", tool_call_id=request.tool_call["id"])

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("approve", {"x": 1})]), "done"])
    agent = create_agent(model, [approve], middleware=[swallow], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    first = run(agent, Q, config=config)
    assert first["__interrupt__"][0].value == {"x": 1}
    final = run(agent, Command(resume="ok"), config=config)
    assert [m.content for m in final["messages"] if isinstance(m, ToolMessage)] == ["approved ok"]
