"""Flow hooks: one body for a wrap hook that runs under ``invoke`` and ``ainvoke``, with no thread hop.

A ``wrap_model_call`` or ``wrap_tool_call`` written as a *generator function* taking only ``request`` (plus ``self``
for a method) is a flow::

    class Retry(AgentMiddleware):
        def wrap_model_call(self, request: ModelRequest) -> ModelCallFlow:
            for attempt in range(3):
                try:
                    response = yield request          # calls the next handler (sync or async: the engine decides)
                except TimeoutError:
                    yield Sleep(2**attempt)           # time.sleep under invoke, asyncio.sleep under ainvoke
                    continue
                return response
            raise TimeoutError("3 attempts")

- ``response = yield request`` calls the next handler, any number of times; an exception the handler raises is
  raised at that ``yield`` (catch it there, or let it propagate).
- ``yield Sleep(seconds)`` sleeps without blocking the event loop under ``ainvoke``.
- ``return value`` ends the hook; the value is what a classic wrap hook would return.

The engine runs the generator in its wrap layer on its one driver (:mod:`middleware_kit._engine.drive`): under
``invoke``
requests go to the sync handler and ``Sleep`` to :data:`sleep`; under ``ainvoke`` the same generator runs on the
event loop (no worker thread), requests awaited and ``Sleep`` on :data:`asleep`. Anything else yielded is a
``HookReturnError`` naming the middleware and the hook. Bundled middlewares write their wrap logic as such a flow
(``model_call_flow``/``tool_call_flow``) and get LangChain's ``wrap_model_call(request, handler)`` /
``awrap_model_call`` from :class:`ModelCallFlowHooks` / :class:`ToolCallFlowHooks`, which run it on the same
driver.

``sleep`` and ``asleep`` are the functions ``Sleep`` uses, looked up when a flow sleeps: tests may patch them
(``monkeypatch.setattr(middleware_kit.flow, "sleep", fake)``). They are the only module-level names of the
engine a
test is meant to replace.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest as _LangGraphToolCallRequest
from langgraph.types import Command

from middleware_kit._engine.drive import Abort, run_async, run_sync
from middleware_kit.types import ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest

__all__ = [
    "ModelCallFlow",
    "ModelCallFlowHooks",
    "Sleep",
    "ToolCallFlow",
    "ToolCallFlowHooks",
    "WrapModelCallHook",
    "WrapToolCallHook",
    "adrive",
    "asleep",
    "drive",
    "sleep",
]


R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Sleep:
    """Yielded by a flow hook: wait ``seconds`` (``time.sleep`` under invoke, ``asyncio.sleep`` under ainvoke)."""

    seconds: float


ModelCallFlow: TypeAlias = Generator[
    "ModelRequest[Any] | Sleep", "ModelResponse[Any]", "ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]"
]
"""The return annotation of a flow ``wrap_model_call``."""
ToolCallFlow: TypeAlias = Generator[
    "ToolCallRequest | Sleep", "ToolMessage | Command[Any]", "ToolMessage | Command[Any]"
]
"""The return annotation of a flow ``wrap_tool_call``."""

sleep: Callable[[float], object] = time.sleep
"""How ``Sleep`` waits under ``invoke`` (looked up at each sleep; patchable in tests)."""
asleep: Callable[[float], Awaitable[object]] = asyncio.sleep
"""How ``Sleep`` waits under ``ainvoke`` (looked up at each sleep; patchable in tests)."""


def _calls(
    handler: Callable[[Any], Any], request_type: type | tuple[type, ...], sleep_of: Callable[[], Any]
) -> Callable[[Any], Any]:
    """What a flow's yields mean for :func:`drive`/:func:`adrive`: a request is ``handler(request)``, a ``Sleep`` is
    ``sleep_of()(seconds)``; anything else closes the flow with a ``TypeError``."""

    def call(command: Any) -> Any:
        __tracebackhide__ = True
        if isinstance(command, Sleep):
            return sleep_of()(command.seconds)
        if isinstance(command, request_type):
            return handler(command)
        raise Abort(TypeError(f"a flow yielded {command!r}: yield a request or a Sleep"))

    return call


def drive(flow: Generator[Any, Any, R], handler: Callable[[Any], Any], request_type: type | tuple[type, ...]) -> R:
    """Run ``flow`` under ``invoke`` with ``handler`` as the next layer: each yielded request is ``handler(request)``
    (its exception thrown back in at the ``yield``), each ``Sleep`` a :data:`sleep`. On the engine's one driver
    (:func:`middleware_kit._engine.drive.run_sync`); it serves direct calls such as
    ``mw.wrap_model_call(request, handler)``
    in a unit test or a subclass's ``super()`` call."""
    __tracebackhide__ = True
    return run_sync(flow, _calls(handler, request_type, lambda: sleep))


async def adrive(
    flow: Generator[Any, Any, R], handler: Callable[[Any], Awaitable[Any]], request_type: type | tuple[type, ...]
) -> R:
    """:func:`drive` under ``ainvoke`` (:func:`middleware_kit._engine.drive.run_async`): requests awaited, ``Sleep`` on
    :data:`asleep`."""
    __tracebackhide__ = True
    return await run_async(flow, _calls(handler, request_type, lambda: asleep))


WrapModelCallHook: TypeAlias = (
    "Callable[[ModelRequest[Any], Callable[[ModelRequest[Any]], ModelResponse[Any]]], "
    "ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]] | Callable[[ModelRequest[Any]], ModelCallFlow]"
)
"""How ``AgentMiddleware.wrap_model_call`` is typed: the classic ``(request, handler)`` hook, or a flow."""
WrapToolCallHook: TypeAlias = (
    "Callable[[ToolCallRequest, Callable[[ToolCallRequest], ToolMessage | Command[Any]]], "
    "ToolMessage | Command[Any]] | Callable[[ToolCallRequest], ToolCallFlow]"
)
"""How ``AgentMiddleware.wrap_tool_call`` is typed: the classic ``(request, handler)`` hook, or a flow."""


class ModelCallFlowHooks:
    """Mixin for a middleware whose model-call logic is one flow, ``model_call_flow(request)``: it supplies
    LangChain's ``wrap_model_call(request, handler)`` and ``awrap_model_call(request, handler)``, both driving that
    flow, so the hooks can be called directly and a subclass may override either and call ``super()``.

    Inside an agent, a middleware that overrides neither is run as a flow, inline (no driver, no thread hop).
    List it before ``AgentMiddleware`` in the bases.
    """

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        raise NotImplementedError  # pragma: no cover - every user of the mixin defines it

    if TYPE_CHECKING:
        wrap_model_call: WrapModelCallHook
    else:

        def wrap_model_call(self, request, handler):
            """Around the model call: :meth:`model_call_flow` with ``handler`` as the next layer."""
            return drive(self.model_call_flow(request), handler, ModelRequest)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Async twin of :meth:`wrap_model_call` (the same flow)."""
        return await adrive(self.model_call_flow(request), handler, ModelRequest)


_TOOL_REQUESTS = (ToolCallRequest, _LangGraphToolCallRequest)
"""What a tool flow may yield when driven directly: ours, or LangGraph's request (which LangChain's tests pass in)."""


class ToolCallFlowHooks:
    """:class:`ModelCallFlowHooks` for tool calls: ``wrap_tool_call``/``awrap_tool_call`` drive
    ``tool_call_flow(request)``."""

    def tool_call_flow(self, request: ToolCallRequest) -> ToolCallFlow:
        raise NotImplementedError  # pragma: no cover - every user of the mixin defines it

    if TYPE_CHECKING:
        wrap_tool_call: WrapToolCallHook
    else:

        def wrap_tool_call(self, request, handler):
            """Around each tool call: :meth:`tool_call_flow` with ``handler`` as the next layer."""
            return drive(self.tool_call_flow(request), handler, _TOOL_REQUESTS)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        """Async twin of :meth:`wrap_tool_call` (the same flow)."""
        return await adrive(self.tool_call_flow(request), handler, _TOOL_REQUESTS)
