"""The one ordering rule, tested as a recorded trace of every hook across a tool round-trip."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.testing import TraceRecorder
from tests.conftest import Runner, add
from tests.helpers import kinds, tool_then_answer


def model_call(names: str) -> list[str]:
    return [
        *(f"{n}.before_model" for n in names),
        *(f"{n}.modify_model_request" for n in names),
        *(f"{n}.wrap_model_call>" for n in names),
        *(f"{n}.wrap_model_call<" for n in reversed(names)),
        *(f"{n}.after_model" for n in reversed(names)),
    ]


def tool_call_trace(names: str) -> list[str]:
    return [
        *(f"{n}.before_tool" for n in names),
        *(f"{n}.wrap_tool_call>" for n in names),
        *(f"{n}.wrap_tool_call<" for n in reversed(names)),
        *(f"{n}.after_tool" for n in reversed(names)),
    ]


EXPECTED = [
    "A.before_agent",
    "B.before_agent",
    "C.before_agent",
    *model_call("ABC"),
    *tool_call_trace("ABC"),
    *model_call("ABC"),
    "C.after_agent",
    "B.after_agent",
    "A.after_agent",
]


def test_full_trace_of_every_hook_with_three_middlewares(run: Runner) -> None:
    trace: list[str] = []
    agent = create_agent(tool_then_answer(), [add], middleware=[TraceRecorder(n, trace) for n in "ABC"])
    result = run(agent, {"messages": [HumanMessage("1+2?")]})
    assert trace == EXPECTED
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert result["messages"][2].content == "3"


class SyncOnly(AgentMiddleware):
    """Defines only sync hooks; records into the trace passed in."""

    def __init__(self, name: str, trace: list[str]) -> None:
        self.name = name
        self.trace = trace

    def before_model(self, state: Any, runtime: Any) -> None:
        self.trace.append(f"{self.name}.before_model")

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self.trace.append(f"{self.name}.wrap_model_call>")
        response = handler(request)
        self.trace.append(f"{self.name}.wrap_model_call<")
        return response

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.trace.append(f"{self.name}.wrap_tool_call>")
        result = handler(request)
        self.trace.append(f"{self.name}.wrap_tool_call<")
        return result

    def after_model(self, state: Any, runtime: Any) -> None:
        self.trace.append(f"{self.name}.after_model")


class AsyncOnly(AgentMiddleware):
    """Defines only async twins."""

    def __init__(self, name: str, trace: list[str]) -> None:
        self.name = name
        self.trace = trace

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self.trace.append(f"{self.name}.before_model")

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        self.trace.append(f"{self.name}.wrap_model_call>")
        response = await handler(request)
        self.trace.append(f"{self.name}.wrap_model_call<")
        return response

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.trace.append(f"{self.name}.wrap_tool_call>")
        result = await handler(request)
        self.trace.append(f"{self.name}.wrap_tool_call<")
        return result

    async def aafter_model(self, state: Any, runtime: Any) -> None:
        self.trace.append(f"{self.name}.after_model")


@pytest.mark.parametrize("kinds_of", [("sync", "async", "sync"), ("async", "sync", "async")])
def test_sync_only_and_async_only_middlewares_work_under_both_modes(run: Runner, kinds_of: tuple[str, ...]) -> None:
    trace: list[str] = []
    mws = [(SyncOnly if k == "sync" else AsyncOnly)(n, trace) for n, k in zip("ABC", kinds_of, strict=True)]
    agent = create_agent(tool_then_answer(), [add], middleware=mws)
    result = run(agent, {"messages": [HumanMessage("1+2?")]})
    one_model_call = [
        "A.before_model", "B.before_model", "C.before_model",
        "A.wrap_model_call>", "B.wrap_model_call>", "C.wrap_model_call>",
        "C.wrap_model_call<", "B.wrap_model_call<", "A.wrap_model_call<",
        "C.after_model", "B.after_model", "A.after_model",
    ]
    tool = ["A.wrap_tool_call>", "B.wrap_tool_call>", "C.wrap_tool_call>",
            "C.wrap_tool_call<", "B.wrap_tool_call<", "A.wrap_tool_call<"]
    assert trace == [*one_model_call, *tool, *one_model_call]
    assert isinstance(result["messages"][2], ToolMessage)
    assert result["messages"][-1].content == "done"


def test_plan_lists_hooks_in_trace_order() -> None:
    agent = create_agent(tool_then_answer(), [add], middleware=[TraceRecorder(n, []) for n in "ABC"])
    plan = agent.middleware_plan
    assert plan.phase("before_agent") == ("A", "B", "C")
    assert plan.phase("after_model") == ("C", "B", "A")
    assert plan.phase("after_agent") == ("C", "B", "A")
    assert plan.model_chain[:3] == ("A.modify_model_request", "B.modify_model_request", "C.modify_model_request")
    assert plan.model_chain[3:] == ("A.wrap_model_call", "B.wrap_model_call", "C.wrap_model_call")
    text = str(plan)
    assert "first listed = outermost" in text
    assert "A.wrap_model_call( B.wrap_model_call( C.wrap_model_call( model ) ) )" in text
    # before_model and after_model hooks share the model node: one step per model call, whatever N.
    assert plan.nodes == ("before_agent", "model", "tools", "after_agent")
    assert {h.where for h in plan.hooks if h.phase in ("before_model", "after_model")} == {"model"}
    assert "before_agent --> model" in plan.mermaid()


def test_plan_lists_before_and_after_tool_separately_with_their_own_modes() -> None:
    class Mixed(AgentMiddleware):
        def before_tool(self, request: Any) -> None:
            return None

        async def aafter_tool(self, request: Any, result: Any) -> None:
            return None

    agent = create_agent(tool_then_answer(), [add], middleware=[Mixed(), TraceRecorder("T", [])])
    plan = agent.middleware_plan
    assert plan.phase("before_tool") == ("Mixed", "T")
    assert plan.phase("after_tool") == ("T", "Mixed")
    modes = {(h.phase, h.middleware): (h.defined, h.under_invoke, h.under_ainvoke) for h in plan.hooks}
    assert modes[("before_tool", "Mixed")] == ("sync", "direct", "thread")
    assert modes[("after_tool", "Mixed")] == ("async", "loop", "direct")
    order = [h.phase for h in plan.hooks]
    assert order.index("wrap_tool_call") < order.index("after_tool") < order.index("after_agent")


def test_plan_of_an_agent_without_tools_has_no_tool_chain() -> None:
    class OnlyModel(AgentMiddleware):
        def before_model(self, state: Any, runtime: Any) -> None:
            return None

    plan = create_agent(tool_then_answer(), middleware=[OnlyModel()]).middleware_plan
    assert "tools" not in plan.nodes
    assert "no tool node" in str(plan)
    assert plan.phase("wrap_tool_call") == ()
    # A middleware with wrap_tool_call gets a tool node even without tools (it may run dynamic tools).
    assert "tools" in create_agent(tool_then_answer(), middleware=[TraceRecorder("T", [])]).middleware_plan.nodes
