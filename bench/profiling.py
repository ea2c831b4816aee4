"""``python -m bench --profile``: where does the time of N middlewares go?

Profiles ``invoke`` of the middleware_kit agent at N=0, N=1 and N=20 (no checkpointer) with cProfile, the same
number of invokes each, and prints

* the top functions of the N=20 run by own time and by cumulative time;
* the per-function difference N=1 minus N=0 (own time) per invoke: the fixed cost of having any middleware;
* the per-function difference (N=20 minus N=1) / 19 per invoke: the cost of each further middleware.

cProfile adds a fixed cost to every Python call, so it inflates code made of many small calls (the hook
chains); use the figures for attribution, and the main benchmark for absolute times. cProfile only sees the
calling thread: LangGraph's ToolNode runs tool calls (and so the wrap_tool_call chain) in a worker thread,
which is missing from these profiles (bench/micro.py times that chain directly).
"""

from __future__ import annotations

import cProfile
import io
import pstats
from collections.abc import Callable
from typing import Any

from bench.subjects import Subject, mk_subject, verify

__all__ = ["profile_report"]

FuncKey = tuple[str, int, str]


def _profile(subject: Subject, invokes: int) -> pstats.Stats:
    assert subject.run is not None
    verify(subject)
    run = subject.run
    for inp, cfg in subject.args(20):
        run(inp, cfg)
    subject.reset()
    args = subject.args(invokes)
    profiler = cProfile.Profile()
    profiler.enable()
    for inp, cfg in args:
        run(inp, cfg)
    profiler.disable()
    subject.reset()
    return pstats.Stats(profiler)


def _short(func: FuncKey) -> str:
    filename, line, name = func
    for marker in ("site-packages/", "/work/main/"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
    return f"{filename}:{line}({name})"


def _own_times(st: pstats.Stats) -> dict[FuncKey, tuple[int, float]]:
    raw: dict[FuncKey, Any] = st.stats  # type: ignore[attr-defined]
    return {func: (entry[1], entry[2]) for func, entry in raw.items()}  # (total calls, own time)


def _diff(
    low: dict[FuncKey, tuple[int, float]], high: dict[FuncKey, tuple[int, float]]
) -> list[tuple[float, int, FuncKey]]:
    rows = []
    for func, (calls, own) in high.items():
        calls0, own0 = low.get(func, (0, 0.0))
        rows.append((own - own0, calls - calls0, func))
    rows.sort(reverse=True)
    return rows


def _write_diff(out: io.StringIO, title: str, rows: list[tuple[float, int, FuncKey]], divisor: float, top: int) -> None:
    total = sum(r[0] for r in rows)
    out.write(f"\n== {title}: {total * 1e6 / divisor:,.1f} µs under the profiler ==\n")
    out.write(
        f"{'µs':>9} {'extra calls':>12}  function (own time; only functions called more often, or "
        f"looping over the middlewares: the others differ by noise)\n"
    )
    kept = [r for r in rows if r[1] or "middleware_kit/" in r[2][0]]
    for delta, dcalls, func in kept[:top]:
        out.write(f"{delta * 1e6 / divisor:9.2f} {dcalls / divisor:12.2f}  {_short(func)}\n")


def profile_report(invokes: int = 300, n: int = 20, progress: Callable[[str], None] = lambda _: None) -> str:
    out = io.StringIO()
    progress(f"profiling middleware_kit N=0, N=1 and N={n}, {invokes} invokes each")
    p0 = _profile(mk_subject(0, False), invokes)
    p1 = _profile(mk_subject(1, False), invokes)
    pn = _profile(mk_subject(n, False), invokes)
    for title, sort in (
        (f"N={n}: top 25 by own time", "tottime"),
        (f"N={n}: top 25 by cumulative time", "cumtime"),
    ):
        out.write(f"\n== {title} ({invokes} invokes) ==\n")
        pn.stream = out  # type: ignore[attr-defined]
        pn.sort_stats(sort).print_stats(25)
    t0, t1, tn = _own_times(p0), _own_times(p1), _own_times(pn)
    for label, t in (("N=0", t0), ("N=1", t1), (f"N={n}", tn)):
        total_us = sum(v for _, v in t.values()) / invokes * 1e6
        out.write(f"total under the profiler, {label}: {total_us:,.0f} µs/invoke\n")
    _write_diff(out, "fixed cost of the first middleware, per invoke: N=1 minus N=0", _diff(t0, t1), invokes, 20)
    _write_diff(
        out,
        f"cost of each further middleware, per invoke: (N={n} minus N=1) / {n - 1}",
        _diff(t1, tn),
        invokes * (n - 1),
        20,
    )
    return out.getvalue()
