"""One run per thread and resumes applied exactly once, in one process: threads (invoke) and tasks (ainvoke), on
InMemorySaver and SQLite, for the plain agent (``create_agent(..., checkpointer=saver)``, run control's defaults)
unless a test tunes it. Each race is run several times; the ledger of tool side effects is the ground truth."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import langgraph.errors
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from middleware_kit.errors import MiddlewareError
from middleware_kit.run_control import (
    InterruptAlreadyResolvedError,
    NothingToResumeError,
    PendingApprovalError,
    RunControl,
    ThreadBusyError,
    UnknownInterruptError,
)
from tests.run_control.helpers import (
    APPROVE,
    Ledger,
    SlowModel,
    assert_paired,
    build,
    call,
    cfg,
    pay_tool,
    reply,
    saver_for,
)

pytestmark = pytest.mark.timeout(120)

KINDS = ["memory", "sqlite"]


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("on_conflict", ["reject", "wait"])
async def test_racing_resumes_run_the_approved_tool_exactly_once(
    kind: str, on_conflict: str, mode: str, tmp_path: Path
) -> None:
    ledger = Ledger()
    async with saver_for(kind, mode, tmp_path) as saver:
        # "reject" is the plain agent's default (no run_control argument)
        control = None if on_conflict == "reject" else RunControl(on_conflict="wait", wait_timeout=20)
        agent = build(saver, control, tools=[pay_tool(ledger, delay=0.05)])
        for trial in range(4):
            thread = f"race-{trial}"
            paused = await call(agent, mode, {"messages": [HumanMessage(f"pay {trial}")]}, cfg(thread))
            assert paused["__interrupt__"]
            outcomes = await asyncio.gather(
                *[call(agent, mode, Command(resume=APPROVE), cfg(thread)) for _ in range(6)], return_exceptions=True
            )
            applied = [o for o in outcomes if isinstance(o, dict)]
            refused = [o for o in outcomes if not isinstance(o, dict)]
            assert len(applied) == 1, outcomes
            assert applied[0]["messages"][-1].content == f"done: paid pay {trial}"
            allowed = (ThreadBusyError, InterruptAlreadyResolvedError) if on_conflict == "reject" else (
                InterruptAlreadyResolvedError,)
            assert all(isinstance(e, allowed) for e in refused), refused
            if on_conflict == "wait":
                assert all(e.interrupt_id == paused["__interrupt__"][0].id for e in refused)  # type: ignore[union-attr]
        assert sorted(ledger.items) == [f"pay {t}" for t in range(4)]


@pytest.mark.parametrize("kind", KINDS)
async def test_concurrent_new_turns_wait_in_line_and_none_is_lost(kind: str, mode: str, tmp_path: Path) -> None:
    model = SlowModel(default=lambda msgs: f"answer to {msgs[-1].content}", delay=0.02)
    async with saver_for(kind, mode, tmp_path) as saver:
        agent = build(saver, RunControl(on_conflict="wait", wait_timeout=30), model=model, review=False)
        texts = [f"turn {i}" for i in range(8)]
        await asyncio.gather(*[call(agent, mode, {"messages": [HumanMessage(t)]}, cfg("busy")) for t in texts])
        state = await asyncio.to_thread(agent.get_state, cfg("busy")) if mode == "invoke" else \
            await agent.aget_state(cfg("busy"))
    messages = state.values["messages"]
    humans = [m.content for m in messages if isinstance(m, HumanMessage)]
    assert sorted(humans) == sorted(texts)  # every turn is in the history
    # turns never interleave: each question is followed by its own answer
    for q, a in zip(messages[::2], messages[1::2], strict=True):
        assert isinstance(q, HumanMessage) and isinstance(a, AIMessage) and a.content == f"answer to {q.content}"


@pytest.mark.parametrize("kind", KINDS)
async def test_a_second_run_is_rejected_naming_the_thread_and_the_holder(kind: str, mode: str, tmp_path: Path) -> None:
    model = SlowModel(default="hello", delay=1.5)
    async with saver_for(kind, mode, tmp_path) as saver:
        agent = build(saver, model=model, review=False)
        first = asyncio.create_task(call(agent, mode, {"messages": [HumanMessage("a")]}, {**cfg("t"), "run_id": None}))
        await model.reached()  # the first run holds the thread for the next 1.5 s
        with pytest.raises(ThreadBusyError) as info:
            await call(agent, mode, {"messages": [HumanMessage("b")]}, cfg("t"))
        await first
        err = info.value
        assert isinstance(err, MiddlewareError) and err.middleware == "RunControl" and err.hook == "on_conflict"
        assert "Thread 't' is busy: run '" in str(err) and err.holder and err.thread_id == "t"
        assert "on_conflict='wait'" in str(err)
        # the rejected turn left no trace, and the thread is free again
        out = await call(agent, mode, {"messages": [HumanMessage("c")]}, cfg("t"))
        assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)] == ["a", "c"]


@pytest.mark.parametrize("kind", KINDS)
async def test_waiting_gives_up_after_wait_timeout(kind: str, mode: str, tmp_path: Path) -> None:
    model = SlowModel(default="hello", delay=2.0)
    async with saver_for(kind, mode, tmp_path) as saver:
        agent = build(saver, RunControl(on_conflict="wait", wait_timeout=0.2), model=model, review=False)
        first = asyncio.create_task(call(agent, mode, {"messages": [HumanMessage("a")]}, cfg("t")))
        await model.reached()  # the first run holds the thread for the next 2 s
        with pytest.raises(ThreadBusyError, match=r"stayed busy for 0.2s \(wait_timeout\)"):
            await call(agent, mode, {"messages": [HumanMessage("b")]}, cfg("t"))
        await first


@pytest.mark.parametrize("kind", KINDS)
async def test_stale_duplicate_and_unknown_resumes_run_nothing(kind: str, mode: str, tmp_path: Path) -> None:
    ledger = Ledger()
    model = SlowModel(default=reply)
    async with saver_for(kind, mode, tmp_path) as saver:
        agent = build(saver, tools=[pay_tool(ledger)], model=model)
        with pytest.raises(NothingToResumeError, match="Thread 'fresh' has nothing to resume"):
            await call(agent, mode, Command(resume=APPROVE), cfg("fresh"))
        assert model.call_count == 0  # nothing ran: no model call with zero messages

        paused = await call(agent, mode, {"messages": [HumanMessage("x")]}, cfg("t"))
        interrupt_id = paused["__interrupt__"][0].id
        with pytest.raises(UnknownInterruptError, match="is not pending on thread 't'") as unknown:
            await call(agent, mode, Command(resume={"0" * 32: APPROVE}), cfg("t"))
        # LangGraph's strict resume found it (before anything was written); ours is also LangGraph's error
        assert isinstance(unknown.value, langgraph.errors.UnknownInterruptError)
        assert isinstance(unknown.value.__cause__, langgraph.errors.UnknownInterruptError)
        assert unknown.value.reason == "not_pending" and unknown.value.interrupt_ids == ("0" * 32,)
        assert unknown.value.pending_ids == (interrupt_id,)
        with pytest.raises(PendingApprovalError, match=interrupt_id):
            await call(agent, mode, {"messages": [HumanMessage("y")]}, cfg("t"))
        done = await call(agent, mode, Command(resume={interrupt_id: APPROVE}), cfg("t"))
        assert done["messages"][-1].content == "done: paid x"
        calls = model.call_count
        resumes: list[Command[Any]] = [Command(resume=APPROVE), Command(resume={interrupt_id: APPROVE})]
        for resume in resumes:
            with pytest.raises(langgraph.errors.UnknownInterruptError) as caught:  # LangGraph's name catches it too
                await call(agent, mode, resume, cfg("t"))
            info = caught.value
            assert isinstance(info, InterruptAlreadyResolvedError)
            assert info.interrupt_id == interrupt_id and info.thread_id == "t"
            assert f"Interrupt '{interrupt_id}' of thread 't' was already resolved by run" in str(info)
        assert model.call_count == calls and ledger.items == ["x"]
        state = await asyncio.to_thread(agent.get_state, cfg("t")) if mode == "invoke" else \
            await agent.aget_state(cfg("t"))
        assert_paired(state.values["messages"])
        # the thread is still usable
        again = await call(agent, mode, {"messages": [HumanMessage("z")]}, cfg("t"))
        assert again["__interrupt__"]


async def test_abandon_policy_drops_the_review_and_runs_the_new_input(mode: str, tmp_path: Path) -> None:
    ledger = Ledger()
    async with saver_for("memory", mode, tmp_path) as saver:
        agent = build(saver, RunControl(on_pending_input="abandon"), tools=[pay_tool(ledger)],
                      model=SlowModel(default=reply))
        await call(agent, mode, {"messages": [HumanMessage("x")]}, cfg("t"))
        out = await call(agent, mode, {"messages": [HumanMessage("y")]}, cfg("t"))
        assert out["__interrupt__"][0].value["action_requests"][0]["args"] == {"ref": "y"}
        assert_paired(out["messages"][:-1])  # the abandoned call is answered; the new one awaits its review
        assert ledger.items == []


def test_a_subgraph_run_does_not_take_the_lease_again() -> None:
    """Inside a run that holds the lease, the same controlled agent used as a node does not deadlock on it."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    inner = build(InMemorySaver(), model=SlowModel(default="inner answer"), review=False)
    outer = StateGraph(MessagesState)
    outer.add_node("agent", inner)
    outer.add_edge(START, "agent")
    graph = outer.compile(checkpointer=InMemorySaver())
    out: Any = graph.invoke({"messages": [HumanMessage("hi")]}, cfg("outer"))
    assert out["messages"][-1].content == "inner answer"

