"""Cost of run control per invoke: the lease (and the run-control checks), in memory and on PostgreSQL.

    .venv/bin/python -m bench.run_control [--runs N] [--rounds R]

Each invoke is one turn on a fresh thread: a tool call, the tool, a final answer (two scripted model calls). Three
agents per checkpointer, measured interleaved in the same process (round-robin batches; the median per-invoke time
of the rounds is reported):

- ``plain``: ``create_agent(model, [tool], checkpointer=...)``;
- ``checks``: the same with ``middleware=controlled_middleware()`` (``RunControlMiddleware`` + ``RunControlGuard``),
  not wrapped: the checks without a lease;
- ``controlled``: ``with_run_control(checks, RunControl())``: lease taken before the run, admission read, release.

``lease`` = controlled / checks (the cost of the lease per invoke: the issue's target is within 5% in memory);
``total`` = controlled / plain (lease + checks). Both clocks are reported (wall, and this process's CPU time, which a
busy machine disturbs less), and "lease operations alone" times just what the lease adds to an invoke (take it,
admit the input, release it) on existing threads, a figure the noise of whole invokes cannot hide.

PostgreSQL: ``PostgresSaver`` on one connection to a throwaway server started here (``tests/pg_server.py``; or
``MIDDLEWARE_KIT_PG_DSN``); the lease costs three single statements per invoke there (take it; a one-row probe of
LangGraph's ``checkpoint_writes`` for a pending interrupt; release), plus a heartbeat thread per run.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import create_agent
from middleware_kit.run_control import RunControl, controlled_middleware, with_run_control
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
    checks = create_agent(model, [add], middleware=controlled_middleware(), checkpointer=saver)
    return {
        "plain": create_agent(model, [add], checkpointer=saver),
        "checks": checks,
        "controlled": with_run_control(checks, RunControl()),
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
        plain, checks, controlled = t["plain"], t["checks"], t["controlled"]
        print(f"{label} {clock:4}: plain {plain * 1e6:7.0f} us  checks {checks * 1e6:7.0f} us  controlled "
              f"{controlled * 1e6:7.0f} us  |  lease = controlled/checks {controlled / checks:5.3f}  "
              f"total = controlled/plain {controlled / plain:5.3f}")


def lease_alone(agent: Any, threads: int, runs: int) -> float:
    """Seconds per invoke spent on the lease itself: take it, admit new input (the checkpoint read included),
    release it, on ``threads`` existing threads (the median of 5 batches of ``runs``)."""
    from middleware_kit.run_control.agent import admit_flow
    from middleware_kit.run_control.control import RunHandle
    from middleware_kit.run_control.lease import backend_for, drive

    backend = backend_for(agent.checkpointer)
    inp = {"messages": [HumanMessage("add")]}
    names = [f"lease{next(_ids)}" for _ in range(threads)]
    for name in names:
        agent.invoke(inp, {"configurable": {"thread_id": name}})
    batches = []
    for _ in range(5):
        started = time.perf_counter()
        for i in range(runs):
            config: Any = {"configurable": {"thread_id": names[i % threads]}}
            handle = RunHandle(names[i % threads], f"r{i}", agent.run_control, backend)
            drive(agent._lease(handle), backend)
            drive(admit_flow(inp, handle), agent._target(backend, config))
            backend.release(handle.thread_id, handle.run_id)
        batches.append((time.perf_counter() - started) / runs)
    return statistics.median(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="invokes per batch (default 60)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL measurement")
    args = parser.parse_args()

    memory = agents(InMemorySaver())
    timings = measure({k: one_invoke(v) for k, v in memory.items()}, args.runs, args.rounds)
    report("in memory ", timings)
    alone = lease_alone(memory["controlled"], 20, args.runs * 5)
    print(f"in memory  lease operations alone: {alone * 1e6:.1f} us per invoke = "
          f"{alone / timings['cpu']['plain'] * 100:.2f}% of a plain invoke's CPU time")
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
            alone = lease_alone(pg["controlled"], 20, args.runs)
            print(f"PostgreSQL lease operations alone: {alone * 1e6:.1f} us per invoke = "
                  f"{alone / timings['wall']['plain'] * 100:.1f}% of a plain invoke's wall time")
    except PostgresUnavailable as exc:
        print(f"PostgreSQL: skipped ({exc})")


if __name__ == "__main__":
    main()
