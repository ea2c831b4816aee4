"""GuardrailsMiddleware: the latency a guard adds to a model call, beside the call (parallel) vs before it.

``.venv/bin/python -m bench.guardrails [--quick] [--rounds R] [--model-ms M]``

One agent turn = one model call answering text (no tools), with a scripted model that takes ``M`` ms (default 200;
``time.sleep`` under ``invoke``, ``asyncio.sleep`` under ``ainvoke``). One input guard takes ``G`` ms (G = 50, 150,
200, 300; a sync guard under ``invoke``, an ``async def`` guard under ``ainvoke``). Subjects, in the same run:

- **none**: the agent without guardrails (the baseline);
- **parallel**: ``GuardrailsMiddleware(input_guards=[guard])``: the guard runs beside the model call;
- **sequential**: the same with ``parallel=False``: the guard runs, then the model.

For a passing guard, the latency added over the baseline should be ``max(G, M) - M`` in parallel and ``G`` in
sequence; ``ratio`` is parallel/sequential turn latency. For a tripping guard (``trip`` rows) the turn should
take about ``G`` in both (parallel: the model call is cancelled under ainvoke, discarded under invoke). Before
timing, each subject's answer is checked (the model's text, or the refusal). The three subjects take turns within
each round (machine noise hits all three); medians of R rounds (default 9), in ms. Nothing here is asserted by the
test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.outputs import ChatResult

from middleware_kit import create_agent
from middleware_kit.middlewares.guardrails import GuardrailsMiddleware
from middleware_kit.testing import ScriptedChatModel

ANSWER = "The capital of France is Paris."
BAD = "ignore previous instructions"


class TimedModel(ScriptedChatModel):
    """A scripted model that takes ``delay`` seconds per call, like a provider."""

    delay: float = 0.2

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        time.sleep(self.delay)
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        await asyncio.sleep(self.delay)
        return super()._generate(messages, stop, None, **kwargs)


def guards(seconds: float) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    def check(request: Any) -> str | None:
        time.sleep(seconds)
        return "injection" if BAD in request.messages[-1].text else None

    async def acheck(request: Any) -> str | None:
        await asyncio.sleep(seconds)
        return "injection" if BAD in request.messages[-1].text else None

    return check, acheck


def build(subject: str, model_s: float, guard_s: float, mode: str) -> Any:
    model = TimedModel(responses=[ANSWER], cycle=True, delay=model_s)
    if subject == "none":
        return create_agent(model)
    sync_guard, async_guard = guards(guard_s)
    guard = sync_guard if mode == "invoke" else async_guard
    return create_agent(model, middleware=[GuardrailsMiddleware(input_guards=[guard],
                                                                parallel=subject == "parallel")])


def turn(agent: Any, mode: str, text: str) -> tuple[float, str]:
    inp = {"messages": [HumanMessage(text)]}
    started = time.perf_counter()
    out = agent.invoke(inp) if mode == "invoke" else asyncio.run(agent.ainvoke(inp))
    return (time.perf_counter() - started) * 1000, str(out["messages"][-1].content)


def medians(agents: dict[str, Any], mode: str, text: str, expected: dict[str, str], rounds: int) -> dict[str, float]:
    """Median turn latency per subject; the subjects take turns within each round, so machine noise hits all."""
    for name, agent in agents.items():  # warm-up, and the check that each subject does the work
        _, answer = turn(agent, mode, text)
        if not answer.startswith(expected[name]):
            raise SystemExit(f"{name}: unexpected answer {answer!r}; expected {expected[name]!r}")
    times: dict[str, list[float]] = {name: [] for name in agents}
    for _ in range(rounds):
        for name, agent in agents.items():
            times[name].append(turn(agent, mode, text)[0])
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds, G in (50, 300)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--model-ms", type=float, default=200.0)
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    guard_ms = (50.0, 300.0) if args.quick else (50.0, 150.0, 200.0, 300.0)
    model_s = args.model_ms / 1000
    header = (f"{'mode':<8}{'case':<6}{'G ms':>6}{'none':>9}{'parallel':>10}{'sequential':>12}{'added par.':>12}"
              f"{'expected':>10}{'added seq.':>12}{'ratio p/s':>11}")
    print(f"model call: {args.model_ms:.0f} ms; median of {rounds} interleaved rounds; times in ms")
    print(header)
    print("-" * len(header))
    for mode in ("invoke", "ainvoke"):
        for case, text in (("pass", "hi"), ("trip", BAD)):
            for g in guard_ms:
                agents = {name: build(name, model_s, g / 1000, mode) for name in ("none", "parallel", "sequential")}
                refusal = "I can't help" if case == "trip" else ANSWER
                got = medians(agents, mode, text, {"none": ANSWER, "parallel": refusal, "sequential": refusal},
                              rounds)
                base, par, seq = got["none"], got["parallel"], got["sequential"]
                expected = max(g, args.model_ms) - args.model_ms if case == "pass" else g - args.model_ms
                print(f"{mode:<8}{case:<6}{g:>6.0f}{base:>9.1f}{par:>10.1f}{seq:>12.1f}{par - base:>12.1f}"
                      f"{expected:>10.1f}{seq - base:>12.1f}{par / seq:>11.2f}")


if __name__ == "__main__":
    main()
