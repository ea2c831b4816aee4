"""Run control across worker processes on SQLite and PostgreSQL: the plain agent's racing approvals, concurrent turns
and stale resumes; racing resumes, 4 workers x 40 threads with concurrent new turns and resumes, a worker SIGKILLed
while it holds a lease, a stalled worker whose lease was taken over, and a cancel from another process.

The PostgreSQL tests use the session server of ``tests/integration/conftest.py`` (skipped outside CI when none can be
started)."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.helpers import WorkerProcess, shared_checkpoints
from tests.run_control.helpers import assert_paired

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("worker.py")
TTL = 2.0

pytestmark = pytest.mark.timeout(180)


class Worker(WorkerProcess):
    """One worker process (see tests.helpers.WorkerProcess)."""

    def __init__(self, kind: str, target: str, name: str, mode: str, ttl: str = str(TTL)) -> None:
        super().__init__(WORKER, [kind, target, name, mode, ttl], name)


class Database:
    """The shared database of one test: where the workers point, and its ``tool_runs`` ledger."""

    def __init__(self, kind: str, target: str) -> None:
        self.kind, self.target = kind, target

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            with sqlite3.connect(self.target, timeout=60) as conn:
                return list(conn.execute(sql, args).fetchall())
        import psycopg

        with psycopg.connect(self.target, autocommit=True) as conn:
            cur = conn.execute(sql.replace("?", "%s"), args)
            return list(cur.fetchall()) if cur.description else []

    def runs(self, prefix: str) -> list[tuple[str, str]]:
        if self.kind == "sqlite":
            with sqlite3.connect(self.target + ".ledger", timeout=60) as conn:
                rows = conn.execute("SELECT ref, worker FROM tool_runs WHERE ref LIKE ? ORDER BY ref",
                                    (prefix + "%",)).fetchall()
            return [(str(r[0]), str(r[1])) for r in rows]
        rows = self.execute("SELECT ref, worker FROM tool_runs WHERE ref LIKE ? ORDER BY ref", (prefix + "%",))
        return [(str(r[0]), str(r[1])) for r in rows]

    def rows(self, thread: str) -> int:
        """Rows LangGraph stored for ``thread`` (its checkpoints and pending writes)."""
        writes = "writes" if self.kind == "sqlite" else "checkpoint_writes"
        return sum(int(self.execute(f"SELECT count(*) FROM {table} WHERE thread_id = ?", (thread,))[0][0])
                   for table in ("checkpoints", writes))

    def history(self, thread: str) -> list[Any]:
        from langgraph.checkpoint.memory import InMemorySaver  # noqa: F401  (the saver below matches the kind)

        if self.kind == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = sqlite3.connect(self.target, timeout=60, check_same_thread=False)
            try:
                tup = SqliteSaver(conn).get_tuple({"configurable": {"thread_id": thread}})
            finally:
                conn.close()
        else:
            from langgraph.checkpoint.postgres import PostgresSaver

            with PostgresSaver.from_conn_string(self.target) as saver:
                tup = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert tup is not None
        return list(tup.checkpoint["channel_values"]["messages"])


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        target = str(tmp_path / "shared.sqlite")
        shared_checkpoints("sqlite", target)
        with sqlite3.connect(target + ".ledger") as ledger:
            ledger.execute("CREATE TABLE tool_runs (ref TEXT NOT NULL, worker TEXT NOT NULL, pid INTEGER)")
        yield Database("sqlite", target)
        return
    dsn: str = request.getfixturevalue("postgres_dsn")
    shared_checkpoints("postgres", dsn)
    db = Database("postgres", dsn)
    db.execute("CREATE TABLE IF NOT EXISTS tool_runs (ref text NOT NULL, worker text NOT NULL, pid int)")
    yield db


def start_workers(db: Database, n: int, prefix: str, mode: str = "invoke", *, plain: bool = False) -> list[Worker]:
    """``n`` workers; ``plain``: serving the plain agent (no ``run_control`` argument), else ``RunControl(on_conflict=
    "wait", ttl=TTL)``."""
    workers = [Worker(db.kind, db.target, f"{prefix}{i}", mode, "plain" if plain else str(TTL)) for i in range(n)]
    for w in workers:
        assert w.read() == {"ready": w.name}
    return workers


def close_all(workers: list[Worker]) -> None:
    for w in workers:
        w.close()


def run_phase(workers: list[Worker], jobs: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each worker serves its own queue in order; the workers run concurrently."""

    def serve(i: int) -> list[dict[str, Any]]:
        return [workers[i].ask(**cmd) for cmd in jobs.get(i, [])]

    with ThreadPoolExecutor(len(workers)) as pool:
        return [a for answers in pool.map(serve, range(len(workers))) for a in answers]


# -- the plain agent: create_agent(model, tools, middleware=[HumanInTheLoopMiddleware(...)], checkpointer=saver) ------
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_plain_agent_racing_approvals_across_processes_run_the_tool_once(database: Database, mode: str) -> None:
    workers = start_workers(database, 4, f"pr{mode[0]}", mode, plain=True)
    try:
        for trial in range(4):
            thread = f"plain-{mode}-race-{trial}"
            assert workers[trial % 4].ask(op="start", thread=thread, text=f"{thread} pay")["interrupts"]
            for w in workers:  # all four approve at once
                w.send(op="resume", thread=thread, id=None)
            answers = [w.read() for w in workers]
            applied = [a for a in answers if "error" not in a]
            assert len(applied) == 1, answers
            assert applied[0]["last"] == f"done: paid {thread} pay"
            assert {a["error"] for a in answers if "error" in a} <= {"ThreadBusyError", "InterruptAlreadyResolvedError"}
            assert database.runs(thread) == [(f"{thread} pay", applied[0]["worker"])]
            assert_paired(database.history(thread))
    finally:
        close_all(workers)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_plain_agent_concurrent_turns_across_processes_lose_nothing(database: Database, mode: str) -> None:
    """Two workers send a new turn to one thread at once: one runs (and pauses for review); the other is refused
    (ThreadBusyError while the first runs, PendingApprovalError after) and nothing of it is stored; resent once the
    review is answered, it runs. Both turns end up in the history, each with its own answer."""
    workers = start_workers(database, 2, f"pc{mode[0]}", mode, plain=True)
    try:
        for trial in range(3):
            thread = f"plain-{mode}-turns-{trial}"
            for i, w in enumerate(workers):
                w.send(op="start", thread=thread, text=f"{thread} w{i}")
            answers = [w.read() for w in workers]
            ran = [a for a in answers if "error" not in a]
            refused = [(i, a) for i, a in enumerate(answers) if "error" in a]
            assert len(ran) == 1 and len(refused) == 1, answers
            assert refused[0][1]["error"] in {"ThreadBusyError", "PendingApprovalError"}, answers
            assert [m.content for m in database.history(thread) if isinstance(m, HumanMessage)] == \
                [ran[0]["interrupts"][0]["args"]["ref"]]  # the refused turn left no trace
            assert workers[0].ask(op="resume", thread=thread, id=None)["last"].startswith("done: paid")
            loser, _ = refused[0]
            assert workers[loser].ask(op="start", thread=thread, text=f"{thread} w{loser}")["interrupts"]
            assert workers[1 - loser].ask(op="resume", thread=thread, id=None)["last"].startswith("done: paid")
            history = database.history(thread)
            assert_paired(history)
            assert sorted(m.content for m in history if isinstance(m, HumanMessage)) == \
                [f"{thread} w0", f"{thread} w1"]
    finally:
        close_all(workers)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_plain_agent_stale_resumes_across_processes_run_nothing(database: Database, mode: str) -> None:
    a, b, c = workers = start_workers(database, 3, f"ps{mode[0]}", mode, plain=True)
    thread = f"plain-{mode}-stale"
    try:
        never = a.ask(op="resume", thread=f"{thread}-never", id=None)
        assert never["error"] == "NothingToResumeError" and "has nothing to resume" in never["message"]
        assert database.rows(f"{thread}-never") == 0  # no fresh run, nothing stored
        paused = b.ask(op="start", thread=thread, text=f"{thread} pay")
        interrupt_id = paused["interrupts"][0]["id"]
        assert c.ask(op="resume", thread=thread, id=interrupt_id)["last"] == f"done: paid {thread} pay"
        stored = database.rows(thread)
        for late in (a.ask(op="resume", thread=thread, id=None), b.ask(op="resume", thread=thread, id=interrupt_id)):
            assert late["error"] == "InterruptAlreadyResolvedError", late
            assert f"Interrupt '{interrupt_id}' of thread '{thread}' was already resolved by run" in late["message"]
        unknown = a.ask(op="resume", thread=thread, id="0" * 32)
        assert unknown["error"] == "UnknownInterruptError" and "is not pending" in unknown["message"]
        assert database.rows(thread) == stored  # no silent replay: nothing was written
        assert database.runs(thread) == [(f"{thread} pay", c.name)]
    finally:
        close_all(workers)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_racing_resumes_across_processes_apply_once(database: Database, mode: str) -> None:
    workers = start_workers(database, 4, f"r{mode[0]}", mode)
    try:
        for trial in range(4):
            thread = f"{mode}-race-{trial}"
            paused = workers[trial % 4].ask(op="start", thread=thread, text=f"{thread} pay")
            assert paused["interrupts"], paused
            for w in workers:  # all four approve at once (a double click, four replicas)
                w.send(op="resume", thread=thread, id=None)
            answers = [w.read() for w in workers]
            applied = [a for a in answers if "error" not in a]
            assert len(applied) == 1, answers
            assert applied[0]["last"] == f"done: paid {thread} pay"
            assert {a["error"] for a in answers if "error" in a} == {"InterruptAlreadyResolvedError"}
            assert database.runs(thread) == [(f"{thread} pay", applied[0]["worker"])]
    finally:
        close_all(workers)


@pytest.fixture
def pg_database(postgres_dsn: str) -> Database:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        saver.setup()
    db = Database("postgres", postgres_dsn)
    db.execute("CREATE TABLE IF NOT EXISTS tool_runs (ref text NOT NULL, worker text NOT NULL, pid int)")
    return db


def test_four_workers_forty_threads_concurrent_turns_and_resumes(pg_database: Database) -> None:
    """PostgreSQL. Turn 1 starts in worker i%4. Then, at once, worker i+1 approves it and worker i+2 sends turn 2
    (rejected with PendingApprovalError if it comes first, and resent). Then workers i+3 and i both approve turn 2
    by id. Timed from the moment the workers are ready."""
    database = pg_database
    n, threads = 4, [f"load{i:02d}" for i in range(40)]
    workers = start_workers(database, n, "load")
    started_at = time.monotonic()
    try:
        first = run_phase(workers, {w: [{"op": "start", "thread": t, "text": f"{t} one"}
                                        for i, t in enumerate(threads) if i % n == w] for w in range(n)})
        ids = {a["thread"]: a["interrupts"][0]["id"] for a in first}
        assert len(ids) == 40
        jobs: dict[int, list[dict[str, Any]]] = {w: [] for w in range(n)}
        for i, t in enumerate(threads):
            jobs[(i + 1) % n].append({"op": "resume", "thread": t, "id": ids[t]})
            jobs[(i + 2) % n].append({"op": "start", "thread": t, "text": f"{t} two"})
        second = run_phase(workers, jobs)
        rejected = [a["thread"] for a in second if a.get("error") == "PendingApprovalError"]
        assert all("error" not in a or a["error"] == "PendingApprovalError" for a in second), second
        resent = run_phase(workers, {0: [{"op": "start", "thread": t, "text": f"{t} two"} for t in rejected]})
        turn2 = {a["thread"]: a for a in second if "error" not in a and a["interrupts"]}
        turn2.update({a["thread"]: a for a in resent})
        assert set(turn2) == set(threads), "a second turn was lost"
        jobs = {w: [] for w in range(n)}
        for i, t in enumerate(threads):
            iid = turn2[t]["interrupts"][0]["id"]
            jobs[(i + 3) % n].append({"op": "resume", "thread": t, "id": iid})
            jobs[i % n].append({"op": "resume", "thread": t, "id": iid})
        third = run_phase(workers, jobs)
        took = time.monotonic() - started_at
    finally:
        close_all(workers)
    for t in threads:
        outcomes = [a for a in third if a["thread"] == t]
        assert sorted(a.get("error", "applied") for a in outcomes) == ["InterruptAlreadyResolvedError", "applied"]
        assert [ref for ref, _ in database.runs(t + " ")] == [f"{t} one", f"{t} two"]  # each approved call once
        messages = database.history(t)
        assert_paired(messages)
        assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage] * 2
        assert [m.content for m in messages if isinstance(m, HumanMessage)] == [f"{t} one", f"{t} two"]
    print(f"4 workers x 40 threads: {took:.1f}s of turns and resumes")  # a figure to read, not a test of speed


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_worker_killed_holding_the_lease_is_taken_over_after_the_ttl(database: Database, mode: str) -> None:
    workers = start_workers(database, 3, f"k{mode[0]}", mode)
    a, b, c = workers
    thread = f"{mode}-killed"
    try:
        assert a.ask(op="start", thread=thread, text=f"{thread} pay")["interrupts"]
        b.send(op="resume", thread=thread, id=None, hang=True)
        assert b.read() == {"hanging": f"{thread} pay"}
        killed_at = time.monotonic()
        os.kill(b.proc.pid, signal.SIGKILL)
        assert b.proc.wait(timeout=20) == -signal.SIGKILL
        # c waits in line (on_conflict="wait") until the dead worker's lease expires, then finishes the thread
        out = c.ask(op="continue", thread=thread)
        assert time.monotonic() - killed_at >= TTL * 0.5, "the lease of the dead worker was not respected"
        assert out["last"] == f"done: paid {thread} pay" and not out["interrupts"], out
        again = a.ask(op="resume", thread=thread, id=None)
        assert again["error"] == "InterruptAlreadyResolvedError"
    finally:
        close_all(workers)
    assert database.runs(thread) == [(f"{thread} pay", f"k{mode[0]}2")]  # the killed run's effect never committed


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_stalled_worker_whose_lease_was_taken_over_writes_nothing(database: Database, mode: str) -> None:
    """Worker a is SIGSTOPped inside the approved tool (a stalled process: a GC pause, a frozen VM) for longer than
    its lease's ttl; worker b takes the thread over and finishes the turn. When a runs again it writes nothing to
    the thread (its writes are fenced) and its caller gets LeaseLostError."""
    a, b = workers = start_workers(database, 2, f"f{mode[0]}", mode)
    thread = f"{mode}-stalled"
    try:
        assert a.ask(op="start", thread=thread, text=f"{thread} pay")["interrupts"]
        a.send(op="resume", thread=thread, id=None, stall=True)
        assert a.read() == {"stalled": f"{thread} pay"}
        os.kill(a.proc.pid, signal.SIGSTOP)
        try:
            out = b.ask(op="continue", thread=thread)  # waits for a's lease to expire, then runs the thread on
            assert out["last"] == f"done: paid {thread} pay" and not out["interrupts"], out
            stored = database.rows(thread)
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        late = a.read()
        assert late["error"] == "LeaseLostError", late
        assert f"lost the lease of thread '{thread}'" in late["message"]
        assert database.rows(thread) == stored  # a wrote nothing after it lost the lease
        history = database.history(thread)
        assert_paired(history)
        assert [type(m) for m in history] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    finally:
        close_all(workers)
    assert sorted(w for _, w in database.runs(thread)) == [a.name, b.name]  # a's side effect happened before it
    # stalled: fencing keeps the thread consistent, it cannot undo what a tool did outside it


def test_a_run_is_cancelled_from_another_process(database: Database) -> None:
    workers = start_workers(database, 2, "c")
    a, b = workers
    thread = "cancel-remote"
    try:
        assert a.ask(op="start", thread=thread, text=f"{thread} pay")["interrupts"]
        a.send(op="resume", thread=thread, id=None, hang=True)
        assert a.read() == {"hanging": f"{thread} pay"}
        # the run is stuck inside a sync tool: the cancel is recorded for it, and the lease row says so
        assert b.ask(op="cancel", thread=thread) == {"worker": "c1", "cancelled": True}
        cancel = database.execute("SELECT cancel FROM middleware_kit_run_leases WHERE thread_id = ?", (thread,))
        assert cancel == [("cancelled by request",)]
    finally:
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait(timeout=20)
        close_all(workers)


def test_a_cancel_through_the_database_stops_a_run_of_another_saver(database: Database) -> None:
    """Two savers on the shared database (as two processes have): the canceller has no handle of the run, only the
    lease row; the run's heartbeat reads the request and the run ends cancelled, with its thread consistent."""
    import threading

    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    from middleware_kit.run_control import RunControl, cancel_run
    from tests.run_control.helpers import SlowModel, build, cfg

    def saver_pair() -> tuple[Any, Any, list[Any]]:
        if database.kind == "sqlite":
            conns = [sqlite3.connect(database.target, timeout=60, check_same_thread=False) for _ in range(2)]
            return SqliteSaver(conns[0]), SqliteSaver(conns[1]), conns
        managers = [PostgresSaver.from_conn_string(database.target) for _ in range(2)]
        return managers[0].__enter__(), managers[1].__enter__(), managers

    runner_saver, canceller_saver, resources = saver_pair()
    try:
        model = SlowModel(default="a long answer", delay=1.5)
        agent = build(runner_saver, RunControl(poll_interval=0.1), model=model, review=False)
        result: dict[str, Any] = {}
        run = threading.Thread(target=lambda: result.update(
            agent.invoke({"messages": [HumanMessage("write")]}, cfg("remote-cancel"))))
        run.start()
        assert model.in_call.wait(10)  # the run holds the thread, inside its 1.5 s model call
        assert cancel_run(canceller_saver, "remote-cancel", reason="stop from elsewhere") is not None
        run.join(timeout=30)
        final = result["messages"][-1]
        assert final.response_metadata["run_control"] == "cancelled" and "stop from elsewhere" in final.content
        assert cancel_run(canceller_saver, "remote-cancel") is None  # released: nothing to cancel now
        out = agent.invoke({"messages": [HumanMessage("again")]}, cfg("remote-cancel"))
        assert out["messages"][-1].content == "a long answer"
        assert_paired(out["messages"])
    finally:
        for resource in resources:
            if database.kind == "sqlite":
                resource.close()
            else:
                resource.__exit__(None, None, None)
