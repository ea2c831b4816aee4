"""OpenTelemetry spans from langchain-core callbacks: names, GenAI attributes, nesting, failures, no contents."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool

if importlib.util.find_spec("opentelemetry.sdk") is None:  # the otel extra
    if os.environ.get("CI") == "true":
        pytest.fail("CI must test the otel extra: pip install -e '.[otel]'", pytrace=False)
    pytest.skip("the otel extra is not installed (pip install -e '.[otel]')", allow_module_level=True)

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from middleware_kit import create_agent
from middleware_kit.otel import OpenTelemetryCallbackHandler
from middleware_kit.testing import ScriptedChatModel, tool_call

SECRET = "alice@example.com"


def tracing(capture_content: bool = False) -> tuple[OpenTelemetryCallbackHandler, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OpenTelemetryCallbackHandler(tracer_provider=provider, capture_content=capture_content), exporter


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        out.setdefault(span.name, []).append(span)
    return out


def parent_name(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> str | None:
    if span.parent is None:
        return None
    return next(s.name for s in spans if s.context.span_id == span.parent.span_id)


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


@tool
def broken(city: str) -> str:
    """Always fails."""
    raise RuntimeError("backend down")


def answer(text: str) -> AIMessage:
    return AIMessage(text, usage_metadata={"input_tokens": 12, "output_tokens": 3, "total_tokens": 15},
                     response_metadata={"finish_reason": "stop", "model_name": "scripted-1"})


def weather_agent(*tools_called: str) -> Any:
    """Calls ``tools_called`` in parallel, then answers; decided from the messages, so concurrent runs can share it."""

    def reply(messages: list[Any]) -> AIMessage:
        if isinstance(messages[-1], HumanMessage):
            return AIMessage("", tool_calls=[tool_call(t, {"city": SECRET}, id=f"call_{i}")
                                             for i, t in enumerate(tools_called)],
                             usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15})
        return answer(f"Weather for {SECRET}: sunny")

    return create_agent(ScriptedChatModel([reply], cycle=True), [lookup, broken], name="weather")


def call(agent: Any, mode: str, handler: Any, **config: Any) -> Any:
    cfg: RunnableConfig = {"callbacks": [handler], **config}  # type: ignore[typeddict-item]
    inp = {"messages": [HumanMessage(f"Weather for {SECRET}?")]}
    if mode == "invoke":
        return agent.invoke(inp, cfg)
    return asyncio.run(agent.ainvoke(inp, cfg))


def test_agent_model_and_parallel_tool_spans(mode: str) -> None:
    handler, exporter = tracing()
    call(weather_agent("lookup", "lookup"), mode, handler, configurable={"thread_id": "t1"})
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    assert sorted(named) == ["chat scripted", "execute_tool lookup", "invoke_agent weather"]
    (agent,) = named["invoke_agent weather"]
    assert dict(agent.attributes or {}) == {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather",
                                            "gen_ai.conversation.id": "t1"}
    first, second = sorted(named["chat scripted"], key=lambda s: s.start_time or 0)
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "scripted"
    assert (first.attributes["gen_ai.usage.input_tokens"], first.attributes["gen_ai.usage.output_tokens"]) == (10, 5)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert second.attributes["gen_ai.response.model"] == "scripted-1"
    tools = named["execute_tool lookup"]
    assert sorted(str((s.attributes or {})["gen_ai.tool.call.id"]) for s in tools) == ["call_0", "call_1"]
    assert all((s.attributes or {})["gen_ai.operation.name"] == "execute_tool" for s in tools)
    # nesting: one trace, everything a child of the agent span; parallel tool calls are siblings
    assert {s.context.trace_id for s in spans} == {agent.context.trace_id}
    assert all(parent_name(s, spans) == "invoke_agent weather" for s in spans if s is not agent)
    assert all(s.status.status_code == StatusCode.UNSET for s in spans)


def test_no_message_contents_unless_asked(mode: str) -> None:
    handler, exporter = tracing()
    call(weather_agent("lookup"), mode, handler)
    for span in exporter.get_finished_spans():
        assert SECRET not in repr(dict(span.attributes or {})), span.name
    handler, exporter = tracing(capture_content=True)
    call(weather_agent("lookup"), mode, handler)
    named = by_name(exporter.get_finished_spans())
    chat = named["chat scripted"][0].attributes or {}
    assert SECRET in str(chat["gen_ai.input.messages"])
    assert SECRET in str((named["chat scripted"][1].attributes or {})["gen_ai.output.messages"])
    tool_span = named["execute_tool lookup"][0].attributes or {}
    assert SECRET in str(tool_span["gen_ai.tool.call.arguments"])
    assert str(tool_span["gen_ai.tool.call.result"]) == f"{SECRET}: sunny"


def test_failures_set_status_and_record_the_exception(mode: str) -> None:
    handler, exporter = tracing()
    with pytest.raises(RuntimeError, match="backend down"):
        call(weather_agent("broken", "lookup"), mode, handler)
    named = by_name(exporter.get_finished_spans())
    (failed,) = named["execute_tool broken"]
    assert failed.status.status_code == StatusCode.ERROR and "backend down" in (failed.status.description or "")
    assert [e.name for e in failed.events] == ["exception"]
    assert (failed.attributes or {})["error.type"] == "RuntimeError"
    # Its parallel sibling did not fail. Under ainvoke LangGraph cancels a sibling still running when one task raises,
    # so whether the sibling's span finished depends on which task the event loop ran first.
    if mode == "invoke" or "execute_tool lookup" in named:
        assert named["execute_tool lookup"][0].status.status_code == StatusCode.UNSET
    assert named["invoke_agent weather"][0].status.status_code == StatusCode.ERROR

    handler, exporter = tracing()
    agent = create_agent(ScriptedChatModel([TimeoutError("provider timed out")]), name="weather")
    with pytest.raises(TimeoutError):
        call(agent, mode, handler)
    named = by_name(exporter.get_finished_spans())
    assert named["chat scripted"][0].status.status_code == StatusCode.ERROR
    assert named["invoke_agent weather"][0].status.status_code == StatusCode.ERROR


def test_hook_runs_become_nested_hook_spans(mode: str) -> None:
    """The engine will open a chain run per hook, named "{middleware}.{hook}": spans nest like those runs, skipping
    runs that are not hooks (their children move up to the nearest traced ancestor)."""
    handler, exporter = tracing()
    model = ScriptedChatModel([answer("hi")], cycle=True)

    def inner(x: Any, config: RunnableConfig) -> Any:
        return model.invoke(x, config)

    async def ainner(x: Any, config: RunnableConfig) -> Any:
        return await model.ainvoke(x, config)

    chain = RunnableLambda(inner, ainner, name="B.wrap_model_call")
    plumbing = RunnableLambda(lambda x: x, name="plumbing") | chain
    outer = RunnableLambda(lambda x, config: plumbing.invoke(x, config),
                           lambda x, config: plumbing.ainvoke(x, config), name="A.wrap_model_call")
    root = RunnableLambda(lambda x, config: outer.invoke(x, config),
                          lambda x, config: outer.ainvoke(x, config), name="my_agent")
    cfg: RunnableConfig = {"callbacks": [handler]}
    if mode == "invoke":
        root.invoke("q", cfg)
    else:
        asyncio.run(root.ainvoke("q", cfg))
    spans = exporter.get_finished_spans()
    assert {s.name: parent_name(s, spans) for s in spans} == {
        "invoke_agent my_agent": None,
        "A.wrap_model_call": "invoke_agent my_agent",
        "B.wrap_model_call": "A.wrap_model_call",
        "chat scripted": "B.wrap_model_call",
    }
    hook = by_name(spans)["B.wrap_model_call"][0].attributes or {}
    assert (hook["middleware_kit.middleware"], hook["middleware_kit.hook"]) == ("B", "wrap_model_call")


def test_a_failing_hook_run_is_an_error_span() -> None:
    handler, exporter = tracing()

    def refuse(x: Any) -> Any:
        raise ValueError("bad input")

    hook: RunnableLambda[Any, Any] = RunnableLambda(refuse, name="Guard.before_model")
    root: RunnableLambda[Any, Any] = RunnableLambda(lambda x, config: hook.invoke(x, config), name="agent")
    with pytest.raises(ValueError):
        root.invoke("q", {"callbacks": [handler]})
    (span,) = by_name(exporter.get_finished_spans())["Guard.before_model"]
    assert span.status.status_code == StatusCode.ERROR
    assert span.events[0].attributes is not None and span.events[0].attributes["exception.type"] == "ValueError"


def test_one_handler_serves_concurrent_runs() -> None:
    handler, exporter = tracing()
    agent = weather_agent("lookup", "lookup", "lookup")
    threads = [threading.Thread(target=call, args=(agent, "invoke", handler)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 6
    for root in roots:
        mine = [s for s in spans if s.context.trace_id == root.context.trace_id]
        assert sorted(s.name for s in mine) == sorted(
            ["invoke_agent weather", "chat scripted", "chat scripted", *["execute_tool lookup"] * 3])
    assert handler._spans == {} and handler._parent == {}  # nothing left behind after the runs


def test_an_interrupt_is_not_an_error() -> None:
    from langgraph.errors import GraphInterrupt

    handler, exporter = tracing()

    def pause(x: Any) -> Any:
        raise GraphInterrupt(())

    gate: RunnableLambda[Any, Any] = RunnableLambda(pause, name="Gate.after_model")
    root: RunnableLambda[Any, Any] = RunnableLambda(lambda x, config: gate.invoke(x, config), name="agent")
    with pytest.raises(GraphInterrupt):
        root.invoke("q", {"callbacks": [handler]})
    (span,) = by_name(exporter.get_finished_spans())["Gate.after_model"]
    assert span.status.status_code == StatusCode.UNSET and not span.events
    assert (span.attributes or {})["middleware_kit.interrupted"] is True
