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

The engine drives the generator inside the wrap layer itself (``chain._awrap_handler``, one body whose sync twin
is derived from the same source): under ``invoke`` requests go to the sync handler and ``Sleep`` to :data:`sleep`;
under ``ainvoke`` the same generator runs on the event loop (no worker thread), requests awaited and ``Sleep`` on
:data:`asleep`. Anything else yielded is a ``HookReturnError`` naming the middleware and the hook. Driving inline
(not through a separate driver) keeps a flow as cheap as an async twin.

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

from middleware_kit.types import ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest

__all__ = ["ModelCallFlow", "Sleep", "ToolCallFlow", "asleep", "sleep"]


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
