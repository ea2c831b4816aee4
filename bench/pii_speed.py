"""Throughput of the built-in PII detectors, and their worst case on 100k-character adversarial inputs.

Run: ``.venv/bin/python -m bench.pii_speed``. For calibration, the same run times two bare-Python baselines over the
same text: ``str.count("@")`` (a C loop, the floor) and one trivial regex pass (``re.finditer(r"\\d+")``); ratios are
detector time / baseline time. The issue's bound is 50 ms per adversarial input of 100k characters; this prints
the worst input per detector and whether it is within the bound. Nothing in the test suite asserts timings.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from middleware_kit.middlewares._pii_detectors import BUILTIN_DETECTORS
from tests.middlewares.pii_corpus import corpus

__all__ = ["ADVERSARIAL", "main"]

N = 100_000
ADVERSARIAL: dict[str, str] = {
    "digits": "1" * N,
    "dots": "." * N,
    "ats": "@" * N,
    "dashes": "-" * N,
    "digit-dot": "1." * (N // 2),
    "digit-dash": "1-" * (N // 2),
    "digit-space": "1 " * (N // 2),
    "word-at": "a@" * (N // 2),
    "at-then-labels": "a@" + "a." * (N // 2 - 1),
    "long-local": "a" * (N - 1) + "@",
    "label-dash": "a@" + "a-" * (N // 2 - 1),
    "mixed": "a.1@-" * (N // 5),
    "hex-colon": "ab:" * (N // 3),
    "colons": ":" * N,
    "hex-dot": "abcd." * (N // 5),
    "quad-chain": "1.2.3.4." * (N // 8),
    "card-groups": "4111 " * (N // 5),
    "scheme-repeat": "http://" * (N // 7),
    "url-parens": "http://a" + ")" * (N - 8),
    "url-dots": "http://a" + "." * (N - 8),
    "www-repeat": "www." * (N // 4),
    "pct-zone": "fe80::1%" + "a" * (N - 8),
}


def _best(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    text = "\n".join(r["text"] for r in corpus())
    while len(text) < 1_000_000:
        text += "\n" + text
    size_mb = len(text.encode()) / 1e6
    count_t = _best(lambda: text.count("@"))
    digits = re.compile(r"\d+")
    regex_t = _best(lambda: sum(1 for _ in digits.finditer(text)))
    print(f"realistic text: {size_mb:.1f} MB (the labeled corpus, repeated)")
    print(f"baseline str.count('@'):     {size_mb / count_t:9.1f} MB/s")
    print(f"baseline re.finditer(r'\\d+'): {size_mb / regex_t:9.1f} MB/s")
    print(f"{'detector':<20} {'MB/s':>8} {'x count':>9} {'x regex':>8}")
    for name, detect in BUILTIN_DETECTORS.items():
        t = _best(lambda d=detect: d(text))  # type: ignore[misc]
        print(f"{'detect_' + name:<20} {size_mb / t:8.1f} {t / count_t:9.1f} {t / regex_t:8.2f}")

    print(f"\nadversarial inputs: {len(ADVERSARIAL)} shapes of {N:,} characters; bound 50 ms each")
    base = max(_best(lambda s=s: digits.findall(s)) for s in ADVERSARIAL.values())  # type: ignore[misc]
    print(f"baseline re.findall(r'\\d+') worst: {base * 1000:.2f} ms")
    all_ok = True
    print(f"{'detector':<20} {'worst ms':>9} {'x regex':>8}  worst input")
    for name, detect in BUILTIN_DETECTORS.items():
        worst, which = 0.0, ""
        for shape, s in ADVERSARIAL.items():
            t = _best(lambda d=detect, s=s: d(s))  # type: ignore[misc]
            if t > worst:
                worst, which = t, shape
        ok = worst < 0.050
        all_ok = all_ok and ok
        print(f"{'detect_' + name:<20} {worst * 1000:9.2f} {worst / base:8.1f}  {which}{'' if ok else '  OVER 50 ms'}")
    print("all within 50 ms" if all_ok else "SOME OVER 50 ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
