"""Logging and tracing: a middleware that reports every hook, live, on LangGraph's custom stream; OpenTelemetry spans.

What it shows
    ``HookLogger``, an ``AgentMiddleware`` subclass that defines every hook with its sync *and* async twin, and
    sends one typed event per hook with ``middleware_kit.events.emit``, passing the hook's ``runtime`` (node hooks)
    or ``request.runtime`` (model and tool chains). The events are consumed with
    ``agent.stream(..., stream_mode="custom")`` (and ``astream``); the order they arrive in is checked against the
    order ``agent.middleware_plan`` predicts, and their metadata (hook, run id, thread id, sequence number) are
    checked too. Then the same agent runs with ``OpenTelemetryCallbackHandler`` (the ``otel`` extra) and an
    in-memory exporter: one span for the agent, one per model call, one per tool call, and one per hook call
    (``"outer.wrap_model_call"``...), nested as the onion runs: the chat span inside the innermost
    ``wrap_model_call`` span. ``inner`` sets ``trace_policy`` so its hook runs record no payload in tracers. Last,
    the run asks for lifecycle events (``run_started``/``run_finished`` with counts and durations).

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
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, MiddlewarePlan, ModelRequest, ToolCallRequest, create_agent
from middleware_kit.events import Event, emit
from middleware_kit.hooks import AsyncModelHandler, AsyncToolHandler, ModelHandler, ToolHandler, ToolResult
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.trace_policy import TracePolicy, omit_payload


class HookLogger(AgentMiddleware):
    """Sends ``{"event": "<name>.<hook>", "middleware": "<name>", "detail": ...}`` for every hook it sees.

    Wrappers write twice: entering (``"<name>.wrap_model_call>"``) and leaving (``"<name>.wrap_model_call<"``).
    Each hook has a sync and an async twin, so neither ``invoke`` nor ``ainvoke`` needs a bridge (the plan shows
    ``direct`` for both). The only attribute is the name: the middleware is stateless.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def _emit(self, runtime: Any, hook: str, detail: str = "") -> None:
        # The event name keeps the entering/leaving mark; the hook metadata is the hook itself.
        emit(f"{self.name}.{hook}", {"detail": detail}, middleware=self.name, hook=hook.rstrip("<>"),
             runtime=runtime)

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


class Quiet(HookLogger):
    """A ``HookLogger`` whose hook runs record no payload in tracers (LangSmith): the state and requests may be
    large, or private. Its runs and their timing stay; the messages stay on the chat-model run."""

    trace_policy = TracePolicy(process_inputs=omit_payload, process_outputs=omit_payload)


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
        model, [get_time], middleware=[HookLogger("outer"), Quiet("inner")], name="tracing_recipe",
        checkpointer=InMemorySaver(),
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


def check_metadata(events: list[Event], thread_id: str) -> None:
    """Typed events: numbered 0.. in arrival order, one run id, the thread id, and the hook that sent each."""
    if [e.seq for e in events] != list(range(len(events))):
        raise SystemExit(f"sequence numbers out of order: {[e.seq for e in events]}")
    if len({e.run_id for e in events}) != 1 or {e.thread_id for e in events} != {thread_id}:
        raise SystemExit("the events of one run should share its run id and thread id")
    for e in events:
        if f"{e.middleware}.{e.hook}" != e.event.rstrip("<>"):
            raise SystemExit(f"{e!r}: the hook metadata does not match the hook that sent it")


def run_sync(agent: Any, question: str) -> list[Event]:
    events = []
    config = {"configurable": {"thread_id": "sync"}}
    for chunk in agent.stream({"messages": [HumanMessage(question)]}, config, stream_mode="custom"):
        events.append(chunk)
        print(f"  #{chunk.seq:<2} {chunk['event']:<28} hook={chunk.hook:<21} {chunk['detail']}")
    check_metadata(events, "sync")
    return events


async def run_async(agent: Any, question: str) -> list[Event]:
    config = {"configurable": {"thread_id": "async"}}
    stream = agent.astream({"messages": [HumanMessage(question)]}, config, stream_mode="custom")
    events = [chunk async for chunk in stream]
    check_metadata(events, "async")
    return events


def trace_with_opentelemetry(agent: Any, question: str) -> None:
    """The same run as OpenTelemetry spans (GenAI attribute names), collected by an in-memory exporter."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        print("\n(OpenTelemetry part not run: pip install 'middleware_kit[otel]')")
        return
    from middleware_kit.otel import OpenTelemetryCallbackHandler

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler = OpenTelemetryCallbackHandler(tracer_provider=provider)
    agent.invoke({"messages": [HumanMessage(question)]}, {"callbacks": [handler],
                                                          "configurable": {"thread_id": "otel"}})
    spans = exporter.get_finished_spans()
    print("\n>>> OpenTelemetry spans")
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        attributes = dict(span.attributes or {})
        print(f"  {span.name:<28} {attributes.get('gen_ai.operation.name')}")
    names = sorted(s.name for s in spans if " " in s.name)  # the GenAI spans: agent, chat, tool
    expected = sorted(["invoke_agent tracing_recipe", "chat scripted", "chat scripted", "execute_tool get_time"])
    if names != expected:
        raise SystemExit(f"unexpected spans: {names}")
    (tool_span,) = [s for s in spans if s.name == "execute_tool get_time"]
    if (tool_span.attributes or {}).get("gen_ai.tool.name") != "get_time":
        raise SystemExit("the tool span should name its tool")
    # every hook is a span, nested as the onion: chat inside inner.wrap_model_call inside outer.wrap_model_call
    by_id = {s.context.span_id: s for s in spans}

    def parent(span: Any) -> str:
        return by_id[span.parent.span_id].name if span.parent is not None else ""

    hook_spans = {s.name for s in spans if " " not in s.name}
    for planned in agent.middleware_plan.hooks:
        for hook in planned.phase.split("+"):  # a before_tool/after_tool pair: one span per hook
            if f"{planned.middleware}.{hook}" not in hook_spans:
                raise SystemExit(f"no span for {planned.middleware}.{hook}: {sorted(hook_spans)}")
    chats = [s for s in spans if s.name == "chat scripted"]
    if {parent(c) for c in chats} != {"inner.wrap_model_call"} or parent(tool_span) != "inner.wrap_tool_call":
        raise SystemExit("the model and tool calls should sit inside the innermost wrap hook spans")


def trace_policy_and_lifecycle(agent: Any, question: str) -> None:
    """``inner``'s trace policy omits its hook payloads in tracers; the run asks for lifecycle events."""
    from langchain_core.tracers.run_collector import RunCollectorCallbackHandler

    collector = RunCollectorCallbackHandler()  # a tracer, as LangSmith's LangChainTracer is
    config = {"callbacks": [collector], "configurable": {"thread_id": "lifecycle", "lifecycle_events": True}}
    events = list(agent.stream({"messages": [HumanMessage(question)]}, config, stream_mode="custom"))
    runs, todo = [], list(collector.traced_runs)
    while todo:
        run = todo.pop()
        runs.append(run)
        todo.extend(run.child_runs)
    inner = [r for r in runs if r.name.startswith("inner.")]
    outer = [r for r in runs if r.name == "outer.before_model"]
    if not inner or any(r.inputs for r in inner) or not all(question in str(r.inputs) for r in outer):
        raise SystemExit("inner's hook runs should record no inputs, outer's should")
    first, last = events[0], events[-1]
    print(f"\n>>> lifecycle: {first['event']} ... {last['event']}: {last['model_calls']} model call(s), "
          f"{last['tool_calls']} tool call(s) in {last['duration_s'] * 1000:.1f} ms")
    if (first["event"], last["event"], last["model_calls"], last["tool_calls"]) != ("run_started", "run_finished",
                                                                                      2, 1):
        raise SystemExit(f"unexpected lifecycle events: {first!r} {last!r}")


def main() -> None:
    agent, model = build_agent()
    plan = agent.middleware_plan
    print(plan)

    question = "What time is it in Tokyo?"
    print(f"\n>>> stream(stream_mode='custom'): {question!r}")
    sync_events = [e.event for e in run_sync(agent, question)]
    async_events = [e.event for e in asyncio.run(run_async(agent, question))]

    expected = expected_events(plan, tool_rounds=1)
    if sync_events != expected:
        raise SystemExit(f"invoke: the hooks ran in an order the plan did not predict:\n{sync_events}\n!=\n{expected}")
    if async_events != expected:
        raise SystemExit(f"ainvoke: the hooks ran in another order than under invoke:\n{async_events}")
    if model.call_count != 4:  # 2 model calls per run, 2 runs
        raise SystemExit(f"expected 4 model calls, got {model.call_count}")
    trace_with_opentelemetry(agent, question)
    trace_policy_and_lifecycle(agent, question)
    # The bridging column of the plan: both twins are defined, so nothing is bridged in either mode.
    if any(h.under_invoke != "direct" or h.under_ainvoke != "direct" for h in plan.hooks):
        raise SystemExit("a hook with both twins should run directly under invoke and ainvoke")
    print(f"\nOK: {len(sync_events)} typed events, in the order agent.middleware_plan predicts, under stream and "
          "astream; spans for the agent, each model call, the tool call and every hook; a trace policy; "
          "lifecycle events.")


if __name__ == "__main__":
    main()
