"""Flow hooks: write a wrap hook once, run it under invoke and ainvoke with no thread hop.

What it shows
    Two middlewares written as *flows* (generator functions taking only ``request``):

    - ``RetryWithBackoff`` (a ``wrap_model_call``): ``response = yield request`` calls the model; a ``TimeoutError``
      is raised at that ``yield``; ``yield Sleep(seconds)`` waits (``time.sleep`` under ``invoke``,
      ``asyncio.sleep`` under ``ainvoke``), then it tries again.
    - ``@wrap_tool_call`` ``memo``: answers a repeated tool call from a cache without yielding (short-circuit), and
      otherwise yields once and stores the result.

    The same agent runs under ``invoke`` and under ``ainvoke``; the recipe checks that under ``ainvoke`` every flow
    step ran on the event loop's thread (no worker thread), that the waits went to the right sleep function, and that
    the plan shows both hooks as ``flow``. The sleeps are recorded instead of slept so it runs in milliseconds.

When to use it
    Any ``wrap_model_call`` / ``wrap_tool_call`` that must work under both ``invoke`` and ``ainvoke``: one body
    instead of a sync method plus an ``a``-prefixed twin, and no thread hop under ``ainvoke``.

Run it: ``python recipes/flow_hooks.py``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

import middleware_kit.flow
from middleware_kit import AgentMiddleware, ModelRequest, ToolCallRequest, create_agent, wrap_tool_call
from middleware_kit.flow import ModelCallFlow, Sleep, ToolCallFlow
from middleware_kit.testing import ScriptedChatModel, tool_call

THREADS: set[int] = set()


class RetryWithBackoff(AgentMiddleware):
    """Retry a timed-out model call up to ``attempts`` times, waiting 1s, 2s, 4s ... in between."""

    def __init__(self, attempts: int = 3) -> None:
        self.attempts = attempts

    def wrap_model_call(self, request: ModelRequest[Any]) -> ModelCallFlow:
        for attempt in range(self.attempts):
            THREADS.add(threading.get_ident())
            try:
                return (yield request)
            except TimeoutError:
                if attempt == self.attempts - 1:
                    raise
                yield Sleep(2.0**attempt)
        raise AssertionError("unreachable")


CACHE: dict[str, str] = {}


@wrap_tool_call
def memo(request: ToolCallRequest) -> ToolCallFlow:
    THREADS.add(threading.get_ident())
    key = f"{request.tool_call['name']}:{sorted(request.tool_call['args'].items())}"
    if key in CACHE:
        return ToolMessage(CACHE[key], tool_call_id=request.tool_call["id"], name=request.tool_call["name"])
    result = yield request
    if isinstance(result, ToolMessage):
        CACHE[key] = str(result.content)
    return result


RUNS: list[str] = []


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    RUNS.append(city)
    return f"sunny in {city}"


def build() -> tuple[Any, ScriptedChatModel]:
    ask = AIMessage("", tool_calls=[tool_call("weather", {"city": "Oslo"})])
    model = ScriptedChatModel([TimeoutError("slow"), ask, TimeoutError("slow"), TimeoutError("slow"), "Sunny."])
    return create_agent(model, [weather], middleware=[RetryWithBackoff(), memo]), model


def main() -> int:
    waits: list[tuple[str, float]] = []

    def record_sleep(seconds: float) -> None:
        waits.append(("sleep", seconds))

    async def record_asleep(seconds: float) -> None:
        waits.append(("asleep", seconds))

    middleware_kit.flow.sleep, middleware_kit.flow.asleep = record_sleep, record_asleep
    question = {"messages": [HumanMessage("Weather in Oslo?")]}

    agent, model = build()
    result = agent.invoke(question)
    assert result["messages"][-1].content == "Sunny.", result["messages"][-1]
    assert model.call_count == 5 and RUNS == ["Oslo"]
    assert waits == [("sleep", 1.0), ("sleep", 1.0), ("sleep", 2.0)], waits
    print("invoke:  5 model calls (3 timeouts retried), waits", [w for _, w in waits])

    waits.clear()
    THREADS.clear()
    agent, model = build()

    async def run() -> tuple[Any, int]:
        return await agent.ainvoke(question), threading.get_ident()

    result, loop_thread = asyncio.run(run())
    assert result["messages"][-1].content == "Sunny."
    assert RUNS == ["Oslo"], RUNS  # the second run's tool call came from memo's cache
    assert waits == [("asleep", 1.0), ("asleep", 1.0), ("asleep", 2.0)], waits
    assert loop_thread in THREADS and len(THREADS) == 1, "a flow under ainvoke runs on the event loop thread"
    print("ainvoke: same answer, waits on asyncio.sleep, every flow step on the loop thread; tool answered from cache")

    plan = str(agent.middleware_plan)
    assert plan.count("flow") >= 2, plan
    print(plan)
    print("OK: one body per wrap hook, under invoke and ainvoke")
    return 0


if __name__ == "__main__":
    sys.exit(main())
