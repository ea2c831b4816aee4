"""Run control for a payments agent: double-clicked approvals, a runaway run, and a Stop button.

What it shows
    Run control, on by default for an agent with a checkpointer (here ``run_control=RunControl(...)`` tunes it),
    on an agent whose checkpoints live in a SQLite file (the lease, cancel flags and resume
    records go into the same file). Four reviewers approve the same payout at once: it is paid once, the other
    approvals get ``InterruptAlreadyResolvedError``. A run that keeps calling a slow tool is ended by its deadline
    with every tool call answered, and the next turn on the same conversation works. A run is cancelled from
    another thread (the Stop button) and ends with a ``run_cancelled`` event.

When to use it
    Any agent served to more than one request at a time: web handlers, queues, several replicas. See
    ``docs/production.md``.

Run it: ``python recipes/run_control.py`` (offline; asserts its own outcome, exits non-zero on failure).
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.run_control import InterruptAlreadyResolvedError, RunControl
from middleware_kit.testing import ScriptedChatModel, tool_call

payouts: list[str] = []
lock = threading.Lock()


@tool
def payout(account: str) -> str:
    """Send money to an account."""
    time.sleep(0.05)
    with lock:
        payouts.append(account)
    return f"paid {account}"


@tool
def audit(page: int) -> str:
    """Audit one page of the ledger (slow)."""
    time.sleep(0.3)
    return f"page {page} clean"


def reply(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        if last.name == "audit":  # a runaway: always one more page
            return AIMessage("", tool_calls=[tool_call("audit", {"page": len(messages)}, id=f"a{len(messages)}")])
        return AIMessage(f"Done: {last.content}.")
    text = str(last.content)
    if text.startswith("pay"):
        return AIMessage("", tool_calls=[tool_call("payout", {"account": text.split()[-1]}, id=f"p{len(messages)}")])
    if text.startswith("audit"):
        return AIMessage("", tool_calls=[tool_call("audit", {"page": 1}, id="a0")])
    if text.startswith("essay"):
        time.sleep(0.5)
    return AIMessage(f"You said: {text}")


def main() -> None:
    db = Path(tempfile.mkdtemp()) / "payments.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    agent: Any = create_agent(
        ScriptedChatModel(default=reply), [payout, audit],
        middleware=[HumanInTheLoopMiddleware({"payout": True})],
        checkpointer=SqliteSaver(conn),
        run_control=RunControl(on_conflict="wait", wait_timeout=10, deadline=1.0),
    )

    # 1. Four reviewers approve the same payout at the same moment.
    config = {"configurable": {"thread_id": "payout-7"}}
    paused = agent.invoke({"messages": [HumanMessage("pay ACC-7")]}, config)
    review = paused["__interrupt__"][0]
    approve: Command[Any] = Command(resume={review.id: {"decisions": [{"type": "approve"}]}})

    def click() -> str:
        try:
            return str(agent.invoke(approve, config)["messages"][-1].content)
        except InterruptAlreadyResolvedError as err:
            return f"refused: {type(err).__name__}"

    with ThreadPoolExecutor(4) as pool:
        outcomes = sorted(pool.map(lambda _: click(), range(4)))
    assert outcomes == ["Done: paid ACC-7.", *["refused: InterruptAlreadyResolvedError"] * 3], outcomes
    assert payouts == ["ACC-7"]
    print("approvals:", outcomes)

    # 2. A runaway audit is stopped by its deadline; the conversation stays usable.
    config = {"configurable": {"thread_id": "audit-1"}}
    events = list(agent.stream({"messages": [HumanMessage("audit the ledger")]}, config, stream_mode="custom"))
    assert [e["event"] for e in events] == ["run_deadline_exceeded"], events
    history = agent.get_state(config).values["messages"]
    calls = {c["id"] for m in history if isinstance(m, AIMessage) for c in m.tool_calls}
    answers = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
    assert calls == answers, "a tool call was left unanswered"
    print("deadline:", history[-1].content)
    assert agent.invoke({"messages": [HumanMessage("thanks")]}, config)["messages"][-1].content == "You said: thanks"

    # 3. The Stop button: cancel a run from another thread.
    config = {"configurable": {"thread_id": "essay-1"}}
    result: dict[str, Any] = {}
    run = threading.Thread(target=lambda: result.update(agent.invoke({"messages": [HumanMessage("essay")]}, config)))
    run.start()
    time.sleep(0.2)
    assert agent.cancel("essay-1", reason="user pressed Stop")
    run.join()
    final = result["messages"][-1]
    assert final.response_metadata["run_control"] == "cancelled", final
    print("cancel:", final.content)
    conn.close()
    print("OK: one payout for four approvals; the deadline and the cancel ended runs with every tool call answered")


if __name__ == "__main__":
    main()
