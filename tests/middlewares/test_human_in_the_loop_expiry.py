"""HumanInTheLoopMiddleware approval expiry: deadlines in the payload, late answers, on_timeout, the background job."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit.middlewares.human_in_the_loop import (
    ExpiredApproval,
    HumanInTheLoopMiddleware,
    InvalidResumeError,
    aexpire_pending_approvals,
    expire_pending_approvals,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

START = 1_800_000_000.0  # 2027-01-15T08:00:00Z
EMAIL = tool_call("send_email", {"to": "ann@example.com", "body": "hi"}, id="c_email")
DELETE = tool_call("delete_file", {"path": "/tmp/x"}, id="c_delete")


class Clock:
    """A fake clock: seconds since the epoch, moved by hand."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@dataclass
class Kit:
    ran: list[str]
    tools: list[BaseTool]
    clock: Clock


@pytest.fixture
def kit() -> Kit:
    ran: list[str] = []

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        ran.append(f"email {to}")
        return f"sent to {to}"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete {path}")
        return f"deleted {path}"

    return Kit(ran, [send_email, delete_file], Clock())


def model(*calls: Any, turns: int = 1) -> ScriptedChatModel:
    script: list[Any] = []
    for n in range(turns):
        script += [AIMessage("", tool_calls=list(calls)), f"answer {n}"]
    return ScriptedChatModel(script)


def cfg(thread: str = "t") -> Any:
    return {"configurable": {"thread_id": thread}}


def hitl(kit: Kit, interrupt_mode: Any = "batched", **config: Any) -> HumanInTheLoopMiddleware:
    mode = interrupt_mode
    timed: Any = {"allowed_decisions": ["approve", "edit", "reject"], "timeout": timedelta(minutes=5), **config}
    return HumanInTheLoopMiddleware({"send_email": timed, "delete_file": True}, interrupt_mode=mode, clock=kit.clock)


def assert_paired(messages: list[Any]) -> None:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    assert answered == calls, messages


# -- the deadline travels in the payload -------------------------------------------------------------------------------
@pytest.mark.parametrize("interrupt_mode", ["batched", "per_call"])
def test_the_deadline_is_in_the_payload_as_iso_utc_and_epoch(run: Runner, kit: Kit, interrupt_mode: str) -> None:
    agent = create_agent(model(EMAIL), kit.tools, middleware=[hitl(kit, interrupt_mode=interrupt_mode)],
                         checkpointer=InMemorySaver())
    kit.clock.now += 7  # the model answers now: the deadline counts from here
    (pending,) = run(agent, {"messages": [HumanMessage("go")]}, config=cfg())["__interrupt__"]
    assert pending.value["expires_at_epoch"] == START + 7 + 300
    assert pending.value["expires_at"] == "2027-01-15T08:05:07Z"
    assert datetime.fromisoformat(pending.value["expires_at"]) == datetime.fromtimestamp(START + 307, UTC)
    kit.clock.now += 100  # re-asking later (a bad resume re-runs the node) keeps the same deadline
    with pytest.raises(InvalidResumeError):
        run(agent, Command(resume={"decisions": []}), config=cfg())
    assert agent.get_state(cfg()).interrupts[0].value["expires_at_epoch"] == START + 307


def test_a_turn_expires_at_the_earliest_deadline_of_its_calls(run: Runner, kit: Kit) -> None:
    middleware = HumanInTheLoopMiddleware(
        {"send_email": {"allowed_decisions": ["approve"], "timeout": 600},
         "delete_file": {"allowed_decisions": ["approve"], "timeout": 60.0}},
        clock=kit.clock,
    )
    agent = create_agent(model(EMAIL, DELETE), kit.tools, middleware=[middleware], checkpointer=InMemorySaver())
    (pending,) = run(agent, {"messages": [HumanMessage("go")]}, config=cfg())["__interrupt__"]
    assert pending.value["expires_at_epoch"] == START + 60


def test_without_a_timeout_nothing_expires(run: Runner, kit: Kit) -> None:
    agent = create_agent(model(DELETE), kit.tools, middleware=[hitl(kit)], checkpointer=InMemorySaver())
    (pending,) = run(agent, {"messages": [HumanMessage("go")]}, config=cfg())["__interrupt__"]
    assert "expires_at" not in pending.value
    kit.clock.now += 10**9
    with pytest.raises(InvalidResumeError, match="nothing here can expire: no reviewed tool has a 'timeout'"):
        run(agent, Command(resume={"expired": True}), config=cfg())
    run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=cfg())
    assert kit.ran == ["delete /tmp/x"]
    with pytest.raises(MiddlewareConfigError):  # on_timeout needs a timeout
        HumanInTheLoopMiddleware({"x": {"allowed_decisions": ["approve"], "on_timeout": "approve"}})


# -- a late answer -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("interrupt_mode", ["batched", "per_call"])
def test_an_answer_after_the_deadline_is_a_rejection_saying_the_approval_expired(
    run: Runner, kit: Kit, interrupt_mode: str
) -> None:
    agent = create_agent(model(EMAIL, turns=2), kit.tools, middleware=[hitl(kit, interrupt_mode=interrupt_mode)],
                         checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=cfg())
    kit.clock.now += 301
    out = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=cfg())
    assert kit.ran == []  # the late approval does not run the tool
    answer = out["messages"][2]
    assert isinstance(answer, ToolMessage) and answer.status == "error" and answer.tool_call_id == "c_email"
    assert str(answer.content).startswith(
        "The approval of the tool call for `send_email` with id c_email expired at 2027-01-15T08:05:00Z before a "
        "human reviewer decided. It was not executed."
    )
    assert agent.get_state(cfg()).values["human_review"]["c_email"] == {
        "decision": "reject", "middleware": "HumanInTheLoopMiddleware", "expired": True}
    assert out["messages"][-1].content == "answer 0"
    assert_paired(out["messages"])
    assert agent.get_state(cfg()).interrupts == ()
    # The next turn works, and asks again.
    again = run(agent, {"messages": [HumanMessage("try again")]}, config=cfg())
    assert len(again["__interrupt__"]) == 1
    done = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=cfg())
    assert kit.ran == ["email ann@example.com"] and done["messages"][-1].content == "answer 1"
    assert_paired(done["messages"])


def test_an_answer_just_before_the_deadline_counts(run: Runner, kit: Kit) -> None:
    agent = create_agent(model(EMAIL), kit.tools, middleware=[hitl(kit)], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=cfg())
    kit.clock.now += 299.9
    run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=cfg())
    assert kit.ran == ["email ann@example.com"]


@pytest.mark.parametrize(
    ("on_timeout", "ran", "content"),
    [
        ("approve", ["email ann@example.com"], "sent to ann@example.com"),
        ({"type": "respond", "message": "Nobody approved in time; skipped."}, [], "Nobody approved in time; skipped."),
        ({"type": "reject", "message": "Timed out."}, [], "Timed out.\n\n(The approval of the tool call"),
    ],
)
def test_on_timeout_decides_what_an_expired_approval_becomes(
    run: Runner, kit: Kit, on_timeout: Any, ran: list[str], content: str
) -> None:
    agent = create_agent(model(EMAIL), kit.tools, middleware=[hitl(kit, on_timeout=on_timeout)],
                         checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=cfg())
    kit.clock.now += 3600
    out = run(agent, Command(resume={"decisions": [{"type": "reject"}]}), config=cfg())
    assert kit.ran == ran
    assert str(out["messages"][2].content).startswith(content)
    assert_paired(out["messages"])


def test_the_approval_expired_event_is_on_the_custom_stream(mode: str, kit: Kit) -> None:
    agent = create_agent(model(EMAIL), kit.tools, middleware=[hitl(kit)], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("go")]}, cfg())
    kit.clock.now += 301
    resume: Any = Command(resume={"decisions": [{"type": "approve"}]})
    if mode == "invoke":
        events = list(agent.stream(resume, cfg(), stream_mode="custom"))
    else:
        async def collect() -> list[Any]:
            return [e async for e in agent.astream(resume, cfg(), stream_mode="custom")]

        events = asyncio.run(collect())
    assert events == [{"middleware": "HumanInTheLoopMiddleware", "event": "approval_expired", "interrupt_mode":
                       "batched", "expires_at": "2027-01-15T08:05:00Z",
                       "decisions": [{"id": "c_email", "name": "send_email", "type": "reject"}]}]


def test_expired_resume_is_refused_before_the_deadline_and_keeps_the_interrupt(run: Runner, kit: Kit) -> None:
    agent = create_agent(model(EMAIL), kit.tools, middleware=[hitl(kit, on_timeout="approve")],
                         checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=cfg())
    kit.clock.now += 299
    with pytest.raises(InvalidResumeError, match=r"has not expired yet: it expires at 2027-01-15T08:05:00Z \(1s"):
        run(agent, Command(resume={"expired": True}), config=cfg())
    assert len(agent.get_state(cfg()).interrupts) == 1 and kit.ran == []
    kit.clock.now += 1
    run(agent, Command(resume={"expired": True}), config=cfg())
    assert kit.ran == ["email ann@example.com"]  # on_timeout="approve": runs once


@pytest.mark.parametrize("interrupt_mode", ["batched", "per_call"])
def test_every_call_of_an_expired_turn_gets_its_on_timeout_decision(
    run: Runner, kit: Kit, interrupt_mode: Any
) -> None:
    middleware = HumanInTheLoopMiddleware(
        {"send_email": {"allowed_decisions": ["approve", "reject"], "timeout": 60, "on_timeout": "approve"},
         "delete_file": True},  # no timeout of its own: rejected when its turn expires
        interrupt_mode=interrupt_mode, clock=kit.clock,
    )
    agent = create_agent(model(EMAIL, DELETE), kit.tools, middleware=[middleware], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=cfg())
    if interrupt_mode == "per_call":  # the first call is answered in time, the turn is not finished
        run(agent, Command(resume={"type": "reject"}), config=cfg())
    kit.clock.now += 61
    out = run(agent, Command(resume={"expired": True}), config=cfg())
    assert kit.ran == ["email ann@example.com"]
    delete = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c_delete")
    assert "expired at" in str(delete.content) and delete.status == "error"
    assert_paired(out["messages"])


def test_one_job_run_resolves_every_call_of_a_per_call_turn(kit: Kit) -> None:
    middleware = HumanInTheLoopMiddleware(
        {"send_email": {"allowed_decisions": ["approve"], "timeout": 60}, "delete_file": True},
        interrupt_mode="per_call", clock=kit.clock,
    )
    agent = create_agent(model(EMAIL, DELETE), kit.tools, middleware=[middleware], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("go")]}, cfg())
    kit.clock.now += 60
    (record,) = expire_pending_approvals(agent, now=kit.clock.now)
    assert record.tool_call_ids == ("c_email",)  # the interrupt it answered; the turn's other call expired with it
    state = agent.get_state(cfg())
    assert state.interrupts == () and kit.ran == []
    assert_paired(state.values["messages"])
    review = state.values["human_review"]
    assert {k: v["expired"] for k, v in review.items()} == {"c_email": True, "c_delete": True}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"allowed_decisions": ["approve"], "timeout": -1}, "['timeout'] must be a positive timedelta"),
        ({"allowed_decisions": ["approve"], "timeout": timedelta(0)}, "['timeout'] must be a positive timedelta"),
        ({"allowed_decisions": ["approve"], "timeout": "5m"}, "['timeout'] must be a positive timedelta"),
        ({"allowed_decisions": ["approve"], "timeout": 5, "on_timeout": "edit"}, "['on_timeout'] must be 'reject'"),
        ({"allowed_decisions": ["approve"], "timeout": 5, "on_timeout": {"type": "respond"}}, "['on_timeout']"),
        ({"allowed_decisions": ["approve"], "on_timeout": "reject"}, "has 'on_timeout' but no 'timeout'"),
    ],
)
def test_timeout_configuration_is_validated(config: dict[str, Any], message: str) -> None:
    with pytest.raises(MiddlewareConfigError) as err:
        HumanInTheLoopMiddleware({"send_email": config})  # type: ignore[dict-item]
    assert message in str(err.value) and err.value.hook == "interrupt_on"


# -- the background job ------------------------------------------------------------------------------------------------
def _start(agent: Any, threads: list[str]) -> None:
    for thread in threads:
        agent.invoke({"messages": [HumanMessage("go")]}, cfg(thread))


def _scenario(kit: Kit, saver: Any) -> Any:
    """Threads 'a' and 'b' wait for a timed approval, 'c' for an untimed one, 'd' is done."""
    timed = HumanInTheLoopMiddleware({"send_email": {"allowed_decisions": ["approve", "reject"], "timeout": 300},
                                      "delete_file": True}, clock=kit.clock)

    def reply(messages: list[Any]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(f"done after {messages[-1].content[:20]}")
        text = str(messages[-1].content)
        calls = {"go": [EMAIL], "delete": [DELETE]}.get(text, [])
        return AIMessage("", tool_calls=calls) if calls else AIMessage("nothing to do")

    agent = create_agent(ScriptedChatModel(default=reply), kit.tools, middleware=[timed], checkpointer=saver)
    _start(agent, ["a", "b"])
    agent.invoke({"messages": [HumanMessage("delete")]}, cfg("c"))
    agent.invoke({"messages": [HumanMessage("hello")]}, cfg("d"))
    return agent


def _check_resolved(agent: Any, kit: Kit, resolved: list[ExpiredApproval], threads: set[str]) -> None:
    assert {r.thread_id for r in resolved} == threads
    for record in resolved:
        assert record.tool_call_ids == ("c_email",)
        assert record.expires_at == datetime.fromtimestamp(START + 300, UTC)
        state = agent.get_state(cfg(record.thread_id))
        assert state.interrupts == ()
        messages = state.values["messages"]
        assert "expired at" in str(messages[2].content) and messages[-1].content.startswith("done after")
        assert_paired(messages)
    assert kit.ran == []


def test_expire_pending_approvals_resolves_every_expired_thread_of_the_checkpointer(kit: Kit) -> None:
    agent = _scenario(kit, InMemorySaver())
    assert expire_pending_approvals(agent, now=START + 299) == []  # not yet
    kit.clock.now = START + 300
    resolved = expire_pending_approvals(agent, now=kit.clock.now)
    _check_resolved(agent, kit, resolved, {"a", "b"})
    assert len(agent.get_state(cfg("c")).interrupts) == 1  # no timeout: still waiting for its human
    assert expire_pending_approvals(agent, now=kit.clock.now) == []  # idempotent
    # The next turn on an expired thread works.
    agent.invoke({"messages": [HumanMessage("go")]}, cfg("a"))
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg("a"))
    assert kit.ran == ["email ann@example.com"]


def test_expire_pending_approvals_with_a_sqlite_file_per_thread_and_for_some_threads(tmp_path: Path, kit: Kit) -> None:
    conn = sqlite3.connect(tmp_path / "approvals.sqlite", check_same_thread=False)
    try:
        agent = _scenario(kit, SqliteSaver(conn))
        kit.clock.now = START + 301
        assert expire_pending_approvals(agent, config=cfg("c"), now=kit.clock.now) == []
        one = expire_pending_approvals(agent, config=cfg("a"), now=kit.clock.now)
        _check_resolved(agent, kit, one, {"a"})
        rest = expire_pending_approvals(agent, thread_ids=["a", "b", "c", "d"], now=kit.clock.now)
        _check_resolved(agent, kit, rest, {"b"})
    finally:
        conn.close()


def test_the_job_leaves_alone_what_the_middlewares_clock_does_not_call_expired(kit: Kit) -> None:
    agent = _scenario(kit, InMemorySaver())
    assert expire_pending_approvals(agent, now=START + 10_000) == []  # the job's clock is ahead of the agent's
    assert len(agent.get_state(cfg("a")).interrupts) == 1


def test_the_async_job_with_memory_and_async_sqlite(tmp_path: Path, kit: Kit) -> None:
    async def scenario() -> None:
        memory = _scenario(kit, InMemorySaver())
        kit.clock.now = START + 300
        _check_resolved(memory, kit, await aexpire_pending_approvals(memory, now=kit.clock.now), {"a", "b"})
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "async.sqlite")) as saver:
            kit.clock.now = START
            timed = HumanInTheLoopMiddleware({"send_email": {"allowed_decisions": ["approve"], "timeout": 5}},
                                             clock=kit.clock)
            agent = create_agent(model(EMAIL), kit.tools, middleware=[timed], checkpointer=saver)
            await agent.ainvoke({"messages": [HumanMessage("go")]}, cfg("x"))
            kit.clock.now += 5
            (record,) = await aexpire_pending_approvals(agent, now=kit.clock.now)
            assert (record.thread_id, record.tool_call_ids) == ("x", ("c_email",))
            assert (await agent.aget_state(cfg("x"))).interrupts == ()

    asyncio.run(scenario())
    assert kit.ran == []


def test_the_job_needs_a_checkpointer(kit: Kit) -> None:
    agent = create_agent(model(EMAIL), kit.tools, middleware=[hitl(kit)])
    with pytest.raises(MiddlewareConfigError, match="needs an agent built with a checkpointer"):
        expire_pending_approvals(agent)
