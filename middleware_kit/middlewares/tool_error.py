"""``ToolErrorMiddleware``: a tool that raises answers the model with an error ``ToolMessage`` instead.

Without it, an exception raised inside a tool propagates out of ``invoke`` (LangGraph's ``ToolNode`` only turns
argument-validation errors into messages). With it, the model sees what went wrong and can correct itself.

What still reaches the caller: LangGraph control flow (``GraphInterrupt`` from ``interrupt()``, ``ParentCommand``),
``MiddlewareError`` (another middleware's validation error or limit, e.g. ``ToolCallLimitExceededError``: a bug or a
policy decision, not something the model should talk its way around), exceptions that are not ``Exception``s
(``KeyboardInterrupt``, cancellation), and errors ``catch`` does not select.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp

from middleware_kit.drive import Flow, Step, run_async, run_sync
from middleware_kit.errors import HookReturnError, MiddlewareConfigError, MiddlewareError
from middleware_kit.hooks import AsyncToolHandler, ToolHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.types import ToolCallRequest

__all__ = ["DEFAULT_TOOL_ERROR_TEMPLATE", "ToolErrorMiddleware"]

DEFAULT_TOOL_ERROR_TEMPLATE = "Error: tool '{tool}' raised {error_type}: {error}\nPlease fix your mistakes."
"""The message content when ``on_error`` is None. Placeholders: ``{tool}``, ``{error_type}``, ``{error}``."""

OnError: TypeAlias = (
    "str | Callable[[Exception], str | ToolMessage] | Callable[[Exception, ToolCallRequest], str | ToolMessage] | None"
)
"""A template, or a function of the exception (and optionally the request) returning the content or the message;
an ``async def`` works too."""
Catch: TypeAlias = "type[Exception] | tuple[type[Exception], ...] | Callable[[Exception], bool]"

_PLACEHOLDERS = {"tool": "t", "error_type": "E", "error": "e", "args": "{}"}


def _arity(fn: Callable[..., Any]) -> int:
    """1 or 2: how many positional arguments ``on_error`` takes (the exception, and optionally the request)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return 1
    try:
        signature.bind(None, None)
    except TypeError:
        return 1
    return 2


class ToolErrorMiddleware(FrozenConfig, AgentMiddleware):
    """Turn exceptions raised by tools into error ``ToolMessage``s the model can read and act on.

    Args:
        on_error: The message the model receives:

            - None (default): :data:`DEFAULT_TOOL_ERROR_TEMPLATE`;
            - a ``str``: a template with the placeholders ``{tool}``, ``{error_type}``, ``{error}`` and ``{args}``
              (a string without placeholders is sent as is; write ``{{`` and ``}}`` for literal braces);
            - a function ``(exception) -> str | ToolMessage`` or ``(exception, request) -> str | ToolMessage``
              (sync or ``async def``). A returned ``ToolMessage`` is sent as is.
        catch: Which exceptions to convert: exception classes or a predicate. Default ``Exception``. Others propagate.
        tools: Only convert errors of these tools (names or ``BaseTool``s); default None: every tool.

    ``MiddlewareError`` and LangGraph control flow (interrupts) always propagate.
    """

    def __init__(
        self,
        on_error: OnError = None,
        *,
        catch: Catch = Exception,
        tools: Sequence[BaseTool | str] | None = None,
    ) -> None:
        owner = type(self).__name__
        if isinstance(on_error, str):
            try:
                on_error.format(**_PLACEHOLDERS)
            except (KeyError, IndexError, ValueError) as exc:
                raise MiddlewareConfigError(
                    f"{owner}: the on_error template {on_error!r} cannot be formatted ({type(exc).__name__}: {exc}). "
                    f"Its placeholders are {{tool}}, {{error_type}}, {{error}} and {{args}}; write {{{{ and }}}} "
                    f"for literal braces.",
                    middleware=owner,
                    hook="on_error",
                ) from None
        elif on_error is not None and not callable(on_error):
            raise MiddlewareConfigError(
                f"{owner}: on_error must be None, a template str or a function (exception[, request]) -> str, "
                f"got {on_error!r}.",
                middleware=owner,
                hook="on_error",
            )
        if isinstance(catch, type) and issubclass(catch, BaseException):
            catch = (catch,)
        if isinstance(catch, tuple):
            if not catch or not all(isinstance(t, type) and issubclass(t, BaseException) for t in catch):
                raise MiddlewareConfigError(
                    f"{owner}: catch must hold exception classes (or be a predicate), got {catch!r}.",
                    middleware=owner,
                    hook="catch",
                )
            types = catch
            self._catches: Callable[[Exception], bool] = lambda exc: isinstance(exc, types)
        elif callable(catch) and not isinstance(catch, type):
            self._catches = catch
        else:
            raise MiddlewareConfigError(
                f"{owner}: catch must be exception classes or a function (exception) -> bool, got {catch!r}.",
                middleware=owner,
                hook="catch",
            )
        names: list[str] = []
        for tool in tools or ():
            if not isinstance(tool, (BaseTool, str)):
                raise MiddlewareConfigError(
                    f"{owner}: tools must hold tool names or BaseTool instances, got {tool!r}.",
                    middleware=owner,
                    hook="tools",
                )
            names.append(tool.name if isinstance(tool, BaseTool) else tool)
        self.on_error = on_error
        self.catch = catch
        self.tools_handled: frozenset[str] | None = frozenset(names) if tools is not None else None
        """Names of the tools whose errors are converted (None: all)."""
        self._arity = _arity(on_error) if callable(on_error) else 0

    def _handles(self, request: ToolCallRequest, exc: Exception) -> bool:
        if isinstance(exc, (GraphBubbleUp, MiddlewareError)):
            return False
        if self.tools_handled is not None and request.tool_call["name"] not in self.tools_handled:
            return False
        return self._catches(exc)

    def _call_on_error(self, exc: Exception, request: ToolCallRequest) -> Any:
        assert callable(self.on_error)
        return self.on_error(exc, request) if self._arity == 2 else self.on_error(exc)  # type: ignore[call-arg]

    def _message(self, exc: Exception, request: ToolCallRequest, content: object) -> ToolMessage:
        call = request.tool_call
        if isinstance(content, ToolMessage):
            return content
        if not isinstance(content, str):
            raise HookReturnError(
                f"{self.name}: on_error returned {type(content).__name__}; it must return the message text (a str) "
                f"or a ToolMessage.",
                middleware=self.name,
                hook="on_error",
            )
        return ToolMessage(content=content, tool_call_id=call["id"] or "", name=call["name"], status="error")

    def _content(self, exc: Exception, request: ToolCallRequest) -> str:
        template = DEFAULT_TOOL_ERROR_TEMPLATE if self.on_error is None else self.on_error
        assert isinstance(template, str)
        call = request.tool_call
        return template.format(tool=call["name"], error_type=type(exc).__name__, error=exc, args=call["args"])

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        return run_sync(self._recovering(request, handler))

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncToolHandler) -> ToolResult:
        return await run_async(self._recovering(request, handler))

    def _recovering(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]) -> Flow[ToolResult]:
        """Both hooks' one body, as steps a sync or an async driver runs (:mod:`middleware_kit.drive`): the call of
        the next handler and the wait on an async ``on_error`` are the only steps whose mode differs."""
        try:
            result: ToolResult = yield Step(handler, handler, request)
        except Exception as exc:
            if not self._handles(request, exc):
                raise
            if not callable(self.on_error):
                return self._message(exc, request, self._content(exc, request))
            content = self._call_on_error(exc, request)
            if inspect.isawaitable(content):
                content = yield _AWAIT.with_args(content)
            return self._message(exc, request, content)
        return result


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


_AWAIT = Step.twin(None, _awaited)
"""A step awaiting a user function's awaitable: on the loop under ``ainvoke``, driven to completion under ``invoke``."""
