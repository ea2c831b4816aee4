"""``python -m bench.tracing``: what watching a run costs, as ratios measured in one run.

Per invoke (one tool round-trip, ``human -> model (tool call) -> tool -> model -> end``, 3 no-op middlewares):

* ``off``: no callback handler (what every run pays when nobody watches);
* ``otel``: ``OpenTelemetryCallbackHandler`` with an SDK tracer provider exporting to memory;
* ``otel+content``: the same with ``capture_content=True``;
* ``timeline``: ``TimelineRecorder`` (the callback handler behind the HTML timeline).

Per event on the custom stream (a middleware sending ``K`` events from ``before_model``):

* ``plain``: ``runtime.stream_writer({...})`` with a plain dict (what bundled middlewares did before typed events);
* ``typed``: ``middleware_kit.middlewares._stream.emit(runtime, {...})`` (an ``Event`` with run id, thread id,
  sequence number, timestamp and hook).

Subjects run in interleaved rounds (every round runs every subject once per batch, in rotated order) so drift of
the machine hits all alike; the figures are medians of per-invoke times. Options: ``--rounds``, ``--batch``,
``--events``.

``--baseline DIR`` (a directory holding another ``middleware_kit`` package, e.g. ``git archive HEAD middleware_kit |
tar -x -C DIR``) adds the comparison across versions, in the same run: two worker processes (this tree and
``DIR``), driven in interleaved rounds, each timing the same agent (3 no-op middlewares, one tool round trip: 15 hook
calls per invoke) with ``off`` (no handler), ``callback`` (a langchain-core handler that does nothing: the cost of
the runs themselves, every hook a run here) and ``otel``. The per-hook overhead with tracing off is
``(off - baseline off) / 15``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, ModelRequest, create_agent
from middleware_kit.hooks import ModelHandler, ToolHandler, ToolResult
from middleware_kit.middlewares._stream import emit
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.viz import TimelineRecorder


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Noop(AgentMiddleware):
    def __init__(self, i: int) -> None:
        self.name = f"noop{i}"

    def before_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        return None

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        return handler(request)

    def wrap_tool_call(self, request: Any, handler: ToolHandler) -> ToolResult:
        return handler(request)


_LOOP_TIMES: dict[bool, list[float]] = {False: [], True: []}
"""Seconds per event of the emitting loops, timed inside before_model (typed -> samples); bench-only bookkeeping."""


class Chatty(AgentMiddleware):
    """Sends ``count`` events per before_model, typed or plain, and times the loop from inside the hook."""

    def __init__(self, count: int, typed: bool) -> None:
        self.count = count
        self.typed = typed

    def before_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        start = time.perf_counter()
        if self.typed:
            for i in range(self.count):
                emit(runtime, {"event": "tick", "middleware": "Chatty", "i": i})
        else:
            writer = runtime.stream_writer if runtime is not None else None
            assert writer is not None
            for i in range(self.count):
                writer({"event": "tick", "middleware": "Chatty", "i": i})
        _LOOP_TIMES[self.typed].append((time.perf_counter() - start) / self.count)


def _model() -> ScriptedChatModel:
    return ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"], cycle=True)


def _otel(capture_content: bool) -> tuple[Any, Callable[[], None]]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from middleware_kit.otel import OpenTelemetryCallbackHandler

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OpenTelemetryCallbackHandler(tracer_provider=provider, capture_content=capture_content), exporter.clear


def _subjects(events: int) -> dict[str, Callable[[], Any]]:
    agent = create_agent(_model(), [add], middleware=[Noop(i) for i in range(3)])
    inp = {"messages": [HumanMessage("1+2?")]}
    subjects: dict[str, Callable[[], Any]] = {"off": lambda: agent.invoke(inp)}
    try:
        otel, _clear = _otel(False)
        otel_content, _clear2 = _otel(True)
    except ImportError:
        print("(OpenTelemetry not installed: pip install 'middleware_kit[otel]'; otel rows skipped)", file=sys.stderr)
    else:
        subjects["otel"] = lambda: (agent.invoke(inp, {"callbacks": [otel]}), _clear())
        subjects["otel+content"] = lambda: (agent.invoke(inp, {"callbacks": [otel_content]}), _clear2())
    subjects["timeline"] = lambda: agent.invoke(inp, {"callbacks": [TimelineRecorder()]})
    for typed in (False, True):
        chatty = create_agent(_model(), [add], middleware=[Chatty(events, typed)])

        def stream(chatty: Any = chatty) -> Any:
            return list(chatty.stream(inp, stream_mode="custom"))

        subjects["typed" if typed else "plain"] = stream
    return subjects


def measure(subjects: dict[str, Callable[[], Any]], rounds: int, batch: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in subjects}
    names = list(subjects)
    for fn in subjects.values():  # warm-up
        for _ in range(3):
            fn()
    gc.collect()
    gc.freeze()
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            fn = subjects[name]
            for _ in range(batch):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batch", type=int, default=15)
    parser.add_argument("--events", type=int, default=50, help="events per before_model in the event rows")
    parser.add_argument("--baseline", metavar="DIR", help="also compare with the middleware_kit package in DIR")
    args = parser.parse_args(argv)
    if args.baseline:
        compare_versions(args.baseline, args.rounds, args.batch)
        print()
    subjects = _subjects(args.events)
    times = measure(subjects, args.rounds, args.batch)
    median = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    n = args.rounds * args.batch
    print(f"tracing overhead: {n} invokes per subject, medians (ms per invoke); ratios vs 'off' / vs 'plain'")
    print(f"{'subject':<14} {'ms/invoke':>10} {'ratio':>7}")
    for name in ("off", "otel", "otel+content", "timeline"):
        if name in median:
            print(f"{name:<14} {median[name]:>10.3f} {median[name] / median['off']:>7.2f}")
    print(f"{'plain':<14} {median['plain']:>10.3f} {1.0:>7.2f}   ({2 * args.events} plain-dict events per invoke)")
    print(f"{'typed':<14} {median['typed']:>10.3f} {median['typed'] / median['plain']:>7.2f}   "
          f"({2 * args.events} typed events per invoke)")
    plain_us, typed_us = (statistics.median(_LOOP_TIMES[t]) * 1e6 for t in (False, True))
    print(f"one event, timed inside the hook (median of {len(_LOOP_TIMES[True])} loops of {args.events}): "
          f"plain dict {plain_us:.2f} us, typed Event {typed_us:.2f} us, ratio {typed_us / plain_us:.2f}")


_WORKER = r"""
import json, sys, time
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.testing import ScriptedChatModel, tool_call

@tool
def add(a: int, b: int) -> int:
    "Add two integers."
    return a + b

class Noop(AgentMiddleware):
    def __init__(self, i):
        self.name = f"noop{i}"
    def before_model(self, state, runtime):
        return None
    def wrap_model_call(self, request, handler):
        return handler(request)
    def wrap_tool_call(self, request, handler):
        return handler(request)

class Quiet(BaseCallbackHandler):
    pass

model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"], cycle=True)
agent = create_agent(model, [add], middleware=[Noop(i) for i in range(3)])
inp = {"messages": [HumanMessage("1+2?")]}
configs = {"off": None, "callback": {"callbacks": [Quiet()]}}
try:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from middleware_kit.otel import OpenTelemetryCallbackHandler
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configs["otel"] = {"callbacks": [OpenTelemetryCallbackHandler(tracer_provider=provider)]}
except ImportError:
    exporter = None
for config in configs.values():
    for _ in range(10):
        agent.invoke(inp, config)
import gc
gc.collect()
gc.freeze()
print(json.dumps(sorted(configs)), flush=True)
for line in sys.stdin:
    subject, batch = line.split()
    times = []
    for _ in range(int(batch)):
        start = time.perf_counter()
        agent.invoke(inp, configs[subject])
        times.append(time.perf_counter() - start)
        if exporter is not None:
            exporter.clear()
    print(json.dumps(times), flush=True)
"""
def _hook_calls() -> int:
    """Hook calls per invoke of the worker's agent: 2 model turns x 3 middlewares x (before_model + wrap_model_call)
    + 1 tool call x 3 wrap_tool_call = 15."""
    return 2 * 3 * 2 + 3


def compare_versions(baseline: str, rounds: int, batch: int) -> None:
    """Time this tree and ``baseline`` in two workers, interleaved, and print the medians and ratios."""
    import json
    import subprocess
    from pathlib import Path

    here = str(Path(__file__).resolve().parents[1])
    workers: dict[str, Any] = {}
    subjects: dict[str, list[str]] = {}
    for label, root in (("before", baseline), ("after", here)):
        proc = subprocess.Popen([sys.executable, "-c", _WORKER], cwd=root, text=True, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        assert proc.stdout is not None
        workers[label] = proc
        subjects[label] = json.loads(proc.stdout.readline())
    pairs = [(label, subject) for label in workers for subject in subjects[label]]
    times: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
    for r in range(rounds):
        for label, subject in pairs[r % len(pairs):] + pairs[:r % len(pairs)]:
            proc = workers[label]
            proc.stdin.write(f"{subject} {batch}\n")
            proc.stdin.flush()
            times[(label, subject)].extend(json.loads(proc.stdout.readline()))
    for proc in workers.values():
        proc.stdin.close()
        proc.wait()
    med = {pair: statistics.median(ts) * 1000 for pair, ts in times.items()}
    base = med[("before", "off")]
    print(f"versions: {rounds * batch} invokes per subject, medians (ms per invoke), ratios vs 'before off' "
          f"(before = {baseline})")
    print(f"{'version':<8} {'subject':<10} {'ms/invoke':>10} {'ratio':>7}")
    for label, subject in pairs:
        print(f"{label:<8} {subject:<10} {med[(label, subject)]:>10.3f} {med[(label, subject)] / base:>7.2f}")
    per_hook = (med[("after", "off")] - base) * 1000 / _hook_calls()
    print(f"tracing off, per hook call: {per_hook:+.2f} us ({_hook_calls()} hook calls per invoke)")
    for subject in ("callback", "otel"):
        if ("after", subject) in med:
            print(f"{subject} on vs off (after): {med[('after', subject)] / med[('after', 'off')]:.2f}x")


if __name__ == "__main__":
    main()
