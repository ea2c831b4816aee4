"""The crash matrix: a worker process SIGKILLed at each step boundary around a tool call, the thread continued in a
new process, on SQLite (and PostgreSQL when a server can be started), under ``invoke`` and ``ainvoke``.

Kill points: before ``pay``'s start is recorded, after it and before the effect, between the effect and the
return, after the result is recorded; a parallel sibling dying after ``pay`` finished, ``pay`` dying after its
sibling finished; ``pay`` approved by a reviewer (human in the loop) dying after its effect; every hook boundary of
the run (before ``before_agent``, each ``before_model`` and ``after_model``, inside each of the model's calls, around
the tool inside ``wrap_tool_call``, in ``after_agent``). The crash matrix with human review at its own boundaries is
``test_crash_review.py``. Middleware model
calls (a summarizer and a tool selector in the step of the model call): the worker dying inside the summarizer's
call, and right after the selector's answer is recorded (the summarizer's recorded before it; the step not saved).

Invariants at every kill point: each effect happened at most once (``pay`` exactly once once the reviewer decided);
every result reached the model exactly once (its final reply lists each result once); an in-doubt call surfaced to
the reconcile policy (the default one: an interrupt naming the call; ``ship`` is declared idempotent and is retried
without asking); every tool call answered exactly once in the conversation. For middleware model calls: each
answered exactly once across the crash (asked again only when the worker died inside the call, before its answer),
the step's result built on that answer, and the thread's next turn asking anew (no old answer given).

The killed workers of one backend and mode run at once (their lease expiries overlap); about 20 s per backend and
mode on 2 cores.
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
from tests.ledger.crash_worker import KILL_POINTS, MODEL_KILL_POINTS
from tests.run_control.helpers import APPROVE, assert_paired

WORKER = Path(__file__).with_name("crash_worker.py")
PARALLEL = {"sibling_dies", "pay_dies_sibling_done"}
REVIEWED = {"reviewed_after_effect"}
"""Kill points of a thread whose ``pay`` is reviewed first (approved in the worker that then dies)."""
IN_DOUBT = {"after_start", "after_effect", "pay_dies_sibling_done", "reviewed_after_effect"}
"""Kill points after which ``pay`` is in doubt (started, no result)."""

pytestmark = pytest.mark.timeout(300)


def crash(db: Database, mode: str, thread: str, point: str) -> int:
    """Start ``thread`` in a new worker told to die at ``point``; the worker's exit status."""
    worker = WorkerProcess(WORKER, [db.kind, db.target, mode], f"crash-{thread}")
    try:
        assert "ready" in worker.read()
        if point in REVIEWED:  # the review pauses the turn; the approval is what runs the tool
            review = worker.ask(op="start", thread=thread, review=True)
            [pending] = review["interrupts"]
            assert pending["value"]["action_requests"][0]["name"] == "pay"
            worker.send(op="resume", thread=thread, review=True, id=pending["id"], decision=APPROVE, kill=point)
        elif point in MODEL_KILL_POINTS:
            worker.send(op="start", thread=thread, kill=point, models=True)
        else:
            worker.send(op="start", thread=thread, kill=point, parallel=point in PARALLEL)
        return expect_killed(worker, thread)
    finally:
        worker.close()


def decide(db: Database, interrupt: dict[str, Any]) -> dict[str, Any]:
    """The reviewer: looks the in-doubt ``pay`` up where its effect would be (by its idempotency key)."""
    value = interrupt["value"]
    assert value["type"] == "tool_call_in_doubt" and value["options"] == ["retry", "skip", "done"]
    ref = value["tool_call"]["args"]["ref"]
    if value["idempotency_key"] in db.effects("pay", ref):
        return {"type": "done", "result": f"paid {ref}"}
    return {"type": "retry"}


def check(db: Database, thread: str, point: str, first: dict[str, Any], final: dict[str, Any]) -> dict[str, Any]:
    """The invariants of one kill point; the row of the matrix."""
    asked = [i["value"]["tool_call"]["id"] for i in first["interrupts"]]
    assert asked == ([f"pay-{thread}"] if point in IN_DOUBT else []), (point, first)
    assert len(db.effects("pay", thread)) == 1, (point, db.effects("pay", thread))
    keys = [i["value"]["idempotency_key"] for i in first["interrupts"]]
    assert keys in ([], db.effects("pay", thread)), (point, keys)  # the key the tool used, in the new process too
    messages = [_message(*m) for m in final["messages"]]
    assert_paired(messages)
    calls = [str(c["id"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    answers = sorted(str(m.tool_call_id) for m in messages if isinstance(m, ToolMessage))
    assert sorted(calls) == answers
    expected = [f"paid {thread}"] + ([f"shipped {thread}"] if point in PARALLEL else [])
    assert final["last"] == "done: " + " | ".join(expected), (point, final)
    ships = len(db.effects("ship", thread)) if point in PARALLEL else None
    if ships is not None:
        assert ships == 1, (point, ships)
    return {"point": point, "interrupts": len(asked), "pay runs": 1, "ship runs": ships,
            "answers": len(answers), "final": final["last"]}


def model_calls(db: Database, thread: str) -> dict[str, tuple[int, int]]:
    """(asked, answered) of each middleware's own model in ``thread``."""
    return {name: (len(db.effects(name, thread)) - db.effects(name, thread).count("answer"),
                   db.effects(name, thread).count("answer")) for name in ("summarize", "select")}


def check_model_calls(db: Database, worker: WorkerProcess, thread: str, point: str) -> dict[str, Any]:
    """The invariants of a middleware-model-call kill point (the thread continued, then its next turn); the row."""
    final = worker.ask(op="continue", thread=thread, models=True)
    assert final["interrupts"] == [] and final["last"] == f"done: summary of {thread}", (point, final)
    calls = model_calls(db, thread)
    asked_again = point == "mw_summarizer_dies"  # it died before the answer: nothing recorded, asked again
    assert calls == {"summarize": (2 if asked_again else 1, 1), "select": (1, 1)}, (point, calls)
    worker.ask(op="next", thread=thread, models=True)
    after = model_calls(db, thread)
    assert [answered for _, answered in after.values()] == [2, 2], (point, after)  # the next turn: asked anew
    return {"point": point, "summarize": calls["summarize"], "select": calls["select"], "next turn": after}


def _message(kind: str, content: Any, call_id: str | None, calls: list[str]) -> Any:
    if kind == "tool":
        return ToolMessage(content, tool_call_id=call_id or "")
    if kind == "human":
        return HumanMessage(content)
    return AIMessage(content, tool_calls=[{"name": "t", "args": {}, "id": i, "type": "tool_call"} for i in calls])


def continue_all(db: Database, mode: str, threads: dict[str, str]) -> list[dict[str, Any]]:
    worker = WorkerProcess(WORKER, [db.kind, db.target, mode], f"continue-{mode}")
    rows = []
    try:
        assert "ready" in worker.read()
        for thread, point in threads.items():
            if point in MODEL_KILL_POINTS:
                rows.append(check_model_calls(db, worker, thread, point))
                continue
            review = point in REVIEWED
            first = worker.ask(op="continue", thread=thread, review=review)
            final = first
            for interrupt in first["interrupts"]:
                final = worker.ask(op="resume", thread=thread, review=review, id=interrupt["id"],
                                   decision=decide(db, interrupt))
            rows.append(check(db, thread, point, first, final))
    finally:
        worker.close()
    return rows


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_crash_matrix(database: Database, mode: str) -> None:
    threads = {f"{database.kind}-{mode}-{point}": point for point in (*KILL_POINTS, *MODEL_KILL_POINTS)}
    with ThreadPoolExecutor(min(len(threads), 8)) as pool:  # at most 8 workers at once: a load other tests survive
        statuses = list(pool.map(lambda item: crash(database, mode, *item), threads.items()))
    assert statuses == [-signal.SIGKILL] * len(threads), statuses
    rows = continue_all(database, mode, threads)
    print(f"\ncrash matrix: {database.kind}, {mode} (pid {os.getpid()})")
    print(f"{'kill point':<24} {'where':<52} {'in doubt':>8} {'pay':>4} {'ship':>5} {'answers':>8}")
    for row in rows:
        if row["point"] in MODEL_KILL_POINTS:
            continue
        ships = "-" if row["ship runs"] is None else row["ship runs"]
        print(f"{row['point']:<24} {KILL_POINTS[row['point']]:<52} {row['interrupts']:>8} {row['pay runs']:>4} "
              f"{ships:>5} {row['answers']:>8}")
    print(f"{'kill point':<24} {'where (middleware model calls)':<52} {'summarizer':>10} {'selector':>8} "
          f"{'next turn':>9}")
    for row in rows:
        if row["point"] in MODEL_KILL_POINTS:
            (asked, answered), (s_asked, s_answered) = row["summarize"], row["select"]
            print(f"{row['point']:<24} {MODEL_KILL_POINTS[row['point']]:<52} {f'{asked}/{answered}':>10} "
                  f"{f'{s_asked}/{s_answered}':>8} {'asked':>9}")
    print("summarizer, selector: times asked / times answered, across the crash")
