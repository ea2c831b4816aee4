"""SummarizationMiddleware: the trigger check's cost per model call, incremental vs recounting from scratch.

``.venv/bin/python -m bench.summarization [--quick]``

For a history of N messages (N = 1,000 and 10,000; realistic sizes: questions, answers, tool calls and results),
one "model call" appends two new messages and runs the trigger check, ``SummarizationMiddleware._plan`` (exact
tiktoken counts of the messages, the system prompt and one tool's schema; the trigger does not fire). Measured:

- **incremental**: the default counter, whose per-message memo is warm for the history: only the new messages
  are tokenized, the rest are dict look-ups;
- **from scratch**: the same check with the memo emptied before each call: every message is tokenized again
  (what a counter without a memo does on every model call);
- **bare loop**: a plain Python loop over the messages (``for m in messages: total += len(m.content)``), measured
  in the same run, so the ratios say how far from "touching each message once" the check is.

Times are the median of several calls, in milliseconds. Nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from middleware_kit.middlewares._tokens import TiktokenCounter, resolve_encoding
from middleware_kit.middlewares.summarization import SummarizationMiddleware
from middleware_kit.testing import ScriptedChatModel, make_request, tool_call


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city."""
    return "sunny"


def history(n: int, start: int = 0) -> list[AnyMessage]:
    messages: list[AnyMessage] = []
    i = start
    while len(messages) < n:
        messages.append(HumanMessage(f"Question {i}: what is the weather like in city number {i} this week?"))
        messages.append(AIMessage("", tool_calls=[tool_call("lookup", {"city": f"city {i}"}, id=f"call-{i}")]))
        messages.append(ToolMessage(f"Sunny, {i % 30} degrees, light wind from the west.", tool_call_id=f"call-{i}"))
        messages.append(AIMessage(f"In city {i} it is sunny and {i % 30} degrees; a good week for a walk."))
        i += 1
    return messages[:n]


def median_ms(fn: Callable[[], Any], calls: int) -> float:
    times: list[float] = []
    gc.disable()
    try:
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return statistics.median(times) * 1000


def measure(n: int, calls: int) -> dict[str, float]:
    mw = SummarizationMiddleware(ScriptedChatModel([]), trigger=("tokens", 10**12), keep=("messages", 20))
    base = history(n)
    fresh = iter(range(10**9))

    def next_request() -> Any:
        k = next(fresh)
        base.extend([HumanMessage(f"new question {k} about the forecast"), AIMessage(f"new answer {k}")])
        return make_request(base, system_prompt="You are a weather assistant.", tools=[lookup])

    mw._plan(next_request())  # warm the memo with the history

    def incremental() -> None:
        assert mw._plan(next_request()) is None

    def from_scratch() -> None:
        TiktokenCounter._memo.clear()
        assert mw._plan(next_request()) is None

    def bare() -> None:
        total = 0
        for m in base:
            total += len(m.content)

    return {
        "incremental": median_ms(incremental, calls),
        "from_scratch": median_ms(from_scratch, max(3, calls // 5)),
        "bare": median_ms(bare, calls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (rough figures)")
    args = parser.parse_args()
    resolve_encoding("cl100k_base")  # loading the vocabulary is not part of a model call
    calls = 5 if args.quick else 25
    print("trigger check per model call (median ms; ratio = time / bare loop over the same messages)")
    print(f"{'messages':>9} | {'bare loop':>9} | {'incremental':>11} {'ratio':>7} | {'from scratch':>12} {'ratio':>7} |"
          f" {'speed-up':>8}")
    for n in (1_000, 10_000):
        r = measure(n, calls)
        print(
            f"{n:>9,} | {r['bare']:>9.3f} | {r['incremental']:>11.3f} {r['incremental'] / r['bare']:>6.1f}x | "
            f"{r['from_scratch']:>12.3f} {r['from_scratch'] / r['bare']:>6.1f}x | "
            f"{r['from_scratch'] / r['incremental']:>7.1f}x"
        )


if __name__ == "__main__":
    main()
