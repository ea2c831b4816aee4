"""``TraceRecorder``: a middleware that records every hook it sees, to test ordering as a recorded trace."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from middleware_kit.hooks import AsyncModelHandler, AsyncToolHandler, ModelHandler, ToolHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.types import ModelRequest, ModelResponse, ToolCallRequest

__all__ = ["TraceRecorder"]


class TraceRecorder(AgentMiddleware):
    """Appends ``"{name}.{hook}"`` to ``trace`` for every hook, sync and async alike.

    Wrappers record entering (``"A.wrap_model_call>"``) and leaving (``"A.wrap_model_call<"``). The list is passed in
    (or created) and shared on purpose: this is a test probe, the one middleware allowed to keep something outside
    state.
    """

    def __init__(self, name: str, trace: list[str] | None = None) -> None:
        self.name = name
        self.trace: list[str] = [] if trace is None else trace

    def _log(self, hook: str) -> None:
        self.trace.append(f"{self.name}.{hook}")

    def before_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._log("before_agent")

    async def abefore_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._log("before_agent")

    def before_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._log("before_model")

    async def abefore_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._log("before_model")

    def modify_model_request(self, request: ModelRequest[Any], state: Any) -> ModelRequest[Any]:
        self._log("modify_model_request")
        return request

    async def amodify_model_request(self, request: ModelRequest[Any], state: Any) -> ModelRequest[Any]:
        self._log("modify_model_request")
        return request

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any]:
        self._log("wrap_model_call>")
        response = handler(request)
        self._log("wrap_model_call<")
        return response

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> ModelResponse[Any]:
        self._log("wrap_model_call>")
        response = await handler(request)
        self._log("wrap_model_call<")
        return response

    def after_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._log("after_model")

    async def aafter_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._log("after_model")

    def before_tool(self, request: ToolCallRequest) -> None:
        self._log("before_tool")

    async def abefore_tool(self, request: ToolCallRequest) -> None:
        self._log("before_tool")

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        self._log("wrap_tool_call>")
        result = handler(request)
        self._log("wrap_tool_call<")
        return result

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncToolHandler) -> ToolResult:
        self._log("wrap_tool_call>")
        result = await handler(request)
        self._log("wrap_tool_call<")
        return result

    def after_tool(self, request: ToolCallRequest, result: ToolResult) -> None:
        self._log("after_tool")

    async def aafter_tool(self, request: ToolCallRequest, result: ToolResult) -> None:
        self._log("after_tool")

    def after_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._log("after_agent")

    async def aafter_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        self._log("after_agent")
