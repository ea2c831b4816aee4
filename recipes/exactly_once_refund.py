"""Exactly-once refunds: a worker killed in the middle of a refund, and a reviewer who decides what happened.

What it shows
    An agent with a ``refund`` tool and a SQLite checkpointer (the call ledger is on by default: it keeps its records
    in the same file). A worker process starts a turn; the model asks for two refunds in one message; the worker
    is killed (``SIGKILL``) right after the payment provider applied the second refund, before the tool returned.
    A new process continues the thread:

    - the refund that had finished is not run again: its recorded result goes to the model;
    - the refund that was in flight is *in doubt*: the run pauses with an interrupt naming the call and its
      idempotency key. The reviewer asks the provider whether a refund exists under that key, and answers
      ``{"type": "done", "result": ...}`` (it did) or ``{"type": "retry"}`` (it did not).

    Each refund reaches the provider once; the model sees each result once.

When to use it
    Any tool whose effect must not happen twice: payments, refunds, emails, deployments. See
    ``docs/exactly_once.md``.

Run it: ``python recipes/exactly_once_refund.py`` (offline; asserts its own outcome, exits non-zero on failure).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.ledger import current_idempotency_key
from middleware_kit.run_control import RunControl
from middleware_kit.testing import ScriptedChatModel, tool_call

THREAD = {"configurable": {"thread_id": "order-1042"}}


class Provider:
    """A payment provider that deduplicates on the idempotency key (a table in its own SQLite file)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("CREATE TABLE IF NOT EXISTS refunds (key TEXT PRIMARY KEY, order_id TEXT, cents INT)")

    def refund(self, key: str, order_id: str, cents: int) -> None:
        self.conn.execute("INSERT OR IGNORE INTO refunds VALUES (?, ?, ?)", (key, order_id, cents))

    def find(self, key: str) -> tuple[str, int] | None:
        row = self.conn.execute("SELECT order_id, cents FROM refunds WHERE key = ?", (key,)).fetchone()
        return None if row is None else (str(row[0]), int(row[1]))

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM refunds").fetchone()[0])


def model(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        results = sorted(str(m.content) for m in messages if isinstance(m, ToolMessage))
        return AIMessage("Done: " + "; ".join(results))
    return AIMessage("", tool_calls=[tool_call("refund", {"order_id": "A-1", "cents": 1500}, id="refund-a"),
                                     tool_call("refund", {"order_id": "B-2", "cents": 900}, id="refund-b")])


def agent(folder: Path, conn: sqlite3.Connection, die_after: str | None = None) -> Any:
    provider = Provider(folder / "provider.sqlite")

    @tool
    def refund(order_id: str, cents: int) -> str:
        """Refund ``cents`` on ``order_id``."""
        key = current_idempotency_key()
        assert key is not None  # the ledger is on: every call has its key
        provider.refund(key, order_id, cents)
        if order_id == die_after:
            os.kill(os.getpid(), signal.SIGKILL)  # the worker dies: the refund happened, the tool never returned
        return f"refunded {cents} cents on {order_id}"

    # The ledger is on by default (a checkpointer). Run control too: a worker killed while it runs the thread holds
    # its lease until the ttl passes (30 s by default); here 2 s, and the next run waits for it instead of failing.
    return create_agent(ScriptedChatModel(default=model), [refund], checkpointer=SqliteSaver(conn),
                        run_control=RunControl(ttl=2.0, on_conflict="wait", wait_timeout=60))


def worker(folder: Path) -> None:
    """The worker that dies: B-2's refund is applied, then the process is killed (A-1's ran beside it)."""
    conn = sqlite3.connect(folder / "agent.sqlite", check_same_thread=False)
    killed = agent(folder, conn, die_after="B-2")
    killed.invoke({"messages": [HumanMessage("Refund both orders")]}, THREAD, durability="sync")
    raise SystemExit("the worker should have been killed inside the refund")


def review(provider: Provider, pending: Any) -> dict[str, Any]:
    """The reviewer: asks the provider what happened under each in-doubt call's idempotency key."""
    decisions: dict[str, Any] = {}
    for interrupt in pending:
        found = provider.find(interrupt.value["idempotency_key"])
        decisions[interrupt.id] = (
            {"type": "done", "result": f"refunded {found[1]} cents on {found[0]}"} if found else {"type": "retry"}
        )
        print(f"in doubt: {interrupt.value['tool_call']['id']} -> {decisions[interrupt.id]['type']}")
    return decisions


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        done = subprocess.run([sys.executable, __file__, "--worker", str(folder)], capture_output=True, text=True,
                              timeout=100)
        assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-2000:])
        provider = Provider(folder / "provider.sqlite")
        print(f"worker killed inside a refund; refunds at the provider: {provider.count()}")

        conn = sqlite3.connect(folder / "agent.sqlite", check_same_thread=False)
        refund_agent = agent(folder, conn)
        paused = refund_agent.invoke(None, THREAD, durability="sync")  # the thread, continued in a new process
        pending = paused["__interrupt__"]
        assert "refund-b" in [p.value["tool_call"]["id"] for p in pending]
        out = refund_agent.invoke(Command(resume=review(provider, pending)), THREAD, durability="sync")
        answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
        print(json.dumps([m.content for m in answers]))
        print(out["messages"][-1].content)
        assert provider.count() == 2, provider.count()
        assert sorted(m.tool_call_id for m in answers) == ["refund-a", "refund-b"]
        assert out["messages"][-1].content == "Done: refunded 1500 cents on A-1; refunded 900 cents on B-2"
        conn.close()
    print("OK: each refund reached the provider once and the model once; the in-doubt one was decided by a reviewer")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(Path(sys.argv[2]))
    else:
        main()
