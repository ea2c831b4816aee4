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
``total`` = controlled / plain (lease + checks). PostgreSQL: ``PostgresSaver`` on one connection to a throwaway
server started here (``tests/pg_server.py``; or ``MIDDLEWARE_KIT_PG_DSN``); the lease costs three statements per
invoke there (take, admission read of the checkpoint, release).
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


def measure(subjects: dict[str, Callable[[], None]], runs: int, rounds: int) -> dict[str, float]:
    """Median over ``rounds`` of the mean seconds per call in a batch of ``runs``, subjects interleaved."""
    for fn in subjects.values():  # warm-up
        for _ in range(max(runs // 4, 5)):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in subjects}
    for r in range(rounds):
        order = list(subjects.items())
        if r % 2:
            order.reverse()
        for name, fn in order:
            started = time.perf_counter()
            for _ in range(runs):
                fn()
            samples[name].append((time.perf_counter() - started) / runs)
    return {name: statistics.median(values) for name, values in samples.items()}


def report(label: str, timings: dict[str, float]) -> None:
    plain, checks, controlled = timings["plain"], timings["checks"], timings["controlled"]
    print(f"{label}: plain {plain * 1e6:8.0f} us  checks {checks * 1e6:8.0f} us  controlled "
          f"{controlled * 1e6:8.0f} us  |  lease = controlled/checks {controlled / checks:5.3f}  "
          f"total = controlled/plain {controlled / plain:5.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="invokes per batch (default 60)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL measurement")
    args = parser.parse_args()

    memory = agents(InMemorySaver())
    report("in memory ", measure({k: one_invoke(v) for k, v in memory.items()}, args.runs, args.rounds))
    if args.no_postgres:
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    from tests.pg_server import PostgresUnavailable, running_postgres

    try:
        with running_postgres() as dsn, PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
            pg = agents(saver)
            report("PostgreSQL", measure({k: one_invoke(v) for k, v in pg.items()}, max(args.runs // 3, 10),
                                         args.rounds))
    except PostgresUnavailable as exc:
        print(f"PostgreSQL: skipped ({exc})")


if __name__ == "__main__":
    main()
