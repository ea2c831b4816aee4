"""The async benchmark: ``ainvoke`` per-invoke time, run in a child process.

Why a child process: a case may deadlock (see README.md, "async results"). A deadlocked ``ainvoke`` leaves
worker threads blocked forever; in a child process they can be abandoned (``os._exit``) without disturbing the
sync measurements or hanging the interpreter at exit. The parent runs ``python -m bench.async_bench --json
...`` and reads one JSON document from its stdout.

Cases (no checkpointer):

* ``bare``: the bare loop with ``await bound.ainvoke(...)`` / ``await add.ainvoke(...)``.
* ``hand[async]``, N = 0, 1, 10: the hand-built graph with async nodes, calling the hooks' async twins inline.
* ``mk``, N = 0: ``create_agent`` without middleware.
* ``inline``, N = 0: the minimal hand-built graph, tools called inline (no ``ToolNode``).
* ``mk[async]``, N = 1, 10: no-ops defining the async twins too (no sync/async bridging).
* ``mk[flow]``, N = 1, 10: the same no-ops with their wrap hooks written once, as flows.
* ``mk[sync]``, N = 1, 5, 10: the issue's sync-only no-ops (every sync hook bridged to a worker thread).

Every case is first checked with one ``ainvoke`` under a timeout, each on a fresh event loop (its own default
executor); a case that times out is reported as a deadlock and left out of the timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["AsyncCase", "AsyncReport", "run_async_benchmark"]


@dataclass
class AsyncCase:
    key: str
    kind: str
    variant: str
    n: int
    status: str
    """``ok``, ``deadlock`` (the checked ainvoke timed out) or ``error``."""
    detail: str = ""
    median_us: float = 0.0
    p10_us: float = 0.0
    p90_us: float = 0.0
    min_batch_mean_us: float = 0.0
    samples: int = 0


@dataclass
class AsyncReport:
    cases: list[AsyncCase]
    executor_workers: int
    """Default ``ThreadPoolExecutor`` size of an event loop on this machine: ``min(32, cpu_count + 4)``."""
    error: str = ""


def _default_workers() -> int:
    return min(32, (os.cpu_count() or 1) + 4)


def _subjects() -> list[Any]:
    from bench.fixtures import AsyncNoopMiddleware, FlowNoopMiddleware, NoopMiddleware
    from bench.subjects import bare_subject, hand_subject, inline_subject, mk_subject

    subjects = [bare_subject(is_async=True), inline_subject(False, is_async=True)]
    for n in (0, 1, 10):
        subjects.append(hand_subject(n, False, is_async=True, cls=AsyncNoopMiddleware))
        subjects[-1].variant = "async"
    subjects.append(mk_subject(0, False, is_async=True))
    for n in (1, 10):
        subjects.append(mk_subject(n, False, is_async=True, cls=AsyncNoopMiddleware))
        subjects[-1].variant = "async"
        subjects.append(mk_subject(n, False, is_async=True, cls=FlowNoopMiddleware))
        subjects[-1].variant = "flow"
    for n in (1, 5, 10):
        subjects.append(mk_subject(n, False, is_async=True, cls=NoopMiddleware))
        subjects[-1].variant = "sync"
    return subjects


def _worker(rounds: int, batch: int, warmup: int, gc_during_batches: bool, timeout: float) -> AsyncReport:
    from bench.fixtures import check_messages
    from bench.timing import Settings, measure_async

    subjects = _subjects()
    cases: dict[str, AsyncCase] = {}
    healthy = []
    for subject in subjects:
        case = AsyncCase(subject.key, subject.kind, subject.variant, subject.n, "ok")
        cases[subject.key] = case
        loop = asyncio.new_event_loop()
        inp, cfg = subject.args(1)[0]
        try:
            messages = loop.run_until_complete(asyncio.wait_for(subject.arun(inp, cfg), timeout))
            check_messages(messages, subject.key)
            healthy.append(subject)
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()
        except TimeoutError:
            case.status = "deadlock"
            case.detail = f"one ainvoke did not finish within {timeout:g} s"
            # Abandon the loop: its executor threads are blocked for good (os._exit at the end).
        except Exception as exc:  # report, do not hide
            case.status = "error"
            case.detail = f"{type(exc).__name__}: {exc}"
        subject.reset()

    settings = Settings(rounds=rounds, batch=batch, warmup=warmup, gc_during_batches=gc_during_batches)
    loop = asyncio.new_event_loop()
    stats = loop.run_until_complete(measure_async(healthy, settings))
    for key, st in stats.items():
        case = cases[key]
        case.median_us, case.p10_us, case.p90_us = st.median_us, st.p10_us, st.p90_us
        case.min_batch_mean_us, case.samples = st.min_batch_mean_us, len(st.samples)
    return AsyncReport(list(cases.values()), _default_workers())


def run_async_benchmark(
    rounds: int, batch: int, warmup: int, gc_during_batches: bool, progress: Callable[[str], None]
) -> AsyncReport:
    """Run the worker in a child process and parse its report."""
    cmd = [
        sys.executable,
        "-m",
        "bench.async_bench",
        "--json",
        "--rounds",
        str(rounds),
        "--batch",
        str(batch),
        "--warmup",
        str(warmup),
    ]
    if not gc_during_batches:
        cmd.append("--no-gc")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    progress("async benchmark: child process started")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=240, check=False)
    except subprocess.TimeoutExpired:
        return AsyncReport([], _default_workers(), error="the async benchmark process timed out after 240 s")
    progress(f"async benchmark: done in {time.perf_counter() - t0:.1f} s")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return AsyncReport(
            [],
            _default_workers(),
            error=f"exit code {proc.returncode}; stderr:\n{proc.stderr.strip()[-3000:]}",
        )
    data = json.loads(lines[-1])
    return AsyncReport([AsyncCase(**c) for c in data["cases"]], data["executor_workers"], data.get("error", ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.async_bench", description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds before a checked ainvoke is a deadlock")
    parser.add_argument("--no-gc", action="store_true", help="disable the GC during timed batches")
    parser.add_argument("--json", action="store_true", help="print one JSON document (used by `python -m bench`)")
    args = parser.parse_args(argv)
    report = _worker(args.rounds, args.batch, args.warmup, not args.no_gc, args.timeout)
    if args.json:
        print(json.dumps(asdict(report)))
    else:
        from bench.report import format_async

        print(format_async(report))
    sys.stdout.flush()
    sys.stderr.flush()
    # Threads of a deadlocked case never finish; a normal exit would join them forever.
    os._exit(0)


if __name__ == "__main__":
    main()
