"""``ToolErrorMiddleware``: a tool that raises answers the model with an error ``ToolMessage`` instead.

Without it, an exception raised inside a tool propagates out of ``invoke`` (LangGraph's ``ToolNode`` only turns
argument-validation errors into messages). With it, the errors your ``on_error`` handler words reach the model,
which can correct itself; the others still propagate.

What still reaches the caller: LangGraph control flow (``GraphInterrupt`` from ``interrupt()``, ``ParentCommand``),
``MiddlewareError`` (another middleware's validation error or limit, e.g. ``ToolCallLimitExceededError``: a bug or a
policy decision, not something the model should talk its way around), exceptions that are not ``Exception``s
(``KeyboardInterrupt``, cancellation), and errors ``catch`` does not select.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp

from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit.errors import HookReturnError, MiddlewareConfigError, MiddlewareError
from middleware_kit.hooks import AsyncToolHandler, ToolHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import CALLABLE, Config, config_error
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.trace_policy import TracePolicy, omit_payload
from middleware_kit.types import ToolCallRequest

__all__ = ["DEFAULT_TOOL_ERROR_TEMPLATE", "ToolErrorMiddleware"]

DEFAULT_TOOL_ERROR_TEMPLATE = "Error: tool '{tool}' raised {error_type}: {error}\nPlease fix your mistakes."
"""A ready-made ``on_error`` template (``ToolErrorMiddleware(DEFAULT_TOOL_ERROR_TEMPLATE)``). Placeholders:
``{tool}``, ``{error_type}``, ``{error}`` (the exception's text: only for tools whose errors are safe to show)."""

OnError: TypeAlias = (
    "str | Callable[[Exception], Any] | Callable[[Exception, ToolCallRequest], Any] | None"
)
"""A template, or a function of the exception (and optionally the request) returning the content (``str`` or content
blocks), a ``ToolMessage``, or None to let the exception propagate; an ``async def`` works too."""
AOnError: TypeAlias = "Callable[[Exception, ToolCallRequest], Awaitable[Any]]"
"""The async handler used under ``ainvoke``: ``async def aon_error(exception, request) -> str | None``."""
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


def _some_handler(owner: str, args: Mapping[str, Any]) -> None:
    if args["on_error"] is None and args["aon_error"] is None:
        raise config_error(
            owner,
            "on_error",
            f"{owner} requires `on_error` and/or `aon_error`: a function (exception, request) -> str | None (None lets "
            f"the exception propagate), or a template such as {owner}(DEFAULT_TOOL_ERROR_TEMPLATE).",
        )


def _check_on_error(owner: str, args: Mapping[str, Any]) -> None:
    on_error = args["on_error"]
    if isinstance(on_error, str):
        try:
            on_error.format(**_PLACEHOLDERS)
        except (KeyError, IndexError, ValueError) as exc:
            raise config_error(
                owner,
                "on_error",
                f"{owner}: the on_error template {on_error!r} cannot be formatted ({type(exc).__name__}: {exc}). "
                f"Its placeholders are {{tool}}, {{error_type}}, {{error}} and {{args}}; write {{{{ and }}}} "
                f"for literal braces.",
            ) from None
    elif on_error is not None and not callable(on_error):
        raise config_error(owner, "on_error", f"{owner}: on_error must be a function (exception, request) -> str | "
                                              f"None or a template str, got {on_error!r}.")


class ToolErrorMiddleware(FrozenConfig, AgentMiddleware):
    """Turn exceptions raised by tools into error ``ToolMessage`` objects the model can read and act on.

    Handling is opt-in, as in LangChain 1.5: give ``on_error`` and/or ``aon_error``. What they return decides:

    - a ``str`` or a list of content blocks: sent as an error ``ToolMessage`` (``status="error"``, the tool's name);
    - a ``ToolMessage``: sent as is;
    - ``None`` (or nothing): the exception propagates unchanged.

    Args:
        on_error: A function ``(exception, request)`` (or ``(exception)``) returning the above, sync or ``async
            def``; or a template ``str`` with the placeholders ``{tool}``, ``{error_type}``, ``{error}`` and
            ``{args}`` (:data:`DEFAULT_TOOL_ERROR_TEMPLATE` is one; a string without placeholders is sent as is;
            write ``{{`` and ``}}`` for literal braces). Prefer content that names the exception type over the
            exception's text, which may carry internal detail.
        aon_error: An ``async def`` handler used under ``ainvoke`` (``on_error`` is used when it is omitted). Alone,
            it also serves ``invoke`` (driven to completion there; LangChain raises instead).
        catch: Which exceptions reach the handler: exception classes or a predicate. Default ``Exception``.
        tools: Only handle errors of these tools (names or ``BaseTool`` instances); default None: every tool.

    ``MiddlewareError`` and LangGraph control flow (interrupts) always propagate; no handler sees them.
    """

    trace_policy = TracePolicy(process_inputs=omit_payload)
    """The hook runs' traces keep their timing but not the request (arguments may be sensitive), as in LangChain."""

    __config__ = Config(
        aon_error=CALLABLE.or_none("an async function (exception, request) -> str | None"),
        relations=(_some_handler, _check_on_error),
    )

    def __init__(
        self,
        on_error: OnError = None,
        *,
        aon_error: AOnError | None = None,
        catch: Catch = Exception,
        tools: Sequence[BaseTool | str] | None = None,
    ) -> None:
        owner = type(self).__name__
        self._catches: Callable[[Exception], bool] = _catcher(owner, catch)
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
        self.aon_error = aon_error
        self.catch = catch
        self.tools_handled: frozenset[str] | None = frozenset(names) if tools is not None else None
        """Names of the tools whose errors are handled (None: all)."""

    def _handles(self, request: ToolCallRequest, exc: Exception) -> bool:
        if isinstance(exc, (GraphBubbleUp, MiddlewareError)):
            return False
        if self.tools_handled is not None and _tool_name(request) not in self.tools_handled:
            return False
        return self._catches(exc)

    def _message(self, request: ToolCallRequest, content: object) -> ToolMessage:
        if isinstance(content, ToolMessage):
            return content
        if not isinstance(content, (str, list)):
            raise HookReturnError(
                f"{self.name}: on_error returned {type(content).__name__}; return the message content (a str or a "
                f"list of content blocks), a ToolMessage, or None to let the exception propagate.",
                middleware=self.name,
                hook="on_error",
            )
        call = request.tool_call
        return ToolMessage(content=content, tool_call_id=call["id"] or "", name=_tool_name(request), status="error")

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        return run_sync(self._recovering(request, handler, self.on_error or self.aon_error))

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncToolHandler) -> ToolResult:
        return await run_async(self._recovering(request, handler, self.aon_error or self.on_error))

    def _recovering(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any], on_error: OnError
    ) -> Steps[ToolResult]:
        """Both hooks' one body, as steps a sync or an async driver runs (:mod:`middleware_kit._engine.drive`): the
        call of
        the next handler and the wait on an async handler are the only steps whose mode differs."""
        try:
            result: ToolResult = yield Step(handler, handler, request)
        except Exception as exc:
            if not self._handles(request, exc):
                raise
            if isinstance(on_error, str):
                call = request.tool_call
                return self._message(
                    request,
                    on_error.format(tool=call["name"], error_type=type(exc).__name__, error=exc, args=call["args"]),
                )
            assert callable(on_error)
            content = on_error(exc, request) if _arity(on_error) == 2 else on_error(exc)  # type: ignore[call-arg]
            if inspect.isawaitable(content):
                content = yield _AWAIT.with_args(content)
            if content is None:
                raise
            return self._message(request, content)
        return result


def _tool_name(request: ToolCallRequest) -> str:
    return request.tool.name if request.tool is not None else request.tool_call["name"]


def _catcher(owner: str, catch: Catch) -> Callable[[Exception], bool]:
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
        return lambda exc: isinstance(exc, types)
    if callable(catch) and not isinstance(catch, type):
        return catch
    raise MiddlewareConfigError(
        f"{owner}: catch must be exception classes or a function (exception) -> bool, got {catch!r}.",
        middleware=owner,
        hook="catch",
    )


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


_AWAIT = Step.twin(None, _awaited)
"""A step awaiting a user function's awaitable: on the loop under ``ainvoke``, driven to completion under ``invoke``."""
