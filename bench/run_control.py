"""Cost of run control per invoke: the default (on) against ``run_control=False``, in memory and on PostgreSQL.

    .venv/bin/python -m bench.run_control [--runs N] [--rounds R] [--no-postgres]

Each invoke is one turn on a fresh thread: a tool call, the tool, a final answer (two scripted model calls). Two
agents per checkpointer, measured interleaved in the same process (round-robin batches, the order reversed every
other round; the median per-invoke time of the rounds is reported):

- ``off``: ``create_agent(model, [tool], checkpointer=saver, run_control=False)``;
- ``on``: ``create_agent(model, [tool], checkpointer=saver)``: run control's default (the lease, admission on the
  checkpoint LangGraph loads, the run's fenced saver, ``RunControlMiddleware`` and ``RunControlGuard``).

``on/off`` is the cost of the default per invoke (the issue's target: at most 1.03 in memory). Both clocks are
reported (wall, and this process's CPU time, which a busy machine disturbs less); "lease operations alone" times
just the lease (take it, release it) on existing threads, a figure the noise of whole invokes cannot hide.

PostgreSQL: ``PostgresSaver`` on one connection to a throwaway server started here (``tests/pg_server.py``; or
``MIDDLEWARE_KIT_PG_DSN``). Besides the timings, the statements and round trips each invoke sends to the server are
counted from libpq's own trace of the connection (:func:`count_traffic`), for ``off`` and ``on``. The runs are
shorter than the first heartbeat, so no renewal is counted: the difference is what run control adds outside the
heartbeat (the issue's target: at most one round trip).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import create_agent
from middleware_kit.testing import ScriptedChatModel, tool_call

_ids = itertools.count()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def reply(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage("done")
    return AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="call_bench")])


def agents(saver: Any) -> dict[str, Any]:
    model = ScriptedChatModel(default=reply)
    return {
        "off": create_agent(model, [add], checkpointer=saver, run_control=False),
        "on": create_agent(model, [add], checkpointer=saver),
    }


def one_invoke(agent: Any) -> Callable[[], None]:
    def run() -> None:
        out = agent.invoke({"messages": [HumanMessage("add")]}, {"configurable": {"thread_id": f"b{next(_ids)}"}})
        if out["messages"][-1].content != "done":
            raise SystemExit(f"benchmark agent misbehaved: {out['messages']}")

    return run


def measure(
    subjects: dict[str, Callable[[], None]], runs: int, rounds: int
) -> dict[str, dict[str, float]]:
    """Per clock (``wall``: ``perf_counter``; ``cpu``: this process's CPU time, less sensitive to a loaded
    machine): the median over ``rounds`` of the mean seconds per call in a batch of ``runs``, subjects
    interleaved (the order reversed every other round)."""
    for fn in subjects.values():  # warm-up
        for _ in range(max(runs // 4, 5)):
            fn()
    samples: dict[str, dict[str, list[float]]] = {"wall": {n: [] for n in subjects}, "cpu": {n: [] for n in subjects}}
    for r in range(rounds):
        order = list(subjects.items())
        if r % 2:
            order.reverse()
        for name, fn in order:
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(runs):
                fn()
            samples["wall"][name].append((time.perf_counter() - wall) / runs)
            samples["cpu"][name].append((time.process_time() - cpu) / runs)
    return {clock: {n: statistics.median(v) for n, v in by.items()} for clock, by in samples.items()}


def report(label: str, timings: dict[str, dict[str, float]]) -> None:
    for clock, t in timings.items():
        off, on = t["off"], t["on"]
        print(f"{label} {clock:4}: off {off * 1e6:7.0f} us  on {on * 1e6:7.0f} us  |  on/off {on / off:5.3f}")


def lease_alone(agent: Any, threads: int, runs: int) -> float:
    """Seconds per invoke spent on the lease itself: take it, release it, on ``threads`` existing threads (the
    median of 5 batches of ``runs``)."""
    from middleware_kit.run_control.control import RunHandle
    from middleware_kit.run_control.lease import backend_for, drive

    backend = backend_for(agent.checkpointer)
    names = [f"lease{next(_ids)}" for _ in range(threads)]
    for name in names:
        agent.invoke({"messages": [HumanMessage("add")]}, {"configurable": {"thread_id": name}})
    batches = []
    for _ in range(5):
        started = time.perf_counter()
        for i in range(runs):
            handle = RunHandle(names[i % threads], f"r{i}", agent.run_control, backend)
            handle.leased(drive(agent._lease(handle), backend))
            backend.release(handle.thread_id, handle.run_id)
        batches.append((time.perf_counter() - started) / runs)
    return statistics.median(batches)


def count_traffic(trace: Iterable[str]) -> tuple[int, int, int]:
    """(statements, round trips, ``Sync`` + ``Flush`` messages) in a libpq trace (``PGconn.trace``: one message a
    line, ``F`` from the client, ``B`` from the server).

    - a statement is an ``Execute`` message;
    - a round trip is a wait: the client sends, then reads the server's reply, i.e. each turn from ``F`` lines to a
      ``B`` line. Statements pipelined together (psycopg's ``pipeline()``, as ``PostgresSaver.put`` sends a
      checkpoint and its blobs) are one round trip however many they are;
    - ``Sync`` + ``Flush`` is the count this bench reported before: it counts a pipeline's end twice (psycopg ends a
      pipeline with a ``Sync`` and then a ``Flush``, sent together and answered by one reply).
    """
    statements = turns = marks = 0
    previous = ""
    for line in trace:
        fields = line.split("\t")
        if len(fields) < 4:
            continue
        direction, kind = fields[1], fields[3].split(" ")[0].strip()
        if direction == "F":
            statements += kind == "Execute"
            marks += kind in ("Sync", "Flush")
        elif direction == "B" and previous == "F":
            turns += 1
        previous = direction
    return statements, turns, marks


def traced(conn: Any, work: Callable[[], Any]) -> tuple[int, int, int]:
    """:func:`count_traffic` of what ``work()`` sends on the psycopg connection ``conn``."""
    import tempfile

    with tempfile.TemporaryFile("w+") as log:
        conn.pgconn.trace(log.fileno())
        try:
            work()
        finally:
            conn.pgconn.untrace()
        log.seek(0)
        return count_traffic(log)


def traffic(saver: Any, agent: Any, runs: int) -> tuple[float, float, float]:
    """(statements, round trips, ``Sync`` + ``Flush``) per invoke of ``agent`` on ``saver``'s connection."""
    invoke = one_invoke(agent)
    invoke()  # statements prepared, tables created

    def work() -> None:
        for _ in range(runs):
            invoke()

    return cast(tuple[float, float, float], tuple(n / runs for n in traced(saver.conn, work)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="invokes per batch (default 60)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL measurement")
    args = parser.parse_args()

    memory = agents(InMemorySaver())
    timings = measure({k: one_invoke(v) for k, v in memory.items()}, args.runs, args.rounds)
    report("in memory ", timings)
    alone = lease_alone(memory["on"], 20, args.runs * 5)
    print(f"in memory  lease operations alone: {alone * 1e6:.1f} us per invoke = "
          f"{alone / timings['cpu']['off'] * 100:.2f}% of an invoke's CPU time (off)")
    if args.no_postgres:
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    from tests.pg_server import PostgresUnavailable, running_postgres

    try:
        with running_postgres() as dsn, PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
            pg = agents(saver)
            timings = measure({k: one_invoke(v) for k, v in pg.items()}, max(args.runs // 3, 10), args.rounds)
            report("PostgreSQL", timings)
            alone = lease_alone(pg["on"], 20, args.runs)
            print(f"PostgreSQL lease operations alone: {alone * 1e6:.1f} us per invoke = "
                  f"{alone / timings['wall']['off'] * 100:.1f}% of an invoke's wall time (off)")
            off, on = (traffic(saver, pg[k], 20) for k in ("off", "on"))
            for name, i in (("statements", 0), ("round trips", 1), ("Sync+Flush messages", 2)):
                print(f"PostgreSQL per invoke: {name} off {off[i]:g}, on {on[i]:g} ({on[i] - off[i]:+g})")
    except PostgresUnavailable as exc:
        print(f"PostgreSQL: skipped ({exc})")


if __name__ == "__main__":
    main()
