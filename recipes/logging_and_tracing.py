"""Logging and tracing: a middleware that reports every hook, live, on LangGraph's custom stream.

What it shows
    ``HookLogger``, an ``AgentMiddleware`` subclass that defines every hook with its sync *and* async twin, and
    writes one event per hook with the run's stream writer: ``runtime.stream_writer`` in node hooks,
    ``request.runtime.stream_writer`` in the model and tool chains (``langgraph.config.get_stream_writer()`` works
    too, anywhere inside a run). The events are consumed with ``agent.stream(..., stream_mode="custom")`` (and
    ``astream``), and the order they arrive in is checked against the order ``agent.middleware_plan`` predicts.

When to use it
    Whenever you want to *see* what your pipeline does: debugging an ordering question, feeding a tracing or
    metrics backend, or showing progress in a UI. The custom stream delivers each event the moment the hook runs,
    and nothing is kept on the middleware instance (one instance serves many concurrent runs).

Run it: ``python recipes/logging_and_tracing.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, MiddlewarePlan, ModelRequest, ToolCallRequest, create_agent
from middleware_kit.hooks import AsyncModelHandler, AsyncToolHandler, ModelHandler, ToolHandler, ToolResult
from middleware_kit.testing import ScriptedChatModel, tool_call


def _writer(runtime: Any) -> Any:
    """The run's stream writer: from the runtime the hook received, else from LangGraph's context."""
    writer = getattr(runtime, "stream_writer", None)
    return writer if writer is not None else get_stream_writer()


class HookLogger(AgentMiddleware):
    """Writes ``{"event": "<name>.<hook>", "detail": ...}`` on the custom stream for every hook it sees.

    Wrappers write twice: entering (``"<name>.wrap_model_call>"``) and leaving (``"<name>.wrap_model_call<"``).
    Each hook has a sync and an async twin, so neither ``invoke`` nor ``ainvoke`` needs a bridge (the plan shows
    ``direct`` for both). The only attribute is the name: the middleware is stateless.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def _emit(self, runtime: Any, hook: str, detail: str = "") -> None:
        _writer(runtime)({"event": f"{self.name}.{hook}", "detail": detail})

    # -- node hooks: (state, runtime) ------------------------------------------------------------------------
    def before_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._emit(runtime, "before_agent", f"{len(state['messages'])} message(s) in")

    async def abefore_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._emit(runtime, "before_agent", f"{len(state['messages'])} message(s) in")

    def before_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._emit(runtime, "before_model")

    async def abefore_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._emit(runtime, "before_model")

    def after_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        last = state["messages"][-1]
        self._emit(runtime, "after_model", "tool calls" if getattr(last, "tool_calls", None) else "final answer")

    async def aafter_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        last = state["messages"][-1]
        self._emit(runtime, "after_model", "tool calls" if getattr(last, "tool_calls", None) else "final answer")

    def after_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._emit(runtime, "after_agent", f"{len(state['messages'])} message(s) out")

    async def aafter_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._emit(runtime, "after_agent", f"{len(state['messages'])} message(s) out")

    # -- model chain: the runtime is request.runtime ---------------------------------------------------------
    def modify_model_request(self, request: ModelRequest[Any], state: Any) -> ModelRequest[Any]:
        self._emit(request.runtime, "modify_model_request", f"{len(request.messages)} message(s) to the model")
        return request

    async def amodify_model_request(self, request: ModelRequest[Any], state: Any) -> ModelRequest[Any]:
        self._emit(request.runtime, "modify_model_request", f"{len(request.messages)} message(s) to the model")
        return request

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        self._emit(request.runtime, "wrap_model_call>")
        response = handler(request)
        self._emit(request.runtime, "wrap_model_call<", repr(response.result[-1].text)[:40])
        return response

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> Any:
        self._emit(request.runtime, "wrap_model_call>")
        response = await handler(request)
        self._emit(request.runtime, "wrap_model_call<", repr(response.result[-1].text)[:40])
        return response

    # -- tool chain: the runtime is request.runtime (LangGraph's ToolRuntime) --------------------------------
    def before_tool(self, request: ToolCallRequest) -> None:
        self._emit(request.runtime, "before_tool", f"{request.tool_call['name']}({request.tool_call['args']})")

    async def abefore_tool(self, request: ToolCallRequest) -> None:
        self._emit(request.runtime, "before_tool", f"{request.tool_call['name']}({request.tool_call['args']})")

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        self._emit(request.runtime, "wrap_tool_call>")
        result = handler(request)
        self._emit(request.runtime, "wrap_tool_call<")
        return result

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncToolHandler) -> ToolResult:
        self._emit(request.runtime, "wrap_tool_call>")
        result = await handler(request)
        self._emit(request.runtime, "wrap_tool_call<")
        return result

    def after_tool(self, request: ToolCallRequest, result: ToolResult) -> None:
        self._emit(request.runtime, "after_tool", f"-> {getattr(result, 'content', result)!r}")

    async def aafter_tool(self, request: ToolCallRequest, result: ToolResult) -> None:
        self._emit(request.runtime, "after_tool", f"-> {getattr(result, 'content', result)!r}")


@tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return {"paris": "14:05", "tokyo": "21:05"}.get(city.lower(), "unknown")


def build_agent() -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(
        [
            AIMessage("", tool_calls=[tool_call("get_time", {"city": "Tokyo"})]),
            lambda messages: f"It is {messages[-1].content} in Tokyo.",
        ],
        cycle=True,  # the same two-step script serves the invoke run and the ainvoke run
    )
    agent = create_agent(
        model, [get_time], middleware=[HookLogger("outer"), HookLogger("inner")], name="tracing_recipe"
    )
    return agent, model


def expected_events(plan: MiddlewarePlan, tool_rounds: int) -> list[str]:
    """The events a run must produce, derived from the plan alone (no knowledge of the middleware list).

    Node phases come from ``plan.phase(...)`` (already in run order: ``after_*`` reversed). The chains come from
    ``plan.model_chain``/``plan.tool_chain`` (outermost first): walking in, each layer's ``before``-side hook runs;
    walking back out (innermost first), the ``after``-side.
    """

    def node(phase: str) -> list[str]:
        return [f"{mw}.{phase}" for mw in plan.phase(phase)]

    def onion(layers: tuple[str, ...]) -> list[str]:
        going_in: list[str] = []
        coming_out: list[str] = []
        for layer in layers:
            owner, hooks = layer.split(".", 1)
            for hook in hooks.split("+"):  # a before_tool/after_tool pair is one layer: "X.before_tool+after_tool"
                if hook in ("before_tool", "modify_model_request"):
                    going_in.append(f"{owner}.{hook}")
                elif hook == "after_tool":
                    coming_out.append(f"{owner}.{hook}")
                else:  # a wrapper: entering and leaving
                    going_in.append(f"{owner}.{hook}>")
                    coming_out.append(f"{owner}.{hook}<")
        return going_in + coming_out[::-1]

    model_call = [*node("before_model"), *onion(plan.model_chain), *node("after_model")]
    tool_call_events = onion(plan.tool_chain)
    events = node("before_agent")
    for _ in range(tool_rounds):
        events += model_call + tool_call_events
    return events + model_call + node("after_agent")


def run_sync(agent: Any, question: str) -> list[str]:
    events = []
    for chunk in agent.stream({"messages": [HumanMessage(question)]}, stream_mode="custom"):
        events.append(chunk["event"])
        print(f"  {len(events):>2}. {chunk['event']:<28} {chunk['detail']}")
    return events


async def run_async(agent: Any, question: str) -> list[str]:
    stream = agent.astream({"messages": [HumanMessage(question)]}, stream_mode="custom")
    return [chunk["event"] async for chunk in stream]


def main() -> None:
    agent, model = build_agent()
    plan = agent.middleware_plan
    print(plan)

    question = "What time is it in Tokyo?"
    print(f"\n>>> stream(stream_mode='custom'): {question!r}")
    sync_events = run_sync(agent, question)
    async_events = asyncio.run(run_async(agent, question))

    expected = expected_events(plan, tool_rounds=1)
    if sync_events != expected:
        raise SystemExit(f"invoke: the hooks ran in an order the plan did not predict:\n{sync_events}\n!=\n{expected}")
    if async_events != expected:
        raise SystemExit(f"ainvoke: the hooks ran in another order than under invoke:\n{async_events}")
    if model.call_count != 4:  # 2 model calls per run, 2 runs
        raise SystemExit(f"expected 4 model calls, got {model.call_count}")
    # The bridging column of the plan: both twins are defined, so nothing is bridged in either mode.
    if any(h.under_invoke != "direct" or h.under_ainvoke != "direct" for h in plan.hooks):
        raise SystemExit("a hook with both twins should run directly under invoke and ainvoke")
    print(f"\nOK: {len(sync_events)} events, in the order agent.middleware_plan predicts, under stream and astream.")


if __name__ == "__main__":
    main()
