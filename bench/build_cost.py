"""``python -m bench.build_cost``: what ``create_agent`` costs per build, per middleware (issue 25, item 6).

LangGraph Server graph factories build an agent per run, so the build is paid on every request. This times
``create_agent(model, [add], middleware=[...N no-op middlewares...])`` for N = 0, 1, 10, 20 against a hand-built
LangGraph graph compiled in the same run (:func:`bench.subjects.build_hand_graph`: a ``StateGraph`` with a model
node and a ``ToolNode``, the N middlewares' hooks called inline), interleaved round by round so drift of the machine
hits both alike. Each build makes a fresh model and fresh middleware instances, as a graph factory does (so caches
keyed by instance would not help; caches keyed by class do). Each build is timed on its own with
``time.perf_counter``; best and median per subject.

"Per middleware" is the slope above the hand-built graph: ``((mk(N) - hand(N)) - (mk(0) - hand(0))) / N``, the
cost each middleware adds beyond what the same hooks cost in a graph built by hand. Target: at most 40 µs (best).

LangChain 1.5.2's ``create_agent`` is timed with the same N in a child process (its no-op middleware has the same
four sync hooks), and our ratio against it is printed. The child runs this interpreter, so LangChain builds on the
same langchain-core and LangGraph as we do, with ``langchain`` imported from its sdist (downloaded with pip into the
cache the LangChain suite uses, :func:`tests.langchain_suite.suite.cache_dir`, and its ``langchain/`` package
extracted there; measurement only, never a dependency). If ``/tmp/lcvenv/bin/python`` exists (a venv with the real
``langchain``), that interpreter is used instead.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.fixtures import NS, add, make_model, noops
from bench.subjects import build_hand_graph
from middleware_kit import create_agent
from tests.langchain_suite.suite import VERSION, cache_dir

__all__ = ["BuildTimes", "format_build_cost", "langchain_source", "main", "time_builds", "time_langchain"]

LANGCHAIN_PYTHON = "/tmp/lcvenv/bin/python"
TARGET_US_PER_MIDDLEWARE = 40.0
FULL = (40, 5)
"""(rounds, builds per subject per round)."""
QUICK = (8, 3)

# Runs in the LangChain venv: the same N no-op middlewares (four sync hooks each), best/median µs per build.
_LANGCHAIN_SCRIPT = r"""
import gc, json, statistics, sys, time
from typing import Any
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.tools import tool

@tool
def add(a: int, b: int) -> int:
    "Add two integers."
    return a + b

class NoopMiddleware(AgentMiddleware):
    def __init__(self, index):
        super().__init__()
        self._name = f"noop_{index}"
    @property
    def name(self):
        return self._name
    def before_model(self, state, runtime):
        return None
    def after_model(self, state, runtime):
        return None
    def wrap_model_call(self, request, handler):
        return handler(request)
    def wrap_tool_call(self, request, handler):
        return handler(request)

ns, rounds, per_round = json.loads(sys.argv[1])
def build(n):
    model = GenericFakeChatModel(messages=iter(()))
    return create_agent(model, [add], middleware=[NoopMiddleware(i) for i in range(n)])

samples = {n: [] for n in ns}
for n in ns:
    build(n)
gc.collect()
for _ in range(rounds):
    for n in ns:
        for _ in range(per_round):
            t0 = time.perf_counter()
            build(n)
            samples[n].append(time.perf_counter() - t0)
print(json.dumps({n: [min(s) * 1e6, statistics.median(s) * 1e6] for n, s in samples.items()}))
"""


@dataclass(frozen=True)
class BuildTimes:
    """µs per build (best, median) per N, of one subject."""

    best: dict[int, float]
    median: dict[int, float]


def _builders(n: int) -> dict[str, Callable[[], object]]:
    """One build each, as a LangGraph Server graph factory does it: a fresh model and fresh middleware instances
    (the hand-built graph makes its own, :func:`~bench.subjects.build_hand_graph`)."""
    return {
        "mk": lambda: create_agent(make_model(), [add], middleware=noops(n)),
        "hand": lambda: build_hand_graph(n, None),
    }


def time_builds(ns: tuple[int, ...], rounds: int, per_round: int) -> dict[str, BuildTimes]:
    """Interleaved rounds: every (subject, N) builds ``per_round`` times per round, in a rotated order."""
    builders = {(kind, n): fn for n in ns for kind, fn in _builders(n).items()}
    for fn in builders.values():  # warm-up: imports, per-class caches, LangGraph's own first-use costs
        fn()
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in builders}
    keys = list(builders)
    perf = time.perf_counter
    for r in range(rounds):
        order = keys[r % len(keys):] + keys[: r % len(keys)]
        gc.collect()
        for key in order if r % 2 == 0 else reversed(order):
            fn = builders[key]
            for _ in range(per_round):
                t0 = perf()
                fn()
                samples[key].append(perf() - t0)
    out: dict[str, BuildTimes] = {}
    for kind in ("mk", "hand"):
        best = {n: min(samples[kind, n]) * 1e6 for n in ns}
        median = {n: statistics.median(samples[kind, n]) * 1e6 for n in ns}
        out[kind] = BuildTimes(best, median)
    return out


def langchain_source() -> Path:
    """A folder holding LangChain's ``langchain`` package, from its sdist (downloaded once per machine)."""
    folder = cache_dir() / f"langchain-{VERSION}-src"
    if (folder / "langchain" / "__init__.py").exists():
        return folder
    sdist = cache_dir() / "sdist" / f"langchain-{VERSION}.tar.gz"
    if not sdist.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"langchain=={VERSION}", "-d", str(sdist.parent)],
            check=True, capture_output=True, timeout=300,
        )
    top, package = f"langchain-{VERSION}/", f"langchain-{VERSION}/langchain/"
    scratch = tempfile.mkdtemp(dir=cache_dir())  # extracted aside, then moved in whole
    try:
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(package) and (m.isfile() or m.isdir())]
            for member in members:
                member.name = member.name[len(top):]
            tar.extractall(scratch, members=members, filter="data")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


def _langchain_command() -> tuple[list[str], dict[str, str]]:
    """The interpreter (and environment) that imports LangChain 1.5.2's ``langchain``."""
    if os.path.exists(LANGCHAIN_PYTHON):
        return [LANGCHAIN_PYTHON], dict(os.environ)
    return [sys.executable], {**os.environ, "PYTHONPATH": str(langchain_source())}


def time_langchain(ns: tuple[int, ...], rounds: int, per_round: int) -> BuildTimes | None:
    """LangChain's ``create_agent`` with the same N, in a child process (None when LangChain cannot be had)."""
    try:
        command, env = _langchain_command()
    except (OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
        print(f"  .. LangChain {VERSION} not available ({exc!r}): not timed", file=sys.stderr)
        return None
    proc = subprocess.run(
        [*command, "-c", _LANGCHAIN_SCRIPT, json.dumps([list(ns), rounds, per_round])],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd="/tmp",  # not the checkout: its middleware_kit (and langchain_alias) must not shadow anything there
    )
    if proc.returncode != 0:
        print(f"  .. LangChain run failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    raw: dict[str, list[float]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return BuildTimes({int(n): v[0] for n, v in raw.items()}, {int(n): v[1] for n, v in raw.items()})


def _slope(mk: dict[int, float], hand: dict[int, float], n: int) -> float:
    """µs each middleware adds above the hand-built graph, at N=n."""
    return ((mk[n] - hand[n]) - (mk[0] - hand[0])) / n


def format_build_cost(times: dict[str, BuildTimes], langchain: BuildTimes | None) -> tuple[str, bool]:
    """The table, and whether the target (best-of slope at the largest N) is met."""
    mk, hand = times["mk"], times["hand"]
    ns = sorted(mk.best)
    lines = [
        "create_agent build cost, µs per build (best / median)",
        f"  {'N':>3} {'middleware_kit':>19} {'hand-built graph':>19} {'ratio':>6} {'µs/mw above hand':>17}"
        + (f" {'LangChain 1.5':>19} {'mk/LC':>6}" if langchain else ""),
    ]
    for n in ns:
        slope = f"{_slope(mk.best, hand.best, n):>8.1f} / {_slope(mk.median, hand.median, n):>6.1f}" if n else "-"
        line = (
            f"  {n:>3} {mk.best[n]:>8,.0f} / {mk.median[n]:>8,.0f} {hand.best[n]:>8,.0f} / {hand.median[n]:>8,.0f} "
            f"{mk.best[n] / hand.best[n]:>6.2f} {slope:>17}"
        )
        if langchain:
            line += f" {langchain.best[n]:>8,.0f} / {langchain.median[n]:>8,.0f} {mk.best[n] / langchain.best[n]:>6.2f}"
        lines.append(line)
    top = ns[-1]
    per_mw = _slope(mk.best, hand.best, top)
    lines.append(
        f"  fixed cost above the hand-built graph at N=0: {mk.best[0] - hand.best[0]:,.0f} µs (best); per "
        f"middleware at N={top}: {per_mw:.1f} µs (best), target <= {TARGET_US_PER_MIDDLEWARE:.0f}"
    )
    if langchain:
        lc_slope = (langchain.best[top] - langchain.best[0]) / top
        mk_slope = (mk.best[top] - mk.best[0]) / top
        lines.append(
            f"  slope per middleware (best, N=0..{top}): middleware_kit {mk_slope:.1f} µs, LangChain {lc_slope:.1f} µs"
        )
    passed = per_mw <= TARGET_US_PER_MIDDLEWARE
    lines.append(f"  [{'PASS' if passed else 'MISS'}] build cost per middleware <= {TARGET_US_PER_MIDDLEWARE:.0f} µs")
    return "\n".join(lines), passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.build_cost", description="create_agent build cost")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (figures are rough)")
    parser.add_argument("--skip-langchain", action="store_true", help="do not time LangChain's create_agent")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when the target is missed")
    args = parser.parse_args(argv)
    rounds, per_round = QUICK if args.quick else FULL
    print(f"  .. timing {rounds} rounds x {per_round} builds per subject and N", file=sys.stderr, flush=True)
    times = time_builds(NS, rounds, per_round)
    langchain: Any = None
    if not args.skip_langchain:
        print("  .. timing LangChain's create_agent in a child process", file=sys.stderr, flush=True)
        langchain = time_langchain(NS, rounds, per_round)
    text, passed = format_build_cost(times, langchain)
    print(text)
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
