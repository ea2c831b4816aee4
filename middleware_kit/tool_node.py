"""The agent's tool node: LangGraph's ``ToolNode`` (validation errors as error ``ToolMessage``s, ``InjectedState`` /
``ToolRuntime`` injection, ``Command`` results) run inline for the one call each task receives, its output guarded.

The agent sends one ``Send`` per pending tool call, so parallel calls are parallel graph tasks; inside a task there
is exactly one call, and running it inline saves ``ToolNode``'s thread pool (about 1.6 ms per invoke).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest as LangGraphToolCallRequest
from langgraph.runtime import Runtime

from middleware_kit._compat import tool_node_one_call
from middleware_kit.chain import Layer, _note_bubble, call_flow, compose
from middleware_kit.drive import Flow, Step, run_async, run_sync
from middleware_kit.guards import Guards
from middleware_kit.types import ToolCallRequest
from middleware_kit.validation import note_tool_failure

__all__ = ["AgentToolNode", "tool_node"]

_EXECUTE: ContextVar[Callable[[LangGraphToolCallRequest], Any] | None] = ContextVar(
    "middleware_kit_tool_execute", default=None
)
"""``ToolNode``'s execute callable of the current tool call, for the base of the composed tool chain (the chain is
composed once per agent; the callable is per call). A ContextVar: each call sees its own."""


def tool_node(tools: Sequence[BaseTool], layers: Sequence[Layer[Any, Any]], guards: Guards) -> AgentToolNode:
    """The agent's tool node: ``tools``, the tool chain of ``layers`` (outermost first) around each call."""
    if not layers:
        return AgentToolNode(tools, wrap_tool_call=None, awrap_tool_call=None, guards=guards)
    chain, achain = compose(layers, _base, _abase)

    def wrap(request: LangGraphToolCallRequest, execute: Callable[..., Any]) -> Any:
        __tracebackhide__ = True
        return run_sync(_tool_call(request, execute, chain, None))

    async def awrap(request: LangGraphToolCallRequest, execute: Callable[..., Any]) -> Any:
        __tracebackhide__ = True
        return await run_async(_tool_call(request, execute, _unreachable, achain))

    return AgentToolNode(tools, wrap_tool_call=wrap, awrap_tool_call=awrap, guards=guards)


def _tool_call(
    request: LangGraphToolCallRequest, execute: Callable[..., Any], chain: Any, achain: Any
) -> Flow[Any]:
    __tracebackhide__ = True
    token = _EXECUTE.set(execute)
    try:
        result, _ = yield from call_flow(chain, achain, _from_langgraph(request))
    finally:
        _EXECUTE.reset(token)
    return result


def _base_flow(request: ToolCallRequest) -> Flow[Any]:
    """The base of the tool chain: ``ToolNode``'s execute (argument validation, injection, error handling)."""
    __tracebackhide__ = True
    execute = _EXECUTE.get()
    if execute is None:
        raise RuntimeError("middleware_kit: tool handler called outside a tool call")
    try:
        return (yield Step(execute, execute, _to_langgraph(request)))
    except GraphBubbleUp as exc:
        _note_bubble(exc)
        raise


def _base(request: ToolCallRequest) -> Any:
    __tracebackhide__ = True
    return run_sync(_base_flow(request))


async def _abase(request: ToolCallRequest) -> Any:
    __tracebackhide__ = True
    return await run_async(_base_flow(request))


def _unreachable(request: Any) -> Any:
    raise AssertionError("the sync chain of an async call")


def _from_langgraph(request: LangGraphToolCallRequest) -> ToolCallRequest:
    return ToolCallRequest(request.tool_call, request.tool, request.state, request.runtime)


def _to_langgraph(request: ToolCallRequest) -> LangGraphToolCallRequest:
    runtime = request.runtime
    if runtime is not None and request.state is not runtime.state:
        runtime = replace(runtime, state=request.state)
    return LangGraphToolCallRequest(
        tool_call=request.tool_call, tool=request.tool, state=request.state, runtime=runtime  # type: ignore[arg-type]
    )


class AgentToolNode(ToolNode):
    """``ToolNode`` that runs a single call inline and guards its ``messages`` output."""

    def __init__(
        self,
        tools: Sequence[BaseTool],
        *,
        wrap_tool_call: Callable[..., Any] | None,
        awrap_tool_call: Callable[..., Any] | None,
        guards: Guards,
    ) -> None:
        super().__init__(list(tools), wrap_tool_call=wrap_tool_call, awrap_tool_call=awrap_tool_call)
        self._guards = guards

    def _run_one(self, call: Any, input_type: Any, tool_runtime: Any) -> Any:
        __tracebackhide__ = True
        try:
            return super()._run_one(call, input_type, tool_runtime)
        except Exception as exc:  # the caller learns the tool, the call id and the middleware that handles it
            note_tool_failure(exc, call)
            raise

    async def _arun_one(self, call: Any, input_type: Any, tool_runtime: Any) -> Any:
        __tracebackhide__ = True
        try:
            return await super()._arun_one(call, input_type, tool_runtime)
        except Exception as exc:
            note_tool_failure(exc, call)
            raise

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        __tracebackhide__ = True
        one = tool_node_one_call(self, input, config, runtime)
        if one is None:
            output = super()._func(input, config, runtime)
        else:
            call, input_type, tool_runtime = one
            output = self._combine_tool_outputs([self._run_one(call, input_type, tool_runtime)], input_type)
        return self._guards.update(output, runtime)

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        __tracebackhide__ = True
        one = tool_node_one_call(self, input, config, runtime)
        if one is None:
            output = await super()._afunc(input, config, runtime)
        else:
            call, input_type, tool_runtime = one
            output = self._combine_tool_outputs([await self._arun_one(call, input_type, tool_runtime)], input_type)
        return self._guards.update(output, runtime)
