"""Hook decorators, all generated from one factory, and ``hook_config``.

``@before_model`` (bare), ``@before_model()`` and ``@before_model(name=..., state_schema=..., tools=[...],
can_jump_to=[...])`` each turn a function into an *instance* of a new ``AgentMiddleware`` subclass named ``name`` (or
the function's name). A plain function defines the sync hook, an ``async def`` the async twin; the engine bridges the
other mode. The function becomes the hook itself (a static method), so a decorated hook costs no extra call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from langchain_core.messages import SystemMessage
from langchain_core.tools import BaseTool

from middleware_kit.errors import HookReturnError, MiddlewareConfigError
from middleware_kit.hooks import HOOKS, AsyncModelHandler, ModelHandler
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.types import AgentState, ModelRequest, ModelResponse

__all__ = [
    "after_agent",
    "after_model",
    "after_tool",
    "before_agent",
    "before_model",
    "before_tool",
    "dynamic_prompt",
    "hook_config",
    "modify_model_request",
    "wrap_model_call",
    "wrap_tool_call",
]

F = TypeVar("F", bound=Callable[..., Any])


def hook_config(*, can_jump_to: Sequence[str] | None = None, may_interrupt: bool = False) -> Callable[[F], F]:
    """Declare where a node hook may jump, and whether it may call ``interrupt()`` (it then keeps its own node).

    Sets ``__can_jump_to__`` and ``__may_interrupt__`` on the function, as LangChain v1's ``hook_config`` does.
    """

    def apply(fn: F) -> F:
        if can_jump_to is not None:
            fn.__can_jump_to__ = list(can_jump_to)  # type: ignore[attr-defined]
        if may_interrupt:
            fn.__may_interrupt__ = True  # type: ignore[attr-defined]
        return fn

    return apply


class _HookDecorator:
    """One decorator per hook, all made by this class: bare, with ``()`` or with options."""

    def __init__(self, hook: str, *, node: bool) -> None:
        self.hook = hook
        self.node = node
        self.__name__ = hook
        self.__qualname__ = hook
        self.__doc__ = (
            f"Make a middleware whose ``{hook}`` hook is the decorated function.\n\n{HOOKS[hook].doc}\n\n"
            f"Returns {HOOKS[hook].returns}. Usable bare, as ``@{hook}()`` or with "
            f"``name=``, ``state_schema=``, ``tools=``" + (", ``can_jump_to=``, ``may_interrupt=``." if node else ".")
        )

    @overload
    def __call__(self, func: Callable[..., Any], /) -> AgentMiddleware[Any, Any]: ...

    @overload
    def __call__(
        self,
        func: None = None,
        /,
        *,
        name: str | None = None,
        state_schema: type[Any] | None = None,
        tools: Sequence[BaseTool] | None = None,
        can_jump_to: Sequence[str] | None = None,
        may_interrupt: bool = False,
    ) -> Callable[[Callable[..., Any]], AgentMiddleware[Any, Any]]: ...

    def __call__(
        self,
        func: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        state_schema: type[Any] | None = None,
        tools: Sequence[BaseTool] | None = None,
        can_jump_to: Sequence[str] | None = None,
        may_interrupt: bool = False,
    ) -> AgentMiddleware[Any, Any] | Callable[[Callable[..., Any]], AgentMiddleware[Any, Any]]:
        if not self.node and (can_jump_to is not None or may_interrupt):
            raise MiddlewareConfigError.routing_option_on_wrap_hook(
                self.hook, name or (func.__name__ if func else self.hook)
            )

        def build(fn: Callable[..., Any]) -> AgentMiddleware[Any, Any]:
            return make_middleware(
                fn,
                self.hook,
                name=name,
                state_schema=state_schema,
                tools=tools,
                config={"can_jump_to": can_jump_to, "may_interrupt": may_interrupt},
            )

        if func is not None:
            return build(func)
        return build

    def __repr__(self) -> str:
        return f"<middleware_kit decorator @{self.hook}>"


def _mark(fn: Callable[..., Any], hook_cfg: dict[str, Any]) -> None:
    """Set ``__can_jump_to__``/``__may_interrupt__`` on the decorated function too, as LangChain's decorators do
    (a callable that refuses attributes, such as a bound method, keeps the configuration on the class only)."""
    try:
        if "can_jump_to" in hook_cfg:
            fn.__can_jump_to__ = list(hook_cfg["can_jump_to"])  # type: ignore[attr-defined]
        if hook_cfg.get("may_interrupt"):
            fn.__may_interrupt__ = True  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass


def make_middleware(
    fn: Callable[..., Any],
    hook: str,
    *,
    name: str | None = None,
    state_schema: type[Any] | None = None,
    tools: Sequence[BaseTool] | None = None,
    config: dict[str, Any] | None = None,
) -> AgentMiddleware[Any, Any]:
    """Make an instance of a new ``AgentMiddleware`` subclass whose ``hook`` (or async twin) is ``fn``."""
    if not callable(fn):
        raise MiddlewareConfigError.decorated_not_callable(hook, fn, name or hook)
    cls_name = name or getattr(fn, "__name__", None) or hook
    method = HOOKS[hook].async_name if inspect.iscoroutinefunction(fn) else hook
    hook_cfg: dict[str, Any] = {}
    if config:
        if config.get("can_jump_to") is not None:
            hook_cfg["can_jump_to"] = list(config["can_jump_to"])
        if config.get("may_interrupt"):
            hook_cfg["may_interrupt"] = True
        _mark(fn, hook_cfg)
    attrs: dict[str, Any] = {
        method: staticmethod(fn),
        "state_schema": state_schema if state_schema is not None else AgentState,
        "tools": list(tools or ()),
        "_hook_config": {method: hook_cfg} if hook_cfg else {},
        "__module__": getattr(fn, "__module__", __name__),
        "__doc__": getattr(fn, "__doc__", None),
        "__qualname__": cls_name,
    }
    cls = type(cls_name, (AgentMiddleware,), attrs)
    instance: AgentMiddleware[Any, Any] = cls()
    return instance


before_agent = _HookDecorator("before_agent", node=True)
before_model = _HookDecorator("before_model", node=True)
after_model = _HookDecorator("after_model", node=True)
after_agent = _HookDecorator("after_agent", node=True)
modify_model_request = _HookDecorator("modify_model_request", node=False)
wrap_model_call = _HookDecorator("wrap_model_call", node=False)
wrap_tool_call = _HookDecorator("wrap_tool_call", node=False)
before_tool = _HookDecorator("before_tool", node=False)
after_tool = _HookDecorator("after_tool", node=False)


def _prompt_message(value: str | SystemMessage, owner: str) -> SystemMessage:
    if isinstance(value, SystemMessage):
        return value
    if isinstance(value, str):
        return SystemMessage(content=value)
    raise HookReturnError.for_dynamic_prompt(owner, value)


@overload
def dynamic_prompt(func: Callable[..., Any], /) -> AgentMiddleware[Any, Any]: ...


@overload
def dynamic_prompt(
    func: None = None, /, *, name: str | None = None, state_schema: type[Any] | None = None,
    tools: Sequence[BaseTool] | None = None,
) -> Callable[[Callable[..., Any]], AgentMiddleware[Any, Any]]: ...


def dynamic_prompt(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    state_schema: type[Any] | None = None,
    tools: Sequence[BaseTool] | None = None,
) -> AgentMiddleware[Any, Any] | Callable[[Callable[..., Any]], AgentMiddleware[Any, Any]]:
    """Set the system prompt of each model call from ``fn(request) -> str | SystemMessage``.

    Compiles to a ``wrap_model_call`` that calls ``handler(request.override(system_message=...))``; it overrides
    ``create_agent(system_prompt=...)``, and with several the innermost (last listed) wins.
    """

    def build(fn: Callable[..., Any]) -> AgentMiddleware[Any, Any]:
        owner: str = name or str(getattr(fn, "__name__", "dynamic_prompt"))
        wrapper: Callable[..., Any]
        if inspect.iscoroutinefunction(fn):

            async def awrap(request: ModelRequest[Any], handler: AsyncModelHandler) -> ModelResponse[Any]:
                message = _prompt_message(await fn(request), owner)
                return await handler(request.override(system_message=message))

            wrapper = awrap
        else:

            def wrap(request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any]:
                message = _prompt_message(fn(request), owner)
                return handler(request.override(system_message=message))

            wrapper = wrap
        wrapper.__name__ = getattr(fn, "__name__", "dynamic_prompt")
        wrapper.__doc__ = fn.__doc__
        return make_middleware(wrapper, "wrap_model_call", name=owner, state_schema=state_schema, tools=tools)

    if func is not None:
        return build(func)
    return build
