"""The timing harness: warm-up, interleaved rounds of timed batches, GC policy, statistics.

Method (see README.md for why):

* Every subject is verified (one checked invoke), then warmed up.
* The timed part is ``rounds`` rounds; in each round every subject runs one batch of ``batch`` invokes, in a
  rotated order, so slow drift of the machine (frequency scaling, a noisy neighbour) hits every subject alike
  instead of whichever ran last.
* Each invoke is timed on its own with ``time.perf_counter`` (its resolution and cost, well under 1 µs, are
  negligible against invokes of milliseconds); inputs and configs are built before the batch.
* Before each batch: ``subject.reset()`` (outside the timing) and ``gc.collect()``. After building the
  subjects, ``gc.freeze()`` moves every long-lived object to the permanent generation, so a collection during
  a batch only traverses what the invokes allocate. GC stays enabled during batches by default (a real process
  pays for its garbage); ``gc_during_batches=False`` disables it there to measure the pure code path.
"""

from __future__ import annotations

import asyncio
import gc
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bench.fixtures import check_messages
from bench.subjects import Subject

__all__ = ["Settings", "Stats", "bootstrap_interval", "fit_line", "measure_async", "measure_sync"]


@dataclass(frozen=True)
class Settings:
    rounds: int
    batch: int
    warmup: int
    gc_during_batches: bool = True


@dataclass
class Stats:
    """Per-invoke wall times (seconds) of one subject."""

    samples: list[float] = field(default_factory=list)
    batches: list[list[float]] = field(default_factory=list)
    """The samples again, one list per round (for the bootstrap over rounds)."""
    batch_means: list[float] = field(default_factory=list)
    cpu_means: list[float] = field(default_factory=list)
    """Process CPU time per invoke of each batch (``time.process_time``); wall >> cpu: the process waited."""

    def add_batch(self, times: Sequence[float], cpu: float) -> None:
        self.samples.extend(times)
        self.batches.append(list(times))
        self.batch_means.append(statistics.fmean(times))
        self.cpu_means.append(cpu / len(times))

    @property
    def cpu_us(self) -> float:
        return statistics.fmean(self.cpu_means) * 1e6

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples) * 1e6

    def quantile_us(self, q: float) -> float:
        ordered = sorted(self.samples)
        pos = q * (len(ordered) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return (ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)) * 1e6

    @property
    def p10_us(self) -> float:
        return self.quantile_us(0.10)

    @property
    def p90_us(self) -> float:
        return self.quantile_us(0.90)

    @property
    def min_batch_mean_us(self) -> float:
        return min(self.batch_means) * 1e6

    @property
    def mean_us(self) -> float:
        return statistics.fmean(self.samples) * 1e6


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``y = slope * x + intercept``; returns ``(slope, intercept)``."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    return slope, my - slope * mx


def bootstrap_interval(
    stats: Mapping[str, Stats],
    keys: Sequence[str],
    figure: Callable[[dict[str, float]], float],
    resamples: int = 300,
    seed: int = 1234,
) -> tuple[float, float]:
    """5th-95th percentile of ``figure({key: median µs})`` over resamples of whole rounds.

    Rounds are drawn with replacement and the same rounds for every subject (they ran side by side), so a noisy
    stretch of the run moves all subjects together, as it did. The interval says how much the figure depends on
    which rounds happened to be quiet; it is not a guarantee.
    """
    rng = random.Random(seed)
    rounds = min(len(stats[k].batches) for k in keys)
    values: list[float] = []
    for _ in range(resamples):
        picked = [rng.randrange(rounds) for _ in range(rounds)]
        medians = {k: statistics.median([t for r in picked for t in stats[k].batches[r]]) * 1e6 for k in keys}
        values.append(figure(medians))
    values.sort()
    return values[int(0.05 * (len(values) - 1))], values[int(0.95 * (len(values) - 1))]


def _rotated(subjects: Sequence[Subject], r: int) -> list[Subject]:
    k = r % len(subjects)
    order = list(subjects[k:]) + list(subjects[:k])
    return order if r % 2 == 0 else order[::-1]


def _settle() -> None:
    gc.collect()


def measure_sync(
    subjects: Sequence[Subject], settings: Settings, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Stats]:
    for subject in subjects:
        assert subject.run is not None
        inp, cfg = subject.args(1)[0]
        check_messages(subject.run(inp, cfg), subject.key)
        for inp, cfg in subject.args(settings.warmup):
            subject.run(inp, cfg)
        subject.reset()
    gc.collect()
    gc.freeze()
    stats = {s.key: Stats() for s in subjects}
    perf = time.perf_counter
    try:
        for r in range(settings.rounds):
            for subject in _rotated(subjects, r):
                run = subject.run
                assert run is not None
                args = subject.args(settings.batch)
                subject.reset()
                _settle()
                times: list[float] = []
                append = times.append
                if not settings.gc_during_batches:
                    gc.disable()
                c0 = time.process_time()
                try:
                    for inp, cfg in args:
                        t0 = perf()
                        run(inp, cfg)
                        append(perf() - t0)
                finally:
                    gc.enable()
                stats[subject.key].add_batch(times, time.process_time() - c0)
            progress(f"round {r + 1}/{settings.rounds}")
    finally:
        gc.unfreeze()
        for subject in subjects:
            subject.reset()
    return stats


async def measure_async(
    subjects: Sequence[Subject], settings: Settings, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Stats]:
    """The async twin of :func:`measure_sync`; every subject must already have passed a checked invoke."""
    for subject in subjects:
        assert subject.arun is not None
        for inp, cfg in subject.args(settings.warmup):
            await subject.arun(inp, cfg)
        subject.reset()
    gc.collect()
    gc.freeze()
    stats = {s.key: Stats() for s in subjects}
    perf = time.perf_counter
    try:
        for r in range(settings.rounds):
            for subject in _rotated(subjects, r):
                arun = subject.arun
                assert arun is not None
                args = subject.args(settings.batch)
                subject.reset()
                _settle()
                times: list[float] = []
                if not settings.gc_during_batches:
                    gc.disable()
                c0 = time.process_time()
                try:
                    for inp, cfg in args:
                        t0 = perf()
                        await arun(inp, cfg)
                        times.append(perf() - t0)
                finally:
                    gc.enable()
                stats[subject.key].add_batch(times, time.process_time() - c0)
                await asyncio.sleep(0)
            progress(f"async round {r + 1}/{settings.rounds}")
    finally:
        gc.unfreeze()
        for subject in subjects:
            subject.reset()
    return stats
