"""Many workers on one PostgreSQL: LangGraph's own checkpointer and store, no home-made coordination.

Needs a real server (the session fixture ``postgres_dsn`` starts one; skipped outside CI when it cannot).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres import PostgresStore
from langgraph.types import Command

from middleware_kit import before_model, create_agent
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.limits import ModelCallLimitMiddleware
from middleware_kit.testing import ScriptedChatModel
from tests.helpers import WorkerProcess
from tests.integration.pg_worker import THREAD_LIMIT, reply

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("pg_worker.py")

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def db(postgres_dsn: str) -> Iterator[str]:
    """The shared database, with LangGraph's tables migrated once (``setup()``) and an empty ``tool_runs``."""
    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        saver.setup()
    with PostgresStore.from_conn_string(postgres_dsn) as store:
        store.setup()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS tool_runs (ref text NOT NULL, worker text NOT NULL, pid int)")
    yield postgres_dsn


def tool_runs(dsn: str, prefix: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT ref, worker FROM tool_runs WHERE ref LIKE %s ORDER BY ref", (prefix + "%",))
        return [(str(r[0]), str(r[1])) for r in rows.fetchall()]


class Worker(WorkerProcess):
    """One worker process (see tests.helpers.WorkerProcess)."""

    def __init__(self, dsn: str, name: str) -> None:
        super().__init__(WORKER, [dsn, name], name)


def start_workers(dsn: str, n: int, prefix: str) -> list[Worker]:
    workers = [Worker(dsn, f"{prefix}{i}") for i in range(n)]
    for w in workers:
        assert w.read() == {"ready": w.name}
    return workers


def run_phase(workers: list[Worker], jobs: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each worker serves its own queue of commands in order; the workers run concurrently."""

    def serve(i: int) -> list[dict[str, Any]]:
        return [workers[i].ask(**cmd) for cmd in jobs.get(i, [])]

    with ThreadPoolExecutor(len(workers)) as pool:
        return [answer for answers in pool.map(serve, range(len(workers))) for answer in answers]


def test_forty_threads_interrupted_in_one_worker_resumed_in_another(db: str) -> None:
    n_workers, threads = 4, [f"w{i:02d}" for i in range(40)]
    workers = start_workers(db, n_workers, "worker")
    try:
        def phase(shift: int, **fields: Any) -> dict[str, dict[str, Any]]:
            jobs: dict[int, list[dict[str, Any]]] = {}
            for i, t in enumerate(threads):
                cmd = {k: (v(i, t) if callable(v) else v) for k, v in fields.items()}
                jobs.setdefault((i + shift) % n_workers, []).append({"thread": t, **cmd})
            return {a["thread"]: a for a in run_phase(workers, jobs)}

        # Turn 1: worker i%4 starts and stops for review; worker (i+1)%4 approves; the tool runs there.
        started = phase(0, op="start", text=lambda i, t: f"pay thread {t}")
        for i, t in enumerate(threads):
            [request] = started[t]["interrupts"]
            assert request["action_requests"][0]["args"] == {"ref": f"{t}/1"}
            assert started[t]["worker"] == f"worker{i % n_workers}"
        resumed = phase(1, op="resume", decision="approve")
        assert all(a["last"] == f"done: transferred {t}/1" and not a["interrupts"] for t, a in resumed.items())
        # Turn 2 on a third worker (3rd model call), decided on a fourth: approve even threads, reject odd ones.
        # The thread limit (3 calls, counted in the checkpoint) stops the run before a 4th model call.
        again = phase(2, op="start", text=lambda i, t: f"again {t}")
        assert all(a["interrupts"][0]["action_requests"][0]["args"] == {"ref": f"{t}/2"} for t, a in again.items())
        final = phase(3, op="resume", decision=lambda i, t: "approve" if i % 2 == 0 else "reject")
    finally:
        for w in workers:
            w.close()

    for i, t in enumerate(threads):
        assert final[t]["last"].startswith("Model call limits exceeded"), final[t]
        expected = [(f"{t}/1", f"worker{(i + 1) % n_workers}")]
        if i % 2 == 0:
            expected.append((f"{t}/2", f"worker{(i + 3) % n_workers}"))
        assert tool_runs(db, f"{t}/") == expected  # every approved call ran exactly once, where it was approved

    with PostgresSaver.from_conn_string(db) as saver:
        agent = create_agent(ScriptedChatModel(default=reply), middleware=[ModelCallLimitMiddleware(thread_limit=3)],
                             checkpointer=saver)
        for t in threads:
            state = agent.get_state({"configurable": {"thread_id": t}})
            assert state.values["thread_model_call_count"] == THREAD_LIMIT
            assert not state.next and not state.interrupts
            model_answers = [m for m in state.values["messages"] if isinstance(m, AIMessage)]
            assert len(model_answers) == THREAD_LIMIT + 1  # 3 model answers + the limit's closing message


def test_a_worker_killed_mid_run_loses_nothing(db: str) -> None:
    workers = start_workers(db, 3, "k")
    a, b, c = workers
    try:
        threads = ["killed-1", "killed-2"]
        for t in threads:
            assert a.ask(op="start", thread=t, text=f"pay thread {t}")["interrupts"]
        # b approves killed-1 and dies inside the tool, its side effect not committed yet.
        b.send(op="resume", thread="killed-1", decision="approve", hang=True)
        assert b.read() == {"hanging": "killed-1/1"}
        os.kill(b.proc.pid, signal.SIGKILL)
        assert b.proc.wait(timeout=20) == -signal.SIGKILL
        # The approval was checkpointed before the tool step: c runs the thread on, with no new review.
        out = c.ask(op="continue", thread="killed-1")
        assert out["last"] == "done: transferred killed-1/1" and not out["interrupts"]
        # Meanwhile the other thread is untouched by the crash.
        out = c.ask(op="resume", thread="killed-2", decision="approve")
        assert out["last"] == "done: transferred killed-2/1"
        # Resuming a finished thread again does not run its tool again.
        assert a.ask(op="continue", thread="killed-1")["last"] == "done: transferred killed-1/1"
    finally:
        for w in workers:
            w.close()
    assert tool_runs(db, "killed-1/") == [("killed-1/1", "k2")]
    assert tool_runs(db, "killed-2/") == [("killed-2/1", "k2")]


async def test_async_saver_interrupt_in_one_agent_resume_in_another(db: str) -> None:
    """``AsyncPostgresSaver``: two agents (two connections, as two async workers would have) share a thread."""
    ran: list[str] = []
    lock = threading.Lock()

    def make_agent(saver: Any) -> Any:
        from langchain_core.tools import tool

        @tool
        def transfer(ref: str) -> str:
            """Move money."""
            with lock:
                ran.append(ref)
            return f"transferred {ref}"

        return create_agent(ScriptedChatModel(default=reply), [transfer],
                            middleware=[ModelCallLimitMiddleware(thread_limit=THREAD_LIMIT),
                                        HumanInTheLoopMiddleware({"transfer": True})], checkpointer=saver)

    config: Any = {"configurable": {"thread_id": "async-1"}}
    async with AsyncPostgresSaver.from_conn_string(db) as s1, AsyncPostgresSaver.from_conn_string(db) as s2:
        first, second = make_agent(s1), make_agent(s2)
        out = await first.ainvoke({"messages": [HumanMessage("pay thread async-1")]}, config)
        assert out["__interrupt__"][0].value["action_requests"][0]["args"] == {"ref": "async-1/1"}
        out = await second.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
        assert out["messages"][-1].content == "done: transferred async-1/1"
        state = await first.aget_state(config)
        assert state.values["thread_model_call_count"] == 2
    assert ran == ["async-1/1"]


def test_agent_on_postgres_store_reaches_it_from_hooks(db: str) -> None:
    @before_model
    def remember(state: Any, runtime: Any) -> dict[str, Any] | None:
        item = runtime.store.get(("users", "ada"), "profile")
        runtime.store.put(("users", "ada"), "visits", {"n": len(state["messages"])})
        return {"messages": [SystemMessage(f"profile: {item.value['name'] if item else 'unknown'}")]}

    with PostgresStore.from_conn_string(db) as store, PostgresSaver.from_conn_string(db) as saver:
        store.put(("users", "ada"), "profile", {"name": "Ada Lovelace"})
        model = ScriptedChatModel(["hello"])
        agent = create_agent(model, middleware=[remember], store=store, checkpointer=saver)
        agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "store-1"}})
        assert [m.content for m in model.calls[0].messages] == ["hi", "profile: Ada Lovelace"]
        visits = store.get(("users", "ada"), "visits")
        assert visits is not None and visits.value == {"n": 1}
