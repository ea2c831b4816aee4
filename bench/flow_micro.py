"""Per-layer cost of the three ways to write a wrap hook, without a graph: flows vs async twins vs sync-only.

The same no-op middlewares as the async benchmark (``FlowNoopMiddleware``: ``wrap_model_call``/``wrap_tool_call``
written once, as generators; ``AsyncNoopMiddleware``: a sync method and an async twin; ``NoopMiddleware``: sync
only), N of them, through middleware_kit's own chains (``build_pipeline``, ``compose``, ``call_sync`` /
``call_async``): one model-chain call and one tool-chain call, under ``invoke`` and ``ainvoke``. Timed interleaved
(every case one short batch per round, best batch over many rounds, GC off), so a noisy stretch of the machine
touches every case alike. The figure of interest is µs per layer call: (N=N_HIGH - N=0) / N_HIGH.

``python -m bench.flow_micro`` runs it alone.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from bench.fixtures import TOOL_ARGS, AsyncNoopMiddleware, FlowNoopMiddleware, NoopMiddleware, add, noops
from bench.report import Verdict
from middleware_kit._engine.chain import call_async, call_sync, compose
from middleware_kit._engine.pipeline import build_pipeline
from middleware_kit.testing import make_request
from middleware_kit.types import ModelResponse, ToolCallRequest

__all__ = ["FLOW_KINDS", "FlowMicroResult", "flow_verdict", "format_flow_micro", "run_flow_micro"]

N_HIGH = 20
FLOW_KINDS: dict[str, type[Any]] = {
    "flow": FlowNoopMiddleware,
    "async twin": AsyncNoopMiddleware,
    "sync-only": NoopMiddleware,
}
"""How the wrap hooks are written -> the bench no-op middleware written that way."""


def _chains(cls: type[Any], n: int) -> list[tuple[Callable[[], object], Callable[[], Awaitable[object]]]]:
    """(sync call, async call) of the model chain and of the tool chain of ``n`` middlewares of ``cls``."""
    pipeline = build_pipeline(noops(n, cls), client_tools=[add])
    response: ModelResponse[Any] = ModelResponse(result=[AIMessage(content="done")])
    tool_message = ToolMessage(content="3", tool_call_id="call_bench", name="add")

    async def amodel(request: Any) -> Any:
        return response

    async def atool(request: Any) -> Any:
        return tool_message

    request = make_request()
    call = {"name": "add", "args": TOOL_ARGS, "id": "call_bench", "type": "tool_call"}
    tool_request = ToolCallRequest(call, add, {"messages": []})  # type: ignore[arg-type]
    out: list[tuple[Callable[[], object], Callable[[], Awaitable[object]]]] = []
    for layers, base, abase, req in (
        (pipeline.model_layers, lambda r: response, amodel, request),
        (pipeline.tool_layers, lambda r: tool_message, atool, tool_request),
    ):
        chain, achain = compose(layers, base, abase)
        out.append((partial(call_sync, chain, req), partial(call_async, achain, req)))
    return out


@dataclass(frozen=True)
class FlowMicroResult:
    """Best µs of one model-chain call plus one tool-chain call, by (kind, mode, N)."""

    us: dict[tuple[str, str, int], float]

    def per_layer(self, kind: str, mode: str) -> float:
        """µs per layer call (the model chain's and the tool chain's layers together: 2 per middleware)."""
        return (self.us[kind, mode, N_HIGH] - self.us[kind, mode, 0]) / (2 * N_HIGH)


def run_flow_micro(rounds: int = 150, loops: int = 40) -> FlowMicroResult:
    """Interleaved rounds; in each, every (kind, N) case runs ``loops`` calls per mode; the best batch counts."""
    cases = {(kind, n): _chains(cls, n) for kind, cls in FLOW_KINDS.items() for n in (0, N_HIGH)}
    best: dict[tuple[str, str, int], float] = {}
    perf = time.perf_counter

    async def measure() -> None:
        for _ in range(rounds):
            for (kind, n), chains in cases.items():
                t0 = perf()
                for _ in range(loops):
                    for sync_call, _async_call in chains:
                        sync_call()
                elapsed = perf() - t0
                best[kind, "invoke", n] = min(best.get((kind, "invoke", n), float("inf")), elapsed)
                t0 = perf()
                for _ in range(loops):
                    for _sync_call, async_call in chains:
                        await async_call()
                elapsed = perf() - t0
                best[kind, "ainvoke", n] = min(best.get((kind, "ainvoke", n), float("inf")), elapsed)

    gc.collect()
    gc.disable()
    try:
        asyncio.run(measure())
    finally:
        gc.enable()
    return FlowMicroResult({key: seconds / loops * 1e6 for key, seconds in best.items()})


def format_flow_micro(result: FlowMicroResult) -> str:
    lines = [
        f"wrap hooks written as flows vs async twins vs sync-only, without a graph (one model-chain + one tool-chain "
        f"call, best batch of interleaved rounds, GC off; N=0 vs N={N_HIGH})",
        f"  {'hooks':<11} {'mode':<8} {'µs/call N=0':>12} {f'µs/call N={N_HIGH}':>13} {'µs per layer call':>18}",
    ]
    for kind in FLOW_KINDS:
        for mode in ("invoke", "ainvoke"):
            lines.append(
                f"  {kind:<11} {mode:<8} {result.us[kind, mode, 0]:>12.2f} {result.us[kind, mode, N_HIGH]:>13.2f} "
                f"{result.per_layer(kind, mode):>18.3f}"
            )
    twin = result.per_layer("async twin", "ainvoke")
    for kind in ("flow", "sync-only"):
        lines.append(
            f"  => {kind} / async twin per layer call under ainvoke: {result.per_layer(kind, 'ainvoke'):.3f} / "
            f"{twin:.3f} µs = {result.per_layer(kind, 'ainvoke') / twin:.2f}x"
        )
    sync = result.per_layer("sync-only", "invoke")
    lines.append(
        f"  => flow / sync-only per layer call under invoke: {result.per_layer('flow', 'invoke'):.3f} / {sync:.3f} µs "
        f"= {result.per_layer('flow', 'invoke') / sync:.2f}x"
    )
    return "\n".join(lines)


def flow_verdict(result: FlowMicroResult) -> Verdict:
    """The target: a wrap hook written once, as a flow, costs no more than an async twin under ``ainvoke``."""
    flow, twin = result.per_layer("flow", "ainvoke"), result.per_layer("async twin", "ainvoke")
    return Verdict(
        "flow wrap hook per layer call under ainvoke <= 1.1x an async twin (no graph)",
        flow <= 1.1 * twin,
        f"{flow:.3f} / {twin:.3f} µs = {flow / twin:.2f}x",
    )


if __name__ == "__main__":
    print(format_flow_micro(run_flow_micro()))
