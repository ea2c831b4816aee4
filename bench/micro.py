"""Per-middleware cost without a graph: middleware_kit's chains and fused-node runner vs plain closures.

One invoke of the benchmark runs, per middleware: before_model x2, after_model x2, wrap_model_call x2 and
wrap_tool_call x1. This module times exactly those pieces in isolation (timeit-style: a tight loop, best of
several repeats), at N=0 and N=20, so the per-middleware figure is not buried in the milliseconds of
LangGraph's own work and of the machine's noise. It uses middleware_kit's engine directly (``build_pipeline``,
``compose``, ``call_sync``, ``NodeRunner``) - internal APIs: if they change, update this module.

The baseline is what the hand-built graph does: the same hook methods, called from a loop or nested closures.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import StateGraph

from bench.fixtures import TOOL_ARGS, NoopMiddleware, add, noops
from bench.subjects import HandRequest, nest_closures
from middleware_kit._engine.chain import call_sync, compose
from middleware_kit._engine.phases import NodeRunner
from middleware_kit._engine.pipeline import build_pipeline
from middleware_kit._engine.schema import merge_state_schemas
from middleware_kit._engine.state import StateSemantics
from middleware_kit.testing import make_request, make_runtime
from middleware_kit.types import AgentState, ModelResponse, ToolCallRequest

__all__ = ["MicroResult", "format_micro", "run_micro"]

N_HIGH = 20
PER_INVOKE = {"before_model": 2, "after_model": 2, "wrap_model_call": 2, "wrap_tool_call": 1}
"""How many times one invoke of the benchmark runs each hook of one middleware."""


def _best_ns(fn: Callable[[], object], loops: int, repeats: int) -> float:
    """Best-of-``repeats`` time of one ``fn()`` call, in ns (GC off during the loops, as timeit does)."""
    best = float("inf")
    perf = time.perf_counter
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = perf()
            for _ in range(loops):
                fn()
            best = min(best, perf() - t0)
    finally:
        gc.enable()
    return best / loops * 1e9


def _mk_pieces(n: int) -> dict[str, Callable[[], object]]:
    mws = noops(n)
    pipeline = build_pipeline(mws, client_tools=[add])
    response: ModelResponse[Any] = ModelResponse(result=[AIMessage(content="done")])
    tool_message = ToolMessage(content="3", tool_call_id="call_bench", name="add")

    def model_base(request: Any) -> Any:
        return response

    async def amodel_base(request: Any) -> Any:
        return response

    def tool_base(request: Any) -> Any:
        return tool_message

    async def atool_base(request: Any) -> Any:
        return tool_message

    model_chain, _ = compose(pipeline.model_layers, model_base, amodel_base)
    tool_chain, _ = compose(pipeline.tool_layers, tool_base, atool_base)
    request = make_request()
    call = {"name": "add", "args": TOOL_ARGS, "id": "call_bench", "type": "tool_call"}
    tool_request = ToolCallRequest(call, add, {"messages": []})  # type: ignore[arg-type]

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(AgentState)
    keys = merge_state_schemas([("bench", AgentState)], name="Bench").keys
    semantics = StateSemantics(keys, graph.channels)
    befores = NodeRunner(pipeline.phases["before_model"], semantics)
    afters = NodeRunner(pipeline.phases["after_model"], semantics)
    state = {"messages": [HumanMessage(content="What is 1 + 2?")]}
    runtime = make_runtime()
    return {
        "before_model": lambda: befores.run(state, runtime),
        "after_model": lambda: afters.run(state, runtime),
        "wrap_model_call": lambda: call_sync(model_chain, request),
        "wrap_tool_call": lambda: call_sync(tool_chain, tool_request),
    }


def _hand_pieces(n: int) -> dict[str, Callable[[], object]]:
    mws: list[NoopMiddleware] = noops(n)
    message = AIMessage(content="done")
    tool_message = ToolMessage(content="3", tool_call_id="call_bench", name="add")
    befores = tuple(mw.before_model for mw in mws)
    afters = tuple(mw.after_model for mw in reversed(mws))
    model_chain = nest_closures([mw.wrap_model_call for mw in mws], lambda request: message)
    tool_chain = nest_closures([mw.wrap_tool_call for mw in mws], lambda request: tool_message)
    state = {"messages": [HumanMessage(content="What is 1 + 2?")]}
    runtime = make_runtime()

    def run_hooks(hooks: tuple[Callable[[Any, Any], Any], ...]) -> None:
        for hook in hooks:
            if hook(state, runtime) is not None:
                raise AssertionError("a no-op hook returned something")

    return {
        "before_model": lambda: run_hooks(befores),
        "after_model": lambda: run_hooks(afters),
        "wrap_model_call": lambda: model_chain(HandRequest(state["messages"], state, runtime)),
        "wrap_tool_call": lambda: tool_chain(None),
    }


@dataclass(frozen=True)
class MicroResult:
    """ns per call of each piece, at N=0 and N=N_HIGH, for middleware_kit and the plain baseline."""

    mk: dict[str, tuple[float, float]]
    hand: dict[str, tuple[float, float]]

    @staticmethod
    def per_middleware(pieces: dict[str, tuple[float, float]]) -> dict[str, float]:
        """ns per middleware per call of each piece."""
        return {k: (hi - lo) / N_HIGH for k, (lo, hi) in pieces.items()}

    @staticmethod
    def per_invoke_us(pieces: dict[str, tuple[float, float]]) -> float:
        """µs per middleware per benchmark invoke (each piece weighted by how often an invoke runs it)."""
        per = MicroResult.per_middleware(pieces)
        return sum(per[k] * PER_INVOKE[k] for k in PER_INVOKE) / 1000


def run_micro(loops: int = 5000, repeats: int = 7) -> MicroResult:
    results: dict[str, dict[str, tuple[float, float]]] = {}
    for label, make in (("mk", _mk_pieces), ("hand", _hand_pieces)):
        low, high = make(0), make(N_HIGH)
        results[label] = {
            k: (_best_ns(low[k], loops, repeats), _best_ns(high[k], max(loops // 4, 100), repeats)) for k in low
        }
    return MicroResult(results["mk"], results["hand"])


def format_micro(result: MicroResult) -> str:
    mk_per, hand_per = MicroResult.per_middleware(result.mk), MicroResult.per_middleware(result.hand)
    lines = [
        f"per-middleware cost without a graph (timeit-style, best of repeats, GC off; N=0 vs N={N_HIGH})",
        f"  {'piece':<16} {'runs/invoke':>11} {'mk ns/call N=0':>15} {'mk ns/mw':>9} "
        f"{'hand ns/call N=0':>17} {'hand ns/mw':>11}",
    ]
    for k, times in PER_INVOKE.items():
        lines.append(
            f"  {k:<16} {times:>11} {result.mk[k][0]:>15,.0f} {mk_per[k]:>9,.0f} {result.hand[k][0]:>17,.0f} "
            f"{hand_per[k]:>11,.0f}"
        )
    lines.append(
        f"  => per middleware per invoke: middleware_kit {MicroResult.per_invoke_us(result.mk):.2f} µs, "
        f"plain closures/loops {MicroResult.per_invoke_us(result.hand):.2f} µs "
        f"(the floor for the graph-level slope)"
    )
    return "\n".join(lines)
