"""LangChain hooks kept for direct calls: :class:`direct_call_only`.

Some bundled middlewares do a LangChain hook's work elsewhere in an agent, better: PII is rewritten by the message
guard before anything is stored (not in ``before_model``/``after_model`` after the fact), context edits run once per
model call as a ``modify_model_request`` (not in a ``wrap_model_call`` that a retrying layer would re-enter). Their
users' unit tests still call the LangChain hook by hand (``mw.before_model(state, Runtime())``,
``mw.wrap_model_call(request, handler)``) and expect LangChain's result. :class:`direct_call_only` serves both: on an
instance the attribute is the method; on the class it is :class:`~middleware_kit.middleware.AgentMiddleware`'s
default, and the engine reads hooks from the class (``middleware.defined_hooks``), so an agent never runs it: no
graph node, no wrap layer, no work done twice per model call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from middleware_kit.middleware import AgentMiddleware

__all__ = ["direct_call_only"]

F = TypeVar("F", bound=Callable[..., Any])


def direct_call_only(fn: F) -> F:
    """Decorate a hook method so that only direct calls reach it (see the module docstring)."""
    return cast(F, _DirectCallOnly(fn))


class _DirectCallOnly:
    """The descriptor :func:`direct_call_only` returns."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        if not callable(getattr(AgentMiddleware, name, None)):
            raise TypeError(f"direct_call_only decorates an AgentMiddleware hook; {owner.__name__}.{name} is not one")
        self.name = name

    def __get__(self, obj: object | None, objtype: type | None = None) -> Any:
        if obj is None:  # the class: what the engine reads, the base default (not a hook of this middleware)
            return getattr(AgentMiddleware, self.name)
        return self.fn.__get__(obj, objtype)
