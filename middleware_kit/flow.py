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

Under ``invoke`` the engine's sync driver runs the generator; under ``ainvoke`` its async driver runs the same
generator on the event loop (no worker thread): :func:`as_engine_flow` turns what the flow yields into engine steps
(:mod:`middleware_kit.drive`), so the whole mechanism reads in two screens.

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

from middleware_kit.drive import Flow as EngineFlow
from middleware_kit.drive import Step
from middleware_kit.errors import HookReturnError
from middleware_kit.types import ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest

__all__ = ["ModelCallFlow", "Sleep", "ToolCallFlow", "as_engine_flow", "asleep", "sleep"]


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

sleep: Callable[[float], None] = time.sleep
"""How ``Sleep`` waits under ``invoke`` (looked up at each sleep; patchable in tests)."""
asleep: Callable[[float], Awaitable[None]] = asyncio.sleep
"""How ``Sleep`` waits under ``ainvoke`` (looked up at each sleep; patchable in tests)."""


def _sleep(seconds: float) -> None:
    sleep(seconds)  # looked up now: tests patch the module global


async def _asleep(seconds: float) -> None:
    await asleep(seconds)


def as_engine_flow(
    flow: Generator[Any, Any, Any], handler: Callable[[Any], Any], request_type: type, owner: str, hook: str
) -> EngineFlow[object]:
    """A user's flow as an engine flow (:mod:`middleware_kit.drive`): its requests become calls of ``handler`` (the
    next layer, sync or async: the driver decides), its ``Sleep``s sleeps; anything else it yields is refused."""
    __tracebackhide__ = True
    value: object = None
    error: BaseException | None = None
    while True:
        try:
            command = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value
        if isinstance(command, Sleep):
            step = Step(_sleep, _asleep, command.seconds)
        elif isinstance(command, request_type):
            step = Step(handler, handler, command)
        else:
            flow.close()
            raise HookReturnError.for_flow_yield(owner, hook, command, request_type.__name__)
        value, error = None, None
        try:
            value = yield step
        except BaseException as exc:  # thrown into the user's flow at its yield, as a classic handler call raises
            error = exc
