"""Runs per second through PostgreSQL, 1/8/32 concurrent threads, 0 and 10 no-op middlewares; checkpoint bytes per run.

    .venv/bin/python -m bench.postgres [--runs N]

Starts its own throwaway server (Debian's ``postgresql`` binaries, as the tests do: ``tests/pg_server.py``; or
``MIDDLEWARE_KIT_PG_DSN``). Each run is one ``ainvoke`` on a fresh thread: a tool call, the tool, a final answer
(two model calls, scripted). Agents use ``AsyncPostgresSaver`` on an ``AsyncConnectionPool`` sized to the
concurrency. Baselines measured in the same process, at the same concurrency: the same agent on ``InMemorySaver``,
and a bare-Python loop (no graph, no hooks: ``bound_model.ainvoke`` / ``tool.ainvoke``). Ratios are runs/s of the
PostgreSQL agent over each baseline. Bytes per run are read back from LangGraph's tables (``checkpoints``: checkpoint
and metadata; ``checkpoint_blobs`` and ``checkpoint_writes``: the blobs), averaged over the threads of one setting.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bench.fixtures import FINAL_TEXT, TOOL_ARGS, AsyncNoopMiddleware, add, check_messages, noops
from middleware_kit import create_agent
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.pg_server import running_postgres

CONCURRENCY = (1, 8, 32)
MIDDLEWARES = (0, 10)
_ids = itertools.count()


def reply(messages: list[BaseMessage]) -> AIMessage:
    """Stateless script (safe under concurrency): the tool call, then the final text once the tool answered."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(FINAL_TEXT)
    return AIMessage("", tool_calls=[tool_call("add", TOOL_ARGS, id="call_bench")])


def build(n: int, checkpointer: Any) -> Any:
    return create_agent(ScriptedChatModel(default=reply), [add], middleware=noops(n, AsyncNoopMiddleware),
                        checkpointer=checkpointer)


async def throughput(run: Callable[[str], Awaitable[None]], concurrency: int, runs: int) -> float:
    """Runs per second: ``runs`` runs on fresh threads, ``concurrency`` at a time."""
    todo = iter(range(runs))

    async def lane() -> None:
        for _ in todo:
            await run(f"t{next(_ids)}")

    await asyncio.gather(*(lane() for _ in range(min(concurrency, 4))))  # warm-up (connections, caches)
    todo = iter(range(runs))
    start = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return runs / (time.perf_counter() - start)


def agent_runner(agent: Any, prefix: str = "") -> Callable[[str], Awaitable[None]]:
    async def run(thread: str) -> None:
        out = await agent.ainvoke({"messages": [HumanMessage("What is 1 + 2?")]},
                                  {"configurable": {"thread_id": prefix + thread}})
        check_messages(out["messages"], "bench.postgres")

    return run


def bare_runner() -> Callable[[str], Awaitable[None]]:
    bound = ScriptedChatModel(default=reply).bind_tools([add])

    async def run(thread: str) -> None:
        messages: list[BaseMessage] = [HumanMessage("What is 1 + 2?")]
        while True:
            ai = await bound.ainvoke(messages)
            messages.append(ai)
            if not isinstance(ai, AIMessage) or not ai.tool_calls:
                break
            for call in ai.tool_calls:
                out = await add.ainvoke(call["args"])
                messages.append(ToolMessage(str(out), tool_call_id=call["id"], name=call["name"]))
        check_messages(messages, "bench.postgres/bare")

    return run


BYTES_SQL = """
SELECT
  (SELECT count(*) FROM checkpoints WHERE thread_id LIKE %(p)s) AS n,
  (SELECT coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)), 0)
     FROM checkpoints WHERE thread_id LIKE %(p)s) AS meta,
  (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs WHERE thread_id LIKE %(p)s) AS blobs,
  (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes WHERE thread_id LIKE %(p)s) AS writes,
  (SELECT count(DISTINCT thread_id) FROM checkpoints WHERE thread_id LIKE %(p)s) AS threads
"""


async def main(runs: int) -> None:
    with running_postgres() as dsn:
        async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
            await saver.setup()
        print(f"PostgreSQL on {dsn}; {runs} runs per cell (each: 2 model calls + 1 tool, a fresh thread)\n")
        header = f"{'threads':>7} {'mw':>3} {'pg runs/s':>10} {'inmem runs/s':>13} {'bare runs/s':>12} " \
                 f"{'pg/inmem':>9} {'pg/bare':>8}"
        print(header)
        print("-" * len(header))
        for concurrency in CONCURRENCY:
            bare = await throughput(bare_runner(), concurrency, runs)
            kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
            async with AsyncConnectionPool(dsn, min_size=concurrency, max_size=concurrency, kwargs=kwargs,
                                           open=False) as pool:
                pg_saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
                for n in MIDDLEWARES:
                    pg = await throughput(agent_runner(build(n, pg_saver), f"c{concurrency}-m{n}-"), concurrency, runs)
                    mem = await throughput(agent_runner(build(n, InMemorySaver())), concurrency, runs)
                    print(f"{concurrency:>7} {n:>3} {pg:>10.1f} {mem:>13.1f} {bare:>12.1f} {pg / mem:>9.2f} "
                          f"{pg / bare:>8.3f}", flush=True)
                    if concurrency == CONCURRENCY[0]:
                        async with pool.connection() as conn:
                            cur = await conn.execute(BYTES_SQL, {"p": f"c{concurrency}-m{n}-%"})
                            row = await cur.fetchone()
                        assert row is not None
                        values = list(row.values()) if isinstance(row, dict) else list(row)
                        count, meta, blobs, writes, threads = (int(v) for v in values)
                        bytes_per_run[n] = (count / threads, meta / threads, blobs / threads, writes / threads)
        print("\nCheckpoint bytes written per run (PostgreSQL tables, averaged over threads):")
        print(f"{'mw':>3} {'checkpoints':>11} {'ckpt+meta B':>12} {'blobs B':>8} {'writes B':>9} {'total B':>8}")
        for mw, (puts, size, blob_size, write_size) in bytes_per_run.items():
            total = size + blob_size + write_size
            print(f"{mw:>3} {puts:>11.1f} {size:>12.0f} {blob_size:>8.0f} {write_size:>9.0f} {total:>8.0f}")


bytes_per_run: dict[int, tuple[float, float, float, float]] = {}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per cell (default 200)")
    args = parser.parse_args()
    asyncio.run(main(args.runs))
