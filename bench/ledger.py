"""Cost of the call ledger per tool call, and per model call a middleware makes for itself: the default (on) against
``ledger=False``, in memory, on SQLite and on PostgreSQL, measured in the same run.

    .venv/bin/python -m bench.ledger [--runs N] [--rounds R] [--no-postgres]

Each invoke is one turn on a fresh thread: one tool call, the tool, a final answer (two scripted model calls), so
``on - off`` is the ledger's cost per tool call (one ``claim`` write before the tool, one ``finish`` write after).
Two agents per checkpointer, both with run control's default, measured interleaved (``bench.run_control.measure``:
round-robin batches, the order reversed every other round, the median per-invoke time of the rounds):

- ``off``: ``create_agent(model, [add], checkpointer=saver, ledger=False)``;
- ``on``: ``create_agent(model, [add], checkpointer=saver)``.

SQLite: ``SqliteSaver`` on a file in a temporary directory (WAL). PostgreSQL: ``PostgresSaver`` on one connection to a
throwaway server (``tests/pg_server.py``, or ``MIDDLEWARE_KIT_PG_DSN``); its statements and round trips per invoke
are counted from libpq's trace (``bench.run_control.traffic``). "ledger writes alone" times the two writes of a call
(``claim`` and ``finish``) on each store without the agent around them.

Middleware model calls: the same, with agents whose one middleware makes one model call of its own per turn
(``invoke_internal`` in ``before_model``, as the summarizer does) and whose model answers without tools, so
``on - off`` is the ledger's cost per internal call (one read of ``recorded_answer`` before the call, one
``record_answer`` write after); "alone" times that read and write on each store.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from bench.run_control import add, measure, one_invoke, reply, traffic
from middleware_kit import AgentMiddleware, create_agent
from middleware_kit._engine.internal_calls import invoke_internal
from middleware_kit.testing import ScriptedChatModel


def agents(saver: Any) -> dict[str, Any]:
    model = ScriptedChatModel(default=reply)
    return {
        "off": create_agent(model, [add], checkpointer=saver, ledger=False),
        "on": create_agent(model, [add], checkpointer=saver),
    }


def report(label: str, timings: dict[str, dict[str, float]]) -> None:
    for clock, t in timings.items():
        off, on = t["off"], t["on"]
        print(f"{label} {clock:4}: off {off * 1e6:7.0f} us  on {on * 1e6:7.0f} us  |  per tool call "
              f"{(on - off) * 1e6:+6.0f} us  on/off {on / off:5.3f}", flush=True)


def writes_alone(saver: Any, runs: int) -> float:
    """Seconds per tool call spent on the ledger's own writes (``claim`` + ``finish`` of a new call, the result a
    small ``ToolMessage``), the median of 5 batches of ``runs``: a figure the noise of whole invokes cannot hide."""
    from langchain_core.messages import ToolMessage

    from middleware_kit.ledger import CallKey, ledger_store

    store = ledger_store(saver)
    kind, data = store.serde.dumps_typed(ToolMessage("3", tool_call_id="call_bench", name="add"))
    batches = []
    for b in range(6):
        started = time.perf_counter()
        for i in range(runs):
            key = CallKey(f"alone{b}", f"tools:{i}", "call_bench")
            store.claim(key, "add")
            store.finish(key, 1, kind, data)
        if b:  # the first batch warms up (tables created, statements prepared)
            batches.append((time.perf_counter() - started) / runs)
    return statistics.median(batches)


class OneInternalCall(AgentMiddleware):
    """One model call of its own per turn, as a summarizer or a classifier makes (sync only: the bench invokes)."""

    def __init__(self) -> None:
        super().__init__()
        self.model = ScriptedChatModel(["fine"], cycle=True)

    def before_model(self, state: Any, runtime: Any) -> None:
        invoke_internal(self.model, [HumanMessage("Is this request fine?")], site="OneInternalCall.before_model")


def model_call_agents(saver: Any) -> dict[str, Any]:
    """Agents answering "done" at once (no tool call), after one middleware model call."""
    model = ScriptedChatModel(["done"], cycle=True)
    return {
        "off": create_agent(model, checkpointer=saver, middleware=[OneInternalCall()], ledger=False),
        "on": create_agent(model, checkpointer=saver, middleware=[OneInternalCall()]),
    }


def model_calls_alone(saver: Any, runs: int) -> float:
    """Seconds per internal call spent on the ledger's own read and write (``recorded_answer`` finding nothing,
    ``record_answer`` of a small ``AIMessage``), the median of 5 batches of ``runs``."""
    from langchain_core.messages import AIMessage

    from middleware_kit.ledger import ModelCallKey, ledger_store

    store = ledger_store(saver)
    kind, data = store.serde.dumps_typed(AIMessage("fine"))
    batches = []
    for b in range(6):
        started = time.perf_counter()
        for i in range(runs):
            key = ModelCallKey(f"alone{b}", f"model:{i}", "OneInternalCall.before_model", 0)
            store.recorded_answer(key)
            store.record_answer(key, "digest", kind, data)
        if b:
            batches.append((time.perf_counter() - started) / runs)
    return statistics.median(batches)


def model_call_report(label: str, saver: Any, runs: int, rounds: int) -> dict[str, Any]:
    """Whole turns with one middleware model call, on against off, then the ledger's read and write alone."""
    found = model_call_agents(saver)
    timings = measure({k: one_invoke(v) for k, v in found.items()}, runs, rounds)
    for clock, t in timings.items():
        off, on = t["off"], t["on"]
        print(f"{label} {clock:4}: off {off * 1e6:7.0f} us  on {on * 1e6:7.0f} us  |  per internal call "
              f"{(on - off) * 1e6:+6.0f} us  on/off {on / off:5.3f}", flush=True)
    print(f"{label} read + write alone: {model_calls_alone(saver, runs * 5) * 1e6:.1f} us per internal call")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="invokes per batch (default 40)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL measurement")
    args = parser.parse_args()

    saver = InMemorySaver()
    memory = agents(saver)
    report("in memory ", measure({k: one_invoke(v) for k, v in memory.items()}, args.runs, args.rounds))
    print(f"in memory  ledger writes alone: {writes_alone(saver, args.runs * 5) * 1e6:.1f} us per tool call")
    model_call_report("in memory  model call", saver, args.runs, args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(Path(tmp) / "bench.sqlite", check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        lite = SqliteSaver(conn)
        sqlite = agents(lite)
        report("SQLite    ", measure({k: one_invoke(v) for k, v in sqlite.items()}, args.runs, args.rounds))
        print(f"SQLite     ledger writes alone: {writes_alone(lite, args.runs * 5) * 1e6:.1f} us per tool call")
        model_call_report("SQLite     model call", lite, args.runs, args.rounds)
        conn.close()
    if not args.no_postgres:
        postgres(args.runs, args.rounds)


def postgres(runs: int, rounds: int) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    from tests.pg_server import PostgresUnavailable, running_postgres

    try:
        with running_postgres() as dsn, PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
            pg = agents(saver)
            report("PostgreSQL", measure({k: one_invoke(v) for k, v in pg.items()}, max(runs // 3, 10), rounds))
            print(f"PostgreSQL ledger writes alone: {writes_alone(saver, runs) * 1e6:.1f} us per tool call")
            (off_stmts, off_trips), (on_stmts, on_trips) = (traffic(saver, pg[k], 20)[:2] for k in ("off", "on"))
            print(f"PostgreSQL per tool call: statements off {off_stmts:g}, on {on_stmts:g} "
                  f"({on_stmts - off_stmts:+g}); round trips off {off_trips:g}, on {on_trips:g} "
                  f"({on_trips - off_trips:+g})")
            inside = model_call_report("PostgreSQL model call", saver, max(runs // 3, 10), rounds)
            (off_stmts, off_trips), (on_stmts, on_trips) = (traffic(saver, inside[k], 20)[:2] for k in ("off", "on"))
            print(f"PostgreSQL per internal call: statements off {off_stmts:g}, on {on_stmts:g} "
                  f"({on_stmts - off_stmts:+g}); round trips off {off_trips:g}, on {on_trips:g} "
                  f"({on_trips - off_trips:+g})")
    except PostgresUnavailable as exc:
        print(f"PostgreSQL: skipped ({exc})")


if __name__ == "__main__":
    main()
