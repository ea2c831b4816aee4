"""The demo: an offline agent on the bundled scripted model, showing the plan and the order of every hook.

Run it with ``python -m middleware_kit.demo`` (no API key, no network). It builds one agent from decorator and
subclass middlewares, prints the assembled plan, then runs one conversation with a tool round-trip under ``invoke``
and under ``ainvoke``, printing every hook the moment it runs (through LangGraph's custom stream), and checks that
both modes ran the hooks in the same, predicted order.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime

from middleware_kit import (
    AgentMiddleware,
    ModelRequest,
    ToolCallRequest,
    after_agent,
    after_model,
    before_agent,
    before_tool,
    create_agent,
    dynamic_prompt,
    wrap_tool_call,
)
from middleware_kit.hooks import ModelHandler, ToolHandler, ToolResult
from middleware_kit.testing import ScriptedChatModel, tool_call

__all__ = ["build_demo_agent", "main"]


@dataclass(frozen=True)
class DemoContext:
    """Per-run context: who is asking. Immutable, never checkpointed."""

    user: str
    units: str = "celsius"


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"paris": "18°C, light rain", "tokyo": "24°C, clear"}.get(city.lower(), "unknown city")


def emit(hook: str, detail: str = "") -> None:
    """Report a hook on the custom stream (a no-op outside a streamed run)."""
    get_stream_writer()({"hook": hook, "detail": detail})


# -- decorator middlewares -----------------------------------------------------------------------------------------
@before_agent
def greet(state: Any, runtime: Runtime[DemoContext]) -> None:
    emit("greet.before_agent", f"user={runtime.context.user}")


@dynamic_prompt
def persona(request: ModelRequest[DemoContext]) -> str:
    emit("persona.wrap_model_call", "system prompt from context")
    return f"You are a weather assistant for {request.runtime.context.user}. Use {request.runtime.context.units}."


@before_tool
def audit(request: ToolCallRequest) -> None:
    emit("audit.before_tool", f"{request.tool_call['name']}({request.tool_call['args']})")


@wrap_tool_call
def cache(request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
    emit("cache.wrap_tool_call", "miss, calling the tool")
    return handler(request)


@after_model
def check_answer(state: Any, runtime: Runtime[DemoContext]) -> None:
    last = state["messages"][-1]
    emit("check_answer.after_model", "tool calls pending" if getattr(last, "tool_calls", None) else "final answer")


@after_agent
def goodbye(state: Any, runtime: Runtime[DemoContext]) -> None:
    emit("goodbye.after_agent", f"{len(state['messages'])} messages in the thread")


# -- a subclass middleware with sync and async twins ---------------------------------------------------------------
class ModelTimer(AgentMiddleware):
    """Reports every model call. Stateless: it keeps nothing on self, so one instance serves every run."""

    def before_model(self, state: Any, runtime: Runtime[Any]) -> None:
        emit("ModelTimer.before_model", f"{len(state['messages'])} messages so far")

    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> None:
        emit("ModelTimer.before_model", f"{len(state['messages'])} messages so far")

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        emit("ModelTimer.wrap_model_call", "enter")
        response = handler(request)
        emit("ModelTimer.wrap_model_call", "exit")
        return response


def build_demo_agent() -> Any:
    """The demo agent: five decorator middlewares and one subclass, on a scripted model."""
    model = ScriptedChatModel(
        [
            AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Paris"})]),
            lambda messages: f"In Paris it is {messages[-1].content}.",
        ],
        cycle=True,
    )
    return create_agent(
        model,
        [get_weather],
        middleware=[greet, ModelTimer(), persona, audit, cache, check_answer, goodbye],
        context_schema=DemoContext,
        checkpointer=InMemorySaver(),
        name="weather_demo",
    )


def _run_sync(agent: Any, question: str) -> tuple[list[str], str]:
    order: list[str] = []
    answer = ""
    config = {"configurable": {"thread_id": "demo-sync"}}
    for mode, chunk in agent.stream(
        {"messages": [HumanMessage(question)]}, config, context=DemoContext("Ada"), stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            order.append(chunk["hook"])
            print(f"  {len(order):>2}. {chunk['hook']:<28} {chunk['detail']}")
        else:
            answer = chunk["messages"][-1].content
    return order, answer


async def _run_async(agent: Any, question: str) -> tuple[list[str], str]:
    order: list[str] = []
    answer = ""
    config = {"configurable": {"thread_id": "demo-async"}}
    async for mode, chunk in agent.astream(
        {"messages": [HumanMessage(question)]}, config, context=DemoContext("Ada"), stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            order.append(chunk["hook"])
        else:
            answer = chunk["messages"][-1].content
    return order, answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m middleware_kit.demo", description=__doc__)
    parser.add_argument("--mermaid", action="store_true", help="also print the graph as a Mermaid diagram")
    args = parser.parse_args(argv)

    agent = build_demo_agent()
    print(agent.middleware_plan)
    if args.mermaid:
        print()
        print(agent.middleware_plan.mermaid())
    question = "What's the weather in Paris?"
    print(f"\n>>> invoke: {question!r} (every hook reports itself as it runs)")
    sync_order, answer = _run_sync(agent, question)
    print(f"<<< {answer}")
    async_order, async_answer = asyncio.run(_run_async(agent, question))
    same = async_order == sync_order and async_answer == answer
    print(f"\n>>> ainvoke: same {len(async_order)} hooks in the same order: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
