"""The crash matrix with human review: a worker SIGKILLed at each step boundary of a run that pauses for review and
is resumed, the thread continued in a new process, on SQLite (and PostgreSQL when a server can be started), under
``invoke`` and ``ainvoke``.

Kill points (``review_crash_worker.KILL_POINTS``): the interrupt raised but not saved; saved, before the reply; the
approval validated but not saved; the approval saved, before ``pay`` starts; inside ``pay`` before its effect; after
its effect; after its result is recorded.

Invariants at every kill point: the approved tool's effect happened at most once (exactly once, since the run is
driven to its end); the decision applied exactly once (one review record for the call, naming its reviewer; one
answer of the call); every tool call answered exactly once in the conversation; a call that died inside the tool
surfaced to the reconcile policy (the in-doubt interrupt), never ran again silently.
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.helpers import WorkerProcess
from tests.ledger.conftest import Database, expect_killed
from tests.ledger.review_crash_worker import KILL_POINTS
from tests.run_control.helpers import assert_paired

WORKER = Path(__file__).with_name("review_crash_worker.py")
BEFORE_REVIEW = {"before_interrupt_saved", "after_interrupt_saved"}
"""Kill points of the first run (no decision yet): the new process must ask the reviewer."""
IN_DOUBT = {"inside_tool", "after_effect"}
"""Kill points after which ``pay`` is in doubt (started, no result)."""

pytestmark = pytest.mark.timeout(300)


def approve(reviewer: str) -> dict[str, Any]:
    return {"decisions": [{"type": "approve", "reviewer": reviewer}]}


def crash(db: Database, mode: str, thread: str, point: str) -> int:
    """Run ``thread`` in a new worker told to die at ``point``; the worker's exit status."""
    worker = WorkerProcess(WORKER, [db.kind, db.target, mode], f"review-crash-{thread}")
    try:
        assert "ready" in worker.read()
        if point in BEFORE_REVIEW:
            worker.send(op="start", thread=thread, kill=point)
        else:
            paused = worker.ask(op="start", thread=thread)
            [pending] = paused["interrupts"]
            assert pending["value"]["action_requests"][0]["name"] == "pay"
            worker.send(op="resume", thread=thread, id=pending["id"], decision=approve("first-reviewer"), kill=point)
        return expect_killed(worker, thread)
    finally:
        worker.close()


def reply_to(db: Database, interrupt: dict[str, Any]) -> dict[str, Any]:
    """The new process's reviewer: approves a review; for an in-doubt ``pay``, looks its effect up by its key."""
    value = interrupt["value"]
    if "action_requests" in value:
        return approve("second-reviewer")
    assert value["type"] == "tool_call_in_doubt"
    ref = value["tool_call"]["args"]["ref"]
    if value["idempotency_key"] in db.effects("pay", ref):
        return {"type": "done", "result": f"paid 10 for {ref}"}
    return {"type": "retry"}


def continue_all(db: Database, mode: str, threads: dict[str, str]) -> list[dict[str, Any]]:
    worker = WorkerProcess(WORKER, [db.kind, db.target, mode], f"review-continue-{mode}")
    rows = []
    try:
        assert "ready" in worker.read()
        for thread, point in threads.items():
            out = worker.ask(op="continue", thread=thread)
            asked: list[str] = []
            while out["interrupts"]:
                [interrupt] = out["interrupts"]
                asked.append("review" if "action_requests" in interrupt["value"] else "in doubt")
                out = worker.ask(op="resume", thread=thread, id=interrupt["id"], decision=reply_to(db, interrupt))
            rows.append(check(db, thread, point, asked, out))
    finally:
        worker.close()
    return rows


def check(db: Database, thread: str, point: str, asked: list[str], final: dict[str, Any]) -> dict[str, Any]:
    """The invariants of one kill point; the row of the matrix."""
    call_id = f"pay-{thread}"
    effects = db.effects("pay", thread)
    assert len(effects) == 1, (point, effects)  # at most once, and here exactly once
    assert ("in doubt" in asked) == (point in IN_DOUBT), (point, asked)
    assert asked.count("review") <= 1, (point, asked)
    if point not in BEFORE_REVIEW and point != "after_resume_accepted":
        assert "review" not in asked, (point, asked)  # a saved decision is never asked for again
    review = final["review"]
    assert list(review) == [call_id], (point, review)  # one decision, for the one call
    assert review[call_id]["decision"] == "approve", (point, review)
    reviewer = review[call_id]["reviewer"]["id"]
    assert reviewer == ("second-reviewer" if "review" in asked else "first-reviewer"), (point, review)
    messages = [_message(*m) for m in final["messages"]]
    assert_paired(messages)
    answers = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == [call_id], (point, final["messages"])
    assert final["last"] == f"done: paid 10 for {thread}", (point, final)
    return {"point": point, "asked": "+".join(asked) or "-", "pay runs": len(effects), "answers": len(answers),
            "reviewer": reviewer}


def _message(kind: str, content: Any, call_id: str | None, calls: list[str]) -> Any:
    if kind == "tool":
        return ToolMessage(content, tool_call_id=call_id or "")
    if kind == "human":
        return HumanMessage(content)
    return AIMessage(content, tool_calls=[{"name": "t", "args": {}, "id": i, "type": "tool_call"} for i in calls])


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_crash_matrix_with_human_review(database: Database, mode: str) -> None:
    # thread ids unique on the server the tool-call crash matrix uses too
    threads = {f"review-{database.kind}-{mode}-{point}": point for point in KILL_POINTS}
    with ThreadPoolExecutor(min(len(threads), 8)) as pool:  # at most 8 workers at once: a load other tests survive
        statuses = list(pool.map(lambda item: crash(database, mode, *item), threads.items()))
    assert statuses == [-signal.SIGKILL] * len(threads), statuses
    rows = continue_all(database, mode, threads)
    print(f"\ncrash matrix with human review: {database.kind}, {mode} (pid {os.getpid()})")
    print(f"{'kill point':<24} {'where':<50} {'new process asked':<18} {'pay':>4} {'answers':>8}  decided by")
    for row in rows:
        print(f"{row['point']:<24} {KILL_POINTS[row['point']]:<50} {row['asked']:<18} {row['pay runs']:>4} "
              f"{row['answers']:>8}  {row['reviewer']}")
