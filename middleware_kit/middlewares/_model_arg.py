"""Model and tool arguments of the bundled middlewares that call a model of their own (private helper).

A middleware's ``model=`` accepts a ``BaseChatModel`` instance. A model string such as ``"openai:gpt-4o-mini"`` is
resolved through :func:`middleware_kit.models.resolve_model` when that module is installed (it resolves names lazily
through provider packages); without it the string is rejected with an error saying to pass an instance.

The calls these middlewares make are tagged ``nostream`` (LangGraph keeps them out of ``stream_mode="messages"``) and
with ``middleware_kit:<purpose>``, carry LangChain's ``lc_source`` metadata and the internal-call marker (kept out of
``stream_events(version="v3")``), and are named ``"{middleware}.{purpose}"`` in traces. They are made through
:func:`internal_call`: under run control, and paid once (recorded in the call ledger with their step).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.constants import TAG_NOSTREAM

from middleware_kit._engine.drive import Step
from middleware_kit._engine.internal_calls import ainvoke_internal, internal_call_metadata, invoke_internal
from middleware_kit.errors import MiddlewareConfigError, ProviderPackageError

__all__ = ["internal_call", "internal_call_config", "resolve_chat_model", "unresolved_model", "tool_names"]


def _find_resolver() -> Callable[..., Any] | None:
    try:
        module = importlib.import_module("middleware_kit.models")
    except ImportError:
        return None
    resolver = getattr(module, "resolve_model", None)
    return resolver if callable(resolver) else None


_RESOLVE_MODEL: Callable[..., Any] | None = _find_resolver()
"""``middleware_kit.models.resolve_model`` when that module exists (looked up once, at import time)."""


def unresolved_model(middleware: str, parameter: str, value: object, exc: Exception) -> MiddlewareConfigError:
    """The error for a model string that could not be resolved: a :class:`ProviderPackageError` (an ``ImportError``
    too, as LangChain's ``init_chat_model`` raises) when the provider package is missing, else a
    ``MiddlewareConfigError``; both name the middleware and the parameter. Raise it ``from exc``."""
    error = ProviderPackageError if isinstance(exc, ImportError) else MiddlewareConfigError
    if isinstance(exc, MiddlewareConfigError):  # resolve_model's own message says what to do
        return error(f"{middleware}: {parameter}={value!r}: {exc}", middleware=middleware, hook=parameter)
    return error(
        f"{middleware}: {parameter}={value!r} could not be resolved to a chat model ({type(exc).__name__}: {exc}). "
        f"Pass a model instance instead.",
        middleware=middleware,
        hook=parameter,
    )


def resolve_chat_model(
    value: object,
    *,
    middleware: str,
    parameter: str,
    resolver: Callable[..., Any] | None = None,
    **kwargs: Any,
) -> BaseChatModel:
    """``value`` as a chat model: an instance as it is, a string through ``resolver(value, **kwargs)`` (default
    ``resolve_model``; a middleware passes its module's patchable ``init_chat_model``); else a config error naming
    ``middleware`` and ``parameter``."""
    if isinstance(value, BaseChatModel):
        return value
    if isinstance(value, str):
        resolve = resolver if resolver is not None else _RESOLVE_MODEL
        if resolve is None:
            raise MiddlewareConfigError(
                f"{middleware}: {parameter}={value!r} is a model name, and resolving names needs "
                f"middleware_kit.models, which is not available. Pass a model instance instead, e.g. "
                f"{parameter}=ChatOpenAI(model='gpt-4o-mini') (or ScriptedChatModel([...]) in tests).",
                middleware=middleware,
                hook=parameter,
            )
        try:
            model = resolve(value, **kwargs)
        except Exception as exc:
            raise unresolved_model(middleware, parameter, value, exc) from exc
        if not isinstance(model, BaseChatModel):
            raise MiddlewareConfigError(
                f"{middleware}: {parameter}={value!r} resolved to {type(model).__name__}, not a chat model. "
                f"Pass a BaseChatModel instance instead.",
                middleware=middleware,
                hook=parameter,
            )
        return model
    raise MiddlewareConfigError(
        f"{middleware}: {parameter} must be a BaseChatModel instance or a model name such as 'openai:gpt-4o-mini'; "
        f"got {type(value).__name__} ({value!r:.60}).",
        middleware=middleware,
        hook=parameter,
    )


_LC_SOURCES: dict[str, str] = {
    "emulate": "tool_emulation",
    "select_tools": "tool_selection",
    "summarize": "summarization",
}
"""LangChain's ``lc_source`` for the purposes whose LangChain middleware has one; other purposes are their own."""


def internal_call_config(middleware: str, purpose: str, *, source: str | None = None) -> RunnableConfig:
    """Config of a model call a middleware makes for itself: never streamed to the user, named in traces.

    Its metadata carries LangChain's ``lc_source`` (``source``, else LangChain's name for ``purpose``: ``"emulate"``
    is ``"tool_emulation"``, ``"select_tools"`` ``"tool_selection"``, ``"summarize"`` ``"summarization"``; else
    ``purpose``) and the internal-call marker of :func:`middleware_kit._engine.internal_calls.internal_call_metadata`,
    which
    keeps the call out of ``stream_events(version="v3")``'s ``run.messages``."""
    return {
        "tags": [TAG_NOSTREAM, f"middleware_kit:{purpose}"],
        "run_name": f"{middleware}.{purpose}",
        "metadata": {"lc_source": source or _LC_SOURCES.get(purpose, purpose), **internal_call_metadata()},
    }


def internal_call(model: Any, input: Any, config: RunnableConfig | None, *, site: str) -> Step:
    """A middleware's own call of ``model`` as a step of its flow (``invoke_internal`` under ``invoke``,
    ``ainvoke_internal`` under ``ainvoke``): tagged internal, under the run's control, and recorded in the call ledger
    as ``site`` (``"{middleware}.{hook}"``), so a replay of the step after a crash does not pay for it again."""
    return Step(functools.partial(invoke_internal, site=site), functools.partial(ainvoke_internal, site=site), model,
                input, config)


def tool_names(items: Iterable[object], *, middleware: str, parameter: str) -> tuple[str, ...]:
    """The names of ``items`` (tool names and/or ``BaseTool`` instances), in order and without repeats; anything
    else is a :class:`MiddlewareConfigError` naming ``middleware`` and ``parameter``."""
    names: list[str] = []
    for item in items:
        if isinstance(item, BaseTool):
            names.append(item.name)
        elif isinstance(item, str) and item:
            names.append(item)
        else:
            raise MiddlewareConfigError(
                f"{middleware}: {parameter} must hold tool names or BaseTool instances; got {item!r:.60}.",
                middleware=middleware,
                hook=parameter,
            )
    return tuple(dict.fromkeys(names))
