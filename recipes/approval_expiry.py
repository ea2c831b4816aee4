"""Approvals that expire: a refund waits one hour for a human, then a background job resolves it without anyone.

What it shows
    ``HumanInTheLoopMiddleware`` with a per-tool ``timeout`` and ``on_timeout``: the interrupt payload carries the
    deadline (``expires_at``, ISO UTC, and ``expires_at_epoch``) for the reviewer's UI; a reviewer who answers late
    gets the ``on_timeout`` decision applied instead of theirs (here: rejected, and the model is told the approval
    expired); and ``expire_pending_approvals(agent)``, run by a scheduler, resolves every expired approval of every
    thread in the checkpointer (a SQLite file here) with no user input. A fake clock stands in for an hour passing.

When to use it
    Any approval that must not wait forever: refunds, payouts, deployments that only make sense today. Run
    ``expire_pending_approvals`` (or ``aexpire_pending_approvals``) every minute from your scheduler (cron, Celery
    beat, a LangGraph Server cron job) with the agent your workers build.

Run it: ``python recipes/approval_expiry.py`` (offline; asserts its own outcome, exits non-zero on failure).
"""

from __future__ import annotations

import sqlite3
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware, expire_pending_approvals
from middleware_kit.testing import ScriptedChatModel, tool_call

NOW = [1_800_000_000.0]
"""The fake clock (2027-01-15T08:00:00Z): the middleware and the job read it; the recipe moves it."""
REFUNDED: list[str] = []


def clock() -> float:
    return NOW[0]


@tool
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    REFUNDED.append(order)
    return f"refunded {amount} on {order}"


@tool
def lookup_order(order: str) -> str:
    """Look an order up (safe: never reviewed)."""
    return f"{order}: paid, 120 EUR"


def reply(messages: list[BaseMessage]) -> AIMessage:
    """A scripted model: asks for the refund, then reports what happened to it."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"Update: {str(last.content).splitlines()[0][:90]}")
    order = str(last.content).split()[-1]
    return AIMessage("", tool_calls=[tool_call("refund", {"order": order, "amount": 120}, id=f"call_{order}")])


def build_agent(saver: Any) -> Any:
    """What every worker (and the scheduler) builds: the same definition, the same checkpointer."""
    hitl = HumanInTheLoopMiddleware(
        {"refund": {"allowed_decisions": ["approve", "reject"], "timeout": timedelta(hours=1), "on_timeout": "reject"}},
        clock=clock,
    )
    return create_agent(ScriptedChatModel(default=reply), [refund, lookup_order], middleware=[hitl], checkpointer=saver)


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    print(f"  ok: {what}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "approvals.sqlite", check_same_thread=False)
        agent = build_agent(SqliteSaver(conn))
        threads = {order: {"configurable": {"thread_id": f"refund-{order}"}} for order in ("A-1", "B-2", "C-3")}

        print("08:00 three customers ask for refunds; each waits for a human")
        for order, config in threads.items():
            paused = agent.invoke({"messages": [HumanMessage(f"refund {order}")]}, config)
            request = paused["__interrupt__"][0].value
            check(request["expires_at"] == "2027-01-15T09:00:00Z", f"{order}: the payload says when it expires")

        print("08:20 a reviewer approves A-1 in time")
        NOW[0] += 20 * 60
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), threads["A-1"])
        check(REFUNDED == ["A-1"], "A-1 refunded once")

        print("08:59 the scheduler runs: nothing has expired yet")
        NOW[0] += 39 * 60
        check(expire_pending_approvals(agent, now=NOW[0]) == [], "nothing resolved before the deadline")

        print("09:05 a reviewer approves B-2, five minutes too late")
        NOW[0] += 6 * 60
        late = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), threads["B-2"])
        answer = late["messages"][2]
        check(REFUNDED == ["A-1"], "the late approval did not refund B-2")
        check(answer.status == "error" and "expired at 2027-01-15T09:00:00Z" in answer.content,
              "the model was told the approval expired")

        print("09:06 the scheduler runs again: it resolves C-3, which nobody answered")
        NOW[0] += 60
        resolved = expire_pending_approvals(agent, now=NOW[0])
        check([r.thread_id for r in resolved] == ["refund-C-3"], "only C-3 was still pending, and is resolved")
        state = agent.get_state(threads["C-3"])
        check(state.interrupts == (), "C-3 no longer waits")
        check(state.values["messages"][-1].content.startswith("Update: The approval of the tool call"),
              "the model answered the customer about the expired approval")
        for order, config in threads.items():
            messages = agent.get_state(config).values["messages"]
            calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
            answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
            check(calls == answered, f"{order}: every tool call has its answer")

        print("09:10 C-3's customer asks again; the next turn works and a reviewer approves at once")
        NOW[0] += 4 * 60
        agent.invoke({"messages": [HumanMessage("refund C-3")]}, threads["C-3"])
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), threads["C-3"])
        check(REFUNDED == ["A-1", "C-3"], "C-3 refunded once, on the second request")
        conn.close()
    print("OK: approvals expire into rejections, by a late answer or by the scheduler; nothing dangles.")


if __name__ == "__main__":
    main()
