"""``AgentMiddleware.trace_policy``, ``TracePolicy``, ``configure_trace_policy``: what hook runs record (LangChain
1.5's names and behaviour): tracers get the processed payload, other handlers the real one; the chat-model run keeps
its messages; a processor never changes or breaks the run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import langgraph.types
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from langchain_core.tracers.schemas import Run
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.trace_policy import TracePolicy, configure_trace_policy, omit_payload
from middleware_kit.types import ModelRequest, ToolCallRequest

MODES = ["invoke", "ainvoke"]
SECRET = "my card is 4111 1111 1111 1111"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Hooks(AgentMiddleware):
    def __init__(self, name: str, policy: TracePolicy | None = None) -> None:
        self.name = name
        if policy is not None:
            self.trace_policy = policy

    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return None

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        return handler(request)

    def wrap_tool_call(self, request: ToolCallRequest, handler: Any) -> Any:
        return handler(request)


@pytest.fixture(autouse=True)
def no_default_policy() -> Iterator[None]:
    configure_trace_policy(None)
    yield
    configure_trace_policy(None)


def run(mode: str, *middleware: Any, handlers: list[Any]) -> Any:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    agent = create_agent(model, [add], middleware=list(middleware), name="calc")
    inp = {"messages": [HumanMessage(SECRET)]}
    if mode == "invoke":
        return agent.invoke(inp, {"callbacks": handlers})
    return asyncio.run(agent.ainvoke(inp, {"callbacks": handlers}))


def traced(collector: RunCollectorCallbackHandler) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}

    def walk(run: Run) -> None:
        out.setdefault(run.name, []).append(run)
        for child in run.child_runs:
            walk(child)

    for root in collector.traced_runs:
        walk(root)
    return out


class Inputs(BaseCallbackHandler):
    """A plain handler (not a tracer): it always sees the real payload."""

    def __init__(self) -> None:
        self.inputs: dict[str, list[Any]] = {}

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.inputs.setdefault(str(kwargs.get("name")), []).append(inputs)


def test_the_names_are_langgraphs() -> None:
    assert TracePolicy is langgraph.types.TracePolicy and omit_payload is langgraph.types.omit_payload
    assert AgentMiddleware.trace_policy is None


@pytest.mark.parametrize("mode", MODES)
def test_omit_payload_keeps_the_run_drops_the_inputs_for_tracers_only(mode: str) -> None:
    collector, plain = RunCollectorCallbackHandler(), Inputs()
    run(mode, Hooks("quiet", TracePolicy(process_inputs=omit_payload)), Hooks("loud"), handlers=[collector, plain])
    runs = traced(collector)
    for hook in ("before_model", "wrap_model_call"):
        quiet, loud = runs[f"quiet.{hook}"], runs[f"loud.{hook}"]
        assert len(quiet) == len(loud) == 2
        assert all(r.inputs == {} for r in quiet)  # omitted, the run and its timing kept
        assert all(r.end_time is not None and r.outputs not in (None, {}) for r in quiet)  # outputs untouched
        assert all(SECRET in str(r.inputs) for r in loud)
    [quiet_tool] = runs["quiet.wrap_tool_call"]
    assert quiet_tool.inputs == {} and [c.name for c in quiet_tool.child_runs] == ["loud.wrap_tool_call"]
    # the messages are still on the chat-model run inside
    assert all(SECRET in str(r.inputs) for r in runs["ScriptedChatModel"])
    # a handler that is not a tracer sees the real payload
    assert all(SECRET in str(i) for i in plain.inputs["quiet.before_model"])


@pytest.mark.parametrize("mode", MODES)
def test_process_outputs_and_a_summary(mode: str) -> None:
    def count(state: Any) -> Any:
        return {"messages": len(state["messages"])} if isinstance(state, dict) and "messages" in state else state

    collector = RunCollectorCallbackHandler()
    policy = TracePolicy(process_inputs=count, process_outputs=lambda _: {"omitted": True})
    result = run(mode, Hooks("summed", policy), handlers=[collector])
    assert result["messages"][-1].content == "3"  # the run itself is unchanged
    first, second = traced(collector)["summed.before_model"]
    assert (first.inputs, second.inputs) == ({"messages": 1}, {"messages": 3})
    assert all(r.outputs == {"omitted": True} for r in traced(collector)["summed.wrap_model_call"])


@pytest.mark.parametrize("mode", MODES)
def test_configure_trace_policy_is_the_default_and_a_middleware_policy_overrides_it_wholesale(mode: str) -> None:
    configure_trace_policy(TracePolicy(process_inputs=omit_payload, process_outputs=omit_payload))
    own = TracePolicy(process_outputs=lambda _: {"own": True})  # no process_inputs: inputs recorded as they are
    collector = RunCollectorCallbackHandler()
    run(mode, Hooks("default"), Hooks("own", own), handlers=[collector])
    runs = traced(collector)
    assert all(r.inputs == {} and r.outputs == {} for r in runs["default.before_model"])
    assert all(SECRET in str(r.inputs) and r.outputs == {"own": True} for r in runs["own.before_model"])
    configure_trace_policy(None)  # cleared: payloads as they are
    collector = RunCollectorCallbackHandler()
    run(mode, Hooks("default"), handlers=[collector])
    assert all(SECRET in str(r.inputs) for r in traced(collector)["default.before_model"])


@pytest.mark.parametrize("mode", MODES)
def test_a_processor_that_raises_records_the_real_payload_and_the_run_goes_on(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(value: Any) -> Any:
        raise ValueError("processor bug")

    collector = RunCollectorCallbackHandler()
    with caplog.at_level(logging.ERROR, logger="middleware_kit.trace_policy"):
        result = run(mode, Hooks("broken", TracePolicy(process_inputs=broken)), handlers=[collector])
    assert result["messages"][-1].content == "3"
    assert all(SECRET in str(r.inputs) for r in traced(collector)["broken.before_model"])
    assert "trace_policy processor raised" in caplog.text


def test_configure_trace_policy_refuses_what_is_not_a_policy() -> None:
    with pytest.raises(TypeError, match="takes a TracePolicy or None, got dict"):
        configure_trace_policy({"process_inputs": omit_payload})  # type: ignore[arg-type]


def test_without_a_handler_no_processor_runs() -> None:
    calls: list[Any] = []
    run("invoke", Hooks("watched", TracePolicy(process_inputs=calls.append)), handlers=[])
    assert calls == []
