"""``python -m bench``: the whole benchmark in one run (``--quick`` for a smoke run). See bench/README.md."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import version

from bench.async_bench import run_async_benchmark
from bench.checkpoints import count_checkpoints
from bench.fixtures import NS
from bench.flow_micro import flow_verdict, format_flow_micro, run_flow_micro
from bench.micro import format_micro, run_micro
from bench.report import format_async, format_checkpoints, format_derived, format_detail, format_main_table
from bench.subjects import INLINE_NS, Subject, bare_subject, hand_subject, inline_subject, mk_subject
from bench.time_to_first_token import format_ttft, run_ttft
from bench.timing import Settings, measure_sync

# (rounds, batch, warmup) of the sync part, and of the async part.
FULL = ((30, 24, 40), (6, 25, 10))
QUICK = ((5, 9, 10), (2, 10, 5))


def _progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def _revision() -> str:
    """The commit of the checkout, and whether middleware_kit has uncommitted changes (runs are comparable)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "middleware_kit"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "middleware_kit (no git revision)"
    return f"middleware_kit @ {sha}{' + uncommitted changes in middleware_kit/' if dirty else ''}"


def _header(sync: Settings, gc_note: str, async_part: tuple[int, int, int] | None) -> str:
    packages = ", ".join(f"{p} {version(p)}" for p in ("langgraph", "langchain-core", "langgraph-checkpoint"))
    return (
        "middleware_kit benchmark: one tool round-trip per invoke (model -> tool -> model -> end)\n"
        f"{_revision()}\n"
        f"python {platform.python_version()} ({platform.python_implementation()}), {os.cpu_count()} cpu(s), "
        f"{platform.machine()}; {packages}\n"
        f"sync: {sync.rounds} interleaved rounds x {sync.batch} invokes per subject after {sync.warmup} "
        f"warm-up invokes; each invoke timed with perf_counter; {gc_note}"
        + (
            f"\nasync: {async_part[0]} rounds x {async_part[1]} invokes per case after {async_part[2]} "
            f"warm-up invokes, in a child process"
            if async_part
            else ""
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="middleware_kit overhead benchmark")
    parser.add_argument("--quick", action="store_true", help="a ~15 s smoke run (fewer, shorter rounds)")
    parser.add_argument("--rounds", type=int, help="sync rounds (default 30, quick 5)")
    parser.add_argument("--batch", type=int, help="sync invokes per subject per round (default 24, quick 9)")
    parser.add_argument("--no-gc", action="store_true", help="disable the GC during timed batches")
    parser.add_argument("--skip-async", action="store_true", help="skip the ainvoke benchmark")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="only profile middleware_kit at N=0, 1 and 20 with cProfile, then exit",
    )
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when a target is missed")
    args = parser.parse_args(argv)

    if args.profile:
        from bench.profiling import profile_report

        print(profile_report(invokes=100 if args.quick else 300, progress=_progress))
        return 0

    (rounds, batch, warmup), (a_rounds, a_batch, a_warmup) = QUICK if args.quick else FULL
    settings = Settings(
        rounds=args.rounds or rounds,
        batch=args.batch or batch,
        warmup=warmup,
        gc_during_batches=not args.no_gc,
    )
    gc_note = (
        "GC disabled inside timed batches"
        if args.no_gc
        else "GC enabled (gc.freeze() after setup, collect between batches)"
    )
    started = time.perf_counter()

    subjects: list[Subject] = [bare_subject()]
    for ckpt in (False, True):
        subjects.extend(inline_subject(ckpt, n=n) for n in INLINE_NS)
        for n in NS:
            subjects.append(mk_subject(n, ckpt))
            subjects.append(hand_subject(n, ckpt))
    _progress(f"{len(subjects)} subjects built; measuring")
    stats = measure_sync(subjects, settings, progress=_progress)
    _progress("counting checkpoints")
    counts = count_checkpoints(NS)
    _progress("timing the hooks without a graph")
    micro = run_micro(loops=1000 if args.quick else 5000)
    _progress("timing flows vs async twins vs sync-only wrap hooks without a graph")
    flow_micro = run_flow_micro(rounds=30 if args.quick else 150)

    async_report = None
    if not args.skip_async:
        async_report = run_async_benchmark(a_rounds, a_batch, a_warmup, settings.gc_during_batches, _progress)

    print()
    print(_header(settings, gc_note, None if args.skip_async else (a_rounds, a_batch, a_warmup)))
    print()
    print(format_main_table(stats, NS, ckpt=False))
    print()
    print(format_main_table(stats, NS, ckpt=True))
    print()
    print(format_detail(stats))
    print()
    derived, verdicts = format_derived(stats, NS)
    print(derived)
    print()
    print(format_micro(micro))
    print()
    print(format_flow_micro(flow_micro))
    verdicts.append(flow_verdict(flow_micro))
    print()
    ckpt_text, ckpt_verdicts = format_checkpoints(counts)
    print(ckpt_text)
    verdicts.extend(ckpt_verdicts)
    if async_report is not None:
        print()
        print(format_async(async_report))
    _progress("time to first token with each stream-vetting guard")
    print()
    print(format_ttft(run_ttft(rounds=3 if args.quick else 9)))
    print()
    print("targets")
    for verdict in verdicts:
        print(verdict.line())
    failed = sum(not v.passed for v in verdicts)
    print(f"\n{len(verdicts) - failed} passed, {failed} failed; total time {time.perf_counter() - started:.1f} s")
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
