"""Run control on PostgreSQL costs at most one extra round trip per run (outside the heartbeat).

The lease's first try travels with the run's first checkpoint read (pipelined: one round trip), its release is the
one statement run control adds on its own. Counted, not timed: libpq's trace of the saver's connection
(``bench.run_control.count_traffic``), with ``run_control=False`` as the baseline, on all four ways to hand
LangGraph a PostgreSQL saver (a ``Connection`` or a ``ConnectionPool`` under ``invoke``, an ``AsyncConnection`` or an
``AsyncConnectionPool`` under ``ainvoke``). The same savers then show the lease still does its job on that path: a
second run on a busy thread is rejected naming the holder, and a waiting run reads the thread only once it holds it
(no turn lost), renewing nothing before.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection, Connection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from bench.run_control import traced
from middleware_kit import create_agent
from middleware_kit.run_control import RunControl, ThreadBusyError
from middleware_kit.run_control.lease import backend_for
from tests.run_control.helpers import SlowModel, call, cfg

pytestmark = pytest.mark.timeout(120)

KINDS = ["connection", "pool", "async_connection", "async_pool"]
KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
_ids = itertools.count()


def answer(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(f"answer to {messages[-1].content}")


@contextlib.asynccontextmanager
async def pg_saver(kind: str, dsn: str) -> AsyncIterator[tuple[Any, Any]]:
    """(saver, the one psycopg connection it talks through): pools hold a single connection, so it can be traced."""
    if kind == "connection":
        with Connection.connect(dsn, **KWARGS) as conn:
            yield PostgresSaver(conn), conn
    elif kind == "pool":
        with ConnectionPool(dsn, min_size=1, max_size=1, kwargs=KWARGS, open=False) as pool:
            with pool.connection() as conn:
                traced_conn = conn
            yield PostgresSaver(pool), traced_conn  # type: ignore[arg-type]
    elif kind == "async_connection":
        async with await AsyncConnection.connect(dsn, **KWARGS) as aconn:
            yield AsyncPostgresSaver(aconn), aconn
    else:
        async with AsyncConnectionPool(dsn, min_size=1, max_size=1, kwargs=KWARGS, open=False) as apool:
            async with apool.connection() as aconn:
                traced_aconn = aconn
            yield AsyncPostgresSaver(apool), traced_aconn  # type: ignore[arg-type]


def mode_of(kind: str) -> str:
    return "ainvoke" if kind.startswith("async") else "invoke"


@pytest.fixture(scope="module")
def db(postgres_dsn: str) -> str:
    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        saver.setup()
    return postgres_dsn


async def counted(conn: Any, mode: str, runs: Callable[[], Any]) -> tuple[int, int, int]:
    """``bench.run_control.traced`` of ``runs`` (a coroutine function under ``ainvoke``, driven on this loop)."""
    if mode == "invoke":
        return await asyncio.to_thread(traced, conn, runs)
    loop = asyncio.get_running_loop()
    return await asyncio.to_thread(traced, conn, lambda: asyncio.run_coroutine_threadsafe(runs(), loop).result())


@pytest.mark.parametrize("kind", KINDS)
async def test_run_control_adds_at_most_one_round_trip_per_run(kind: str, db: str) -> None:
    runs = 3
    async with pg_saver(kind, db) as (saver, conn):
        mode = mode_of(kind)
        model: Any = SlowModel(default=answer)
        agents = {"off": create_agent(model, [], checkpointer=saver, run_control=False),
                  "on": create_agent(model, [], checkpointer=saver)}
        assert backend_for(saver).reads_with_lease
        for agent in agents.values():  # tables created, statements prepared
            await call(agent, mode, {"messages": [HumanMessage("warm")]}, cfg(f"rt{next(_ids)}"))
        traffic: dict[str, tuple[int, int, int]] = {}
        for name, agent in agents.items():
            threads = [f"rt{next(_ids)}" for _ in range(runs)]

            def invoke_all(agent: Any = agent, threads: list[str] = threads) -> None:
                for t in threads:
                    out = agent.invoke({"messages": [HumanMessage(t)]}, cfg(t))
                    assert out["messages"][-1].content == f"answer to {t}"

            async def ainvoke_all(agent: Any = agent, threads: list[str] = threads) -> None:
                for t in threads:
                    out = await agent.ainvoke({"messages": [HumanMessage(t)]}, cfg(t))
                    assert out["messages"][-1].content == f"answer to {t}"

            traffic[name] = await counted(conn, mode, invoke_all if mode == "invoke" else ainvoke_all)
        (off_statements, off_trips, _), (on_statements, on_trips, _) = traffic["off"], traffic["on"]
        assert off_trips > 0 and off_statements > 0, traffic  # the trace saw the runs
        assert on_trips - off_trips <= runs, f"{kind}: {traffic} (statements, round trips, Sync+Flush in {runs} runs)"
        assert on_statements - off_statements <= 2 * runs, traffic  # the lease and its release


@pytest.mark.parametrize("kind", KINDS)
async def test_a_busy_thread_is_refused_at_the_pipelined_first_read(kind: str, db: str) -> None:
    model = SlowModel(default=answer, delay=0.6)
    async with pg_saver(kind, db) as (saver, _):
        mode, thread = mode_of(kind), f"busy{next(_ids)}"
        agent = create_agent(model, [], checkpointer=saver)
        first = asyncio.create_task(call(agent, mode, {"messages": [HumanMessage("a")]}, cfg(thread)))
        await model.reached()
        with pytest.raises(ThreadBusyError) as info:
            await call(agent, mode, {"messages": [HumanMessage("b")]}, cfg(thread))
        await first
        assert info.value.thread_id == thread and info.value.holder
        out = await call(agent, mode, {"messages": [HumanMessage("c")]}, cfg(thread))
        assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)] == ["a", "c"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_waiting_run_reads_the_thread_once_it_holds_it(kind: str, db: str) -> None:
    """The second run's pipelined read came before the first run's answer; it waits (several heartbeats, none of
    which renews a lease it does not hold yet), then reads again: both turns are kept."""
    model = SlowModel(default=answer, delay=0.5)
    control = RunControl(on_conflict="wait", poll_interval=0.05, ttl=3.0)
    async with pg_saver(kind, db) as (saver, _):
        mode, thread = mode_of(kind), f"wait{next(_ids)}"
        agent = create_agent(model, [], checkpointer=saver, run_control=control)
        first = asyncio.create_task(call(agent, mode, {"messages": [HumanMessage("a")]}, cfg(thread)))
        await model.reached()
        second = await call(agent, mode, {"messages": [HumanMessage("b")]}, cfg(thread))
        await first
        assert [m.content for m in second["messages"]] == ["a", "answer to a", "b", "answer to b"]
