"""Holes of issue 23 in the lease: a run whose lease was taken over writes nothing more; cancelling a thread paused
for review resolves the review; a checkpointer that cannot hold a cross-process lease says so once."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.run_control import (
    ControlledAgent,
    InterruptAlreadyResolvedError,
    LeaseLostError,
    RunControl,
    RunControlConfigError,
    ThreadBusyError,
    UnsharedLeaseWarning,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.run_control.helpers import APPROVE, Ledger, SlowModel, assert_paired, build, call, cfg, pay_tool, saver_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def state_of(agent: Any, mode: str, thread: str) -> Any:
    if mode == "invoke":
        return await asyncio.to_thread(agent.get_state, cfg(thread))
    return await agent.aget_state(cfg(thread))


# -- a run whose lease was taken over writes nothing after it lost it -------------------------------------------------
def work_reply(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(f"done: {messages[-1].content}")
    return AIMessage("", tool_calls=[tool_call("work", {"job": "j"}, id="call_1")])


def stalling_tool(ledger: Ledger, stall: float) -> StructuredTool:
    """``work``: its first call blocks for ``stall`` seconds *on the event loop* (a blocking call in async code:
    the run's heartbeat stalls with it); later calls answer at once."""

    def work(job: str) -> str:
        first = not ledger.items
        ledger.add("A" if first else "B")
        if first:
            time.sleep(stall)
            return "A's result"
        return "B's result"

    async def awork(job: str) -> str:
        return work(job)

    return StructuredTool.from_function(work, coroutine=awork, name="work", description="Do the job.")


async def test_a_run_whose_lease_was_taken_over_writes_nothing_after_it_lost_the_lease(tmp_path: Path) -> None:
    """Run A (ainvoke) blocks its event loop inside a tool for 10 s, so its heartbeat stalls past the 6 s ttl; run
    B (another saver on the same SQLite file, as another process has) waits for the lease, takes the thread over,
    finds A's call in doubt (the call ledger), retries it and finishes the turn. When A's tool returns, A writes
    nothing: the thread holds B's turn only, A's caller gets
    LeaseLostError. (The ttl leaves B's own heartbeat ample room on a loaded machine; the stall is well past it.)"""
    path = str(tmp_path / "fence.sqlite")
    ledger = Ledger()
    control = RunControl(ttl=6.0, poll_interval=0.05, on_conflict="wait", wait_timeout=60)
    tool = stalling_tool(ledger, stall=10.0)
    finished: dict[str, Any] = {}

    def run_b() -> None:
        while not ledger.items:  # A is inside its tool, its loop blocked
            time.sleep(0.01)
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
        try:
            b = create_agent(ScriptedChatModel(default=work_reply), [tool], checkpointer=SqliteSaver(conn),
                             run_control=control)
            out = b.invoke(None, cfg("t"))  # run the thread on from its last checkpoint
            for pending in out.get("__interrupt__", ()):  # A's call is in doubt (started, no result): B retries it
                assert pending.value["type"] == "tool_call_in_doubt", pending.value
                out = b.invoke(Command(resume={pending.id: {"type": "retry"}}), cfg("t"))
            finished.update(out)
        except Exception as exc:  # reported by the assertion below, with its cause
            finished["error"] = exc
        finally:
            conn.close()

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        a = create_agent(ScriptedChatModel(default=work_reply), [tool], checkpointer=saver, run_control=control)
        other = threading.Thread(target=run_b)
        other.start()
        with pytest.raises(LeaseLostError) as info:
            # durability="sync": no checkpoint write of A's is left mid-transaction, holding SQLite's write lock B
            # needs, while A's tool blocks the event loop that write's commit would run on
            await a.ainvoke({"messages": [HumanMessage("go")]}, cfg("t"), durability="sync")
        await asyncio.to_thread(other.join, 30)
        state = await a.aget_state(cfg("t"))
    assert info.value.thread_id == "t" and info.value.middleware == "RunControl" and info.value.hook == "lease"
    assert "Nothing this run did after that was written to the thread" in str(info.value)
    assert "error" not in finished, f"run B failed: {finished.get('error')!r}"
    assert finished["messages"][-1].content == "done: B's result"
    messages = state.values["messages"]
    assert [m.content for m in messages] == ["go", "", "B's result", "done: B's result"]  # nothing of A's after
    assert_paired(messages)
    assert ledger.items == ["A", "B"]  # (a stalled process's side effect cannot be undone; its writes are fenced)


# -- cancelling a thread paused for review resolves the review --------------------------------------------------------
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_cancel_resolves_a_review_the_thread_is_paused_on(kind: str, mode: str, tmp_path: Path) -> None:
    ledger = Ledger()
    async with saver_for(kind, mode, tmp_path) as saver:
        agent = build(saver, tools=[pay_tool(ledger)], model=SlowModel(default=_pay_reply))  # the plain agent
        paused = await call(agent, mode, {"messages": [HumanMessage("x")]}, cfg("t"))
        [review] = paused["__interrupt__"]
        if mode == "invoke":
            cancelled = await asyncio.to_thread(agent.cancel, "t", reason="the user closed the tab")
        else:
            cancelled = await agent.acancel("t", reason="the user closed the tab")
        assert cancelled is True
        state = await state_of(agent, mode, "t")
        assert not state.interrupts and not state.next  # no longer pending
        messages = state.values["messages"]
        assert_paired(messages)
        answer = messages[-2]
        assert isinstance(answer, ToolMessage) and answer.status == "error"
        assert answer.content == "Tool call 'pay' was not executed: the run was cancelled (the user closed the tab)."
        assert messages[-1].response_metadata["run_control"] == "cancelled"
        # a late approval of the cancelled review is refused, and nothing runs
        with pytest.raises(InterruptAlreadyResolvedError) as info:
            await call(agent, mode, Command(resume={review.id: APPROVE}), cfg("t"))
        assert info.value.interrupt_id == review.id
        with pytest.raises(InterruptAlreadyResolvedError):
            await call(agent, mode, Command(resume=APPROVE), cfg("t"))
        assert ledger.items == []
        # nothing left to cancel; the thread takes its next turn
        assert (await asyncio.to_thread(agent.cancel, "t")) is False if mode == "invoke" else \
            (await agent.acancel("t")) is False
        again = await call(agent, mode, {"messages": [HumanMessage("y")]}, cfg("t"))
        assert again["__interrupt__"][0].value["action_requests"][0]["args"] == {"ref": "y"}


def _pay_reply(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(f"done: {messages[-1].content}")
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    return AIMessage("", tool_calls=[tool_call("pay", {"ref": str(humans[-1].content)}, id=f"call_{len(humans)}")])


# -- a checkpointer that cannot hold a cross-process lease says so once ----------------------------------------------
class ShelfSaver(BaseCheckpointSaver[Any]):
    """A custom checkpointer (as a user writes one for their own store): keeps its checkpoints in an
    ``InMemorySaver`` it wraps."""

    def __init__(self) -> None:
        super().__init__()
        self.shelf = InMemorySaver()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.shelf.get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.shelf.aget_tuple(config)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return self.shelf.list(config, **kwargs)

    def alist(self, config: RunnableConfig | None, **kwargs: Any) -> AsyncIterator[CheckpointTuple]:
        return self.shelf.alist(config, **kwargs)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        return self.shelf.put(config, checkpoint, metadata, new_versions)

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        return await self.shelf.aput(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        self.shelf.put_writes(config, writes, task_id, task_path)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        await self.shelf.aput_writes(config, writes, task_id, task_path)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self.shelf.get_next_version(current, channel)


async def test_a_checkpointer_that_cannot_share_the_lease_says_so_once() -> None:
    model = SlowModel(default="hello", delay=1.0)
    with pytest.warns(UnsharedLeaseWarning) as caught:
        agent = create_agent(model, checkpointer=ShelfSaver())
    [warning] = caught
    text = str(warning.message)
    assert "Run control with checkpointer ShelfSaver" in text and "this process's runs only" in text
    assert "SqliteSaver/AsyncSqliteSaver and PostgresSaver/AsyncPostgresSaver" in text
    assert "RunControl(cross_process=False)" in text and "run_control=False" in text
    assert warning.filename == __file__  # points at the create_agent call
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: not again for another agent on this class, nor when opted out
        create_agent(ScriptedChatModel(["hi"]), checkpointer=ShelfSaver())
        create_agent(ScriptedChatModel(["hi"]), checkpointer=ShelfSaver(), run_control=RunControl(cross_process=False))
        create_agent(ScriptedChatModel(["hi"]), checkpointer=ShelfSaver(), run_control=False)
        create_agent(ScriptedChatModel(["hi"]), checkpointer=InMemorySaver())  # in-process by nature: no warning
    with pytest.raises(RunControlConfigError, match=r"RunControl\(cross_process=True\) with checkpointer ShelfSaver"):
        create_agent(ScriptedChatModel(["hi"]), checkpointer=ShelfSaver(), run_control=RunControl(cross_process=True))
    # what it says holds does hold: one run per thread in this process
    assert isinstance(agent, ControlledAgent)
    first = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("a")]}, cfg("t")))
    await model.reached()
    with pytest.raises(ThreadBusyError):
        await agent.ainvoke({"messages": [HumanMessage("b")]}, cfg("t"))
    assert (await first)["messages"][-1].content == "hello"
