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

Under ``invoke`` :func:`drive_sync` runs the generator; under ``ainvoke`` :func:`drive_async` runs the same generator
on the event loop (no worker thread). The two drivers differ only in ``await``; they are written out (not built on
:mod:`middleware_kit.drive`) because a flow must cost no more than an async twin, and every saved call counts there.

``sleep`` and ``asleep`` are the functions ``Sleep`` uses, looked up when a flow sleeps: tests may patch them
(``monkeypatch.setattr(middleware_kit.flow, "sleep", fake)``). They are the only module-level names of the engine a
test is meant to replace.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeAlias

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from middleware_kit.errors import HookReturnError
from middleware_kit.types import ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest

__all__ = ["ModelCallFlow", "Sleep", "ToolCallFlow", "asleep", "drive_async", "drive_sync", "sleep"]


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


def drive_sync(
    flow: Generator[Any, Any, Any], handler: Callable[[Any], Any], request_type: type, owner: str, hook: str
) -> object:
    """Run a user's flow under ``invoke``: its requests go to ``handler``, its ``Sleep``s to :data:`sleep`."""
    __tracebackhide__ = True
    try:
        command = flow.send(None)
        while True:
            if isinstance(command, request_type):
                try:
                    value = handler(command)
                except BaseException as exc:  # raised into the flow at its yield, as a classic handler call raises
                    command = flow.throw(exc)
                    continue
            elif isinstance(command, Sleep):
                value = sleep(command.seconds)
            else:
                raise _refused(flow, owner, hook, command, request_type)
            command = flow.send(value)
    except StopIteration as stop:
        return stop.value


async def drive_async(
    flow: Generator[Any, Any, Any], handler: Callable[[Any], Awaitable[Any]], request_type: type, owner: str, hook: str
) -> object:
    """Run the same flow under ``ainvoke``, on the event loop: requests awaited, ``Sleep``s on :data:`asleep`."""
    __tracebackhide__ = True
    try:
        command = flow.send(None)
        while True:
            if isinstance(command, request_type):
                try:
                    value = await handler(command)
                except BaseException as exc:  # raised into the flow at its yield, as a classic handler call raises
                    command = flow.throw(exc)
                    continue
            elif isinstance(command, Sleep):
                value = await asleep(command.seconds)
            else:
                raise _refused(flow, owner, hook, command, request_type)
            command = flow.send(value)
    except StopIteration as stop:
        return stop.value


def _refused(flow: Generator[Any, Any, Any], owner: str, hook: str, command: object, request_type: type) -> Exception:
    flow.close()
    return HookReturnError.for_flow_yield(owner, hook, command, request_type.__name__)
