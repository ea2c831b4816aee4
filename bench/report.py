"""Tables, derived figures and PASS/FAIL verdicts. Formatting only: every number comes from a measurement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from bench.async_bench import AsyncReport
from bench.checkpoints import CheckpointCount
from bench.subjects import INLINE_NS
from bench.timing import Stats, bootstrap_interval, fit_line

__all__ = [
    "MARGINAL_TARGET_US",
    "RATIO_TARGET",
    "Verdict",
    "format_async",
    "format_checkpoints",
    "format_detail",
    "format_derived",
    "format_main_table",
]

MARGINAL_TARGET_US = 5.0
RATIO_TARGET = 1.1


@dataclass(frozen=True)
class Verdict:
    name: str
    passed: bool
    figure: str

    def line(self) -> str:
        return f"  [{'PASS' if self.passed else 'FAIL'}] {self.name}: {self.figure}"


def _key(kind: str, ckpt: bool, n: int) -> str:
    return f"{kind}/{'ckpt' if ckpt else 'nockpt'}/N={n}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    fmt = " | ".join("{:>%d}" % w for w in widths)  # noqa: UP031 - a format string built from widths
    lines = [fmt.format(*headers), "-+-".join("-" * w for w in widths)]
    lines.extend(fmt.format(*r) for r in rows)
    return "\n".join("  " + line for line in lines)


def format_main_table(stats: dict[str, Stats], ns: Sequence[int], ckpt: bool) -> str:
    bare = stats[_key("bare", False, 0)].median_us
    rows = []
    for n in ns:
        mk = stats[_key("mk", ckpt, n)].median_us
        hand = stats[_key("hand", ckpt, n)].median_us
        rows.append([str(n), f"{mk:,.0f}", f"{hand:,.0f}", f"{bare:,.0f}", f"{mk / hand:.2f}x", f"{mk / bare:.2f}x"])
    title = "with InMemorySaver (new thread_id per invoke)" if ckpt else "without checkpointer"
    headers = ["N", "middleware_kit µs", "hand-built µs", "bare loop µs", "mk/hand", "mk/bare"]
    return f"sync invoke, {title}: median µs per invoke\n{_table(headers, rows)}"


def format_detail(stats: dict[str, Stats]) -> str:
    rows = []
    for key, st in stats.items():
        rows.append(
            [
                key,
                f"{st.median_us:,.1f}",
                f"{st.p10_us:,.1f}",
                f"{st.p90_us:,.1f}",
                f"{st.min_batch_mean_us:,.1f}",
                f"{st.mean_us:,.1f}",
                f"{st.cpu_us:,.1f}",
                str(len(st.samples)),
            ]
        )
    headers = ["subject", "median", "p10", "p90", "min batch mean", "mean", "cpu/invoke", "invokes"]
    return f"every subject, µs per invoke\n{_table(headers, rows)}"


@dataclass(frozen=True)
class Slope:
    slope: float
    low: float
    high: float


def _slope(stats: dict[str, Stats], kind: str, ckpt: bool, ns: Sequence[int]) -> Slope:
    keys = [_key(kind, ckpt, n) for n in ns]
    slope, _ = fit_line(ns, [stats[k].median_us for k in keys])
    low, high = bootstrap_interval(stats, keys, lambda med: fit_line(ns, [med[k] for k in keys])[0])
    return Slope(slope, low, high)


def _difference(a: str, b: str) -> Callable[[dict[str, float]], float]:
    return lambda medians: medians[b] - medians[a]


def _ratio(a: str, b: str) -> Callable[[dict[str, float]], float]:
    return lambda medians: medians[a] / medians[b]


def _interval(low: float, high: float, fmt: str) -> str:
    return f"[{low:{fmt}} .. {high:{fmt}}]"


def format_derived(stats: dict[str, Stats], ns: Sequence[int]) -> tuple[str, list[Verdict]]:
    lines = [
        "derived figures ([a .. b] = 5th-95th percentile over 300 bootstrap resamples of the rounds: how much a "
        "figure moves with which rounds were quiet)"
    ]
    verdicts: list[Verdict] = []
    upper = [n for n in ns if n >= 1]
    for ckpt in (False, True):
        label = "InMemorySaver" if ckpt else "no checkpointer"
        mk = _slope(stats, "mk", ckpt, ns)
        hand = _slope(stats, "hand", ckpt, ns)
        lines.append(f"  marginal cost per middleware = least-squares slope of median µs vs N, N={list(ns)} ({label}):")
        lines.append(f"    middleware_kit {mk.slope:8.2f} µs/middleware  {_interval(mk.low, mk.high, '.2f')}")
        lines.append(f"    hand-built     {hand.slope:8.2f} µs/middleware  {_interval(hand.low, hand.high, '.2f')}")
        if len(upper) >= 2:
            mk_up = _slope(stats, "mk", ckpt, upper)
            hand_up = _slope(stats, "hand", ckpt, upper)
            lines.append(
                f"    diagnostic, slope over N={upper} only: middleware_kit {mk_up.slope:.2f} "
                f"{_interval(mk_up.low, mk_up.high, '.2f')}, hand-built {hand_up.slope:.2f} "
                f"{_interval(hand_up.low, hand_up.high, '.2f')} µs/middleware"
            )
            for kind, name in (("mk", "middleware_kit"), ("hand", "hand-built")):
                k0, k1 = _key(kind, ckpt, 0), _key(kind, ckpt, upper[0])
                step = stats[k1].median_us - stats[k0].median_us
                low, high = bootstrap_interval(stats, [k0, k1], _difference(k0, k1))
                lines.append(
                    f"    diagnostic, step N=0->{upper[0]}: {name} {step:+,.0f} µs {_interval(low, high, '+,.0f')}"
                )
        verdicts.append(
            Verdict(
                f"marginal cost per middleware <= {MARGINAL_TARGET_US:g} µs (middleware_kit, {label})",
                mk.slope <= MARGINAL_TARGET_US,
                f"{mk.slope:.2f} µs {_interval(mk.low, mk.high, '.2f')} (hand-built: {hand.slope:.2f} µs)",
            )
        )
    for ckpt in (False, True):
        label = "InMemorySaver" if ckpt else "no checkpointer"
        for n in INLINE_NS:
            k_mk, k_min = _key("mk", ckpt, n), _key("inline", ckpt, n)
            if k_min not in stats or k_mk not in stats:
                continue
            mk_n, min_n = stats[k_mk].median_us, stats[k_min].median_us
            ratio = mk_n / min_n
            low, high = bootstrap_interval(stats, [k_mk, k_min], _ratio(k_mk, k_min))
            lines.append(
                f"  N={n} middleware_kit / hand-built graph, tools inline ({label}): {mk_n:,.0f} / {min_n:,.0f} µs = "
                f"{ratio:.3f}x {_interval(low, high, '.3f')}"
            )
            verdicts.append(
                Verdict(
                    f"N={n} within {RATIO_TARGET:g}x of the hand-built graph, tools inline ({label})",
                    ratio <= RATIO_TARGET,
                    f"{ratio:.3f}x {_interval(low, high, '.3f')}",
                )
            )
    for ckpt in (False, True):
        label = "InMemorySaver" if ckpt else "no checkpointer"
        k_mk, k_hand = _key("mk", ckpt, 0), _key("hand", ckpt, 0)
        mk0, hand0 = stats[k_mk].median_us, stats[k_hand].median_us
        ratio = mk0 / hand0
        low, high = bootstrap_interval(stats, [k_mk, k_hand], _ratio(k_mk, k_hand))
        lines.append(
            f"  N=0 middleware_kit / hand-built ({label}): {mk0:,.0f} / {hand0:,.0f} µs = {ratio:.3f}x "
            f"{_interval(low, high, '.3f')}"
        )
        verdicts.append(
            Verdict(
                f"N=0 within {RATIO_TARGET:g}x of hand-built ({label})",
                ratio <= RATIO_TARGET,
                f"{ratio:.3f}x {_interval(low, high, '.3f')}",
            )
        )
    return "\n".join(lines), verdicts


def format_checkpoints(counts: Sequence[CheckpointCount]) -> tuple[str, list[Verdict]]:
    ns = sorted({c.n for c in counts})
    by = {(c.kind, c.n): c for c in counts}
    rows = []
    for n in ns:
        mk, hand = by[("mk", n)], by[("hand", n)]
        rows.append(
            [
                str(n),
                str(mk.puts),
                str(mk.put_writes),
                str(mk.history),
                str(hand.puts),
                str(hand.put_writes),
                str(hand.history),
            ]
        )
    headers = ["N", "mk put", "mk put_writes", "mk history", "hand put", "hand put_writes", "hand history"]
    text = (
        "checkpoint writes per invoke (one tool round-trip; put = checkpoints, put_writes = task write "
        "batches, history = len(get_state_history))\n" + _table(headers, rows)
    )
    mk_triples = {n: by[("mk", n)].triple for n in ns}
    constant = len(set(mk_triples.values())) == 1
    verdicts = [
        Verdict(
            f"checkpoint writes per invoke constant in N={ns} (middleware_kit)",
            constant,
            ", ".join(f"N={n}: {t[0]} put/{t[1]} put_writes" for n, t in mk_triples.items()),
        )
    ]
    upper = [n for n in ns if n >= 1]
    if len(upper) >= 2:
        grows = len({mk_triples[n] for n in upper}) != 1
        text += f"\n  diagnostic: constant over N={upper} (no growth per added middleware): {'no' if grows else 'yes'}"
    return text, verdicts


def format_async(report: AsyncReport) -> str:
    lines = [
        "async ainvoke, no checkpointer: µs per invoke "
        f"(event loop default executor: {report.executor_workers} threads on this machine)"
    ]
    if report.error:
        lines.append(f"  ERROR: {report.error}")
        return "\n".join(lines)
    labels = {
        "bare": "bare loop (await model/tool .ainvoke)",
        "hand[async]": "hand-built, async nodes, async twins inline",
        "mk": "middleware_kit, no middleware",
        "mk[async]": "middleware_kit, no-ops with async twins",
        "mk[flow]": "middleware_kit, no-ops, wrap hooks as flows",
        "inline": "minimal graph, tools inline (no ToolNode)",
        "mk[sync]": "middleware_kit, sync-only no-ops (bridged)",
    }
    rows = []
    for case in report.cases:
        kind = f"{case.kind}[{case.variant}]" if case.variant else case.kind
        if case.status == "ok":
            figures = [
                f"{case.median_us:,.0f}",
                f"{case.p10_us:,.0f}",
                f"{case.p90_us:,.0f}",
                str(case.samples),
            ]
        else:
            figures = [case.status.upper(), "-", "-", "0"]
        rows.append([labels.get(kind, kind), str(case.n), *figures])
    lines.append(_table(["subject", "N", "median", "p10", "p90", "invokes"], rows))
    ref = {(c.kind, c.variant, c.n): c.median_us for c in report.cases if c.status == "ok"}
    mk = {0: ref.get(("mk", "", 0)), 1: ref.get(("mk", "async", 1)), 10: ref.get(("mk", "async", 10))}
    hand = {n: ref.get(("hand", "async", n)) for n in (0, 1, 10)}
    if mk[0] and hand[0]:
        lines.append(f"  N=0 middleware_kit / hand-built (async): {mk[0] / hand[0]:.3f}x")
    inline = ref.get(("inline", "", 0))
    if mk[0] and inline:
        lines.append(f"  N=0 middleware_kit / minimal graph, tools inline (async): {mk[0] / inline:.3f}x")
    for n in (1, 10):
        flow, twins = ref.get(("mk", "flow", n)), mk.get(n)
        if flow and twins:
            lines.append(
                f"  flows vs async twins under ainvoke, N={n}: {flow:,.0f} / {twins:,.0f} µs = {flow / twins:.3f}x "
                f"(one body per wrap hook, no thread hop)"
            )
    if all(mk.values()) and all(hand.values()):
        m, h = cast(dict[int, float], mk), cast(dict[int, float], hand)
        lines.append(
            f"  async twins: step N=0->1: middleware_kit {m[1] - m[0]:+,.0f} µs, "
            f"hand-built {h[1] - h[0]:+,.0f} µs; each further middleware, (N=10 - N=1)/9: "
            f"middleware_kit {(m[10] - m[1]) / 9:.2f} µs, "
            f"hand-built {(h[10] - h[1]) / 9:.2f} µs"
        )
    sync_cases = sorted((c for c in report.cases if c.variant == "sync" and c.status == "ok"), key=lambda c: c.n)
    for case in sync_cases:
        twins = mk.get(case.n)
        if twins:
            lines.append(
                f"  sync-only no-ops under ainvoke, N={case.n}: {case.median_us - twins:+,.0f} µs vs the same N "
                f"with async twins (the cost of running sync hooks off the event loop)"
            )
        elif mk[0]:
            lines.append(f"  sync-only no-ops under ainvoke, N={case.n}: {case.median_us - mk[0]:+,.0f} µs over N=0")
    for case in report.cases:
        if case.status != "ok":
            lines.append(f"  {case.key}: {case.status.upper()}: {case.detail}")
    return "\n".join(lines)
