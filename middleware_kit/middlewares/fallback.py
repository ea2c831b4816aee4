"""``ModelFallbackMiddleware``: when the model call fails, try other models, in order.

Every fallback request is derived from the request this middleware received (``request.override(model=...)``), never
from a previous fallback's, so nothing one attempt changed leaks into the next. Model settings that only the
original provider understands (``cache_control``, added by prompt-caching middlewares) are dropped when the fallback
model is of another class. LangGraph control flow (``GraphInterrupt``, ``ParentCommand``) and ``MiddlewareError``
propagate at once: no fallback is tried for them.

Each fallback writes ``{"event": "fallback", "middleware", "fallback", "model", "error"}`` to the custom stream
(``fallback``: 1 for the first fallback model).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.errors import GraphBubbleUp

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.hooks import AsyncModelHandler, ModelHandler
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import ModelRequest, ModelResponse

__all__ = ["PROVIDER_SPECIFIC_SETTINGS", "ModelFallbackMiddleware"]

PROVIDER_SPECIFIC_SETTINGS: frozenset[str] = frozenset({"cache_control"})
"""``model_settings`` keys dropped when falling back to a model of another class (providers reject them)."""


def _label(model: BaseChatModel) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


class ModelFallbackMiddleware(AgentMiddleware):
    """On a model error, retry the call with ``first_model``, then each of ``more``; the first success wins.

    Args:
        first_model: The first model to fall back to (a ``BaseChatModel`` instance).
        *more: Further fallbacks, tried in order.

    If every model fails, the last error is raised. Errors are not filtered: list a :class:`ModelRetryMiddleware`
    inside this one (after it in ``middleware=[...]``) to retry each model before falling back.
    """

    def __init__(self, first_model: BaseChatModel, *more: BaseChatModel) -> None:
        models = (first_model, *more)
        for index, model in enumerate(models):
            if not isinstance(model, BaseChatModel):
                hint = (
                    " Model names such as 'openai:gpt-4o' need langchain's init_chat_model; pass an instance "
                    "(ChatOpenAI(model='gpt-4o'))."
                    if isinstance(model, str)
                    else ""
                )
                raise MiddlewareConfigError(
                    f"ModelFallbackMiddleware: fallback model #{index + 1} is {model!r} "
                    f"({type(model).__name__}); it must be a BaseChatModel instance.{hint}",
                    middleware="ModelFallbackMiddleware",
                    hook="models",
                )
        self.models: tuple[BaseChatModel, ...] = models
        """The fallback models, in the order they are tried."""

    def _fallbacks(self, request: ModelRequest[Any]) -> Iterator[tuple[int, BaseChatModel, ModelRequest[Any]]]:
        original = type(request.model)
        for number, model in enumerate(self.models, start=1):
            changes: dict[str, Any] = {"model": model}
            if type(model) is not original and PROVIDER_SPECIFIC_SETTINGS & request.model_settings.keys():
                changes["model_settings"] = {
                    k: v for k, v in request.model_settings.items() if k not in PROVIDER_SPECIFIC_SETTINGS
                }
            yield number, model, request.override(**changes)

    def _announce(self, request: ModelRequest[Any], number: int, model: BaseChatModel, error: Exception) -> None:
        emit(
            request.runtime,
            {
                "event": "fallback",
                "middleware": self.name,
                "fallback": number,
                "model": _label(model),
                "error": type(error).__name__,
            },
        )

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any]:
        try:
            return handler(request)
        except (GraphBubbleUp, MiddlewareError):
            raise
        except Exception as exc:
            error = exc
        for number, model, fallback in self._fallbacks(request):
            self._announce(request, number, model, error)
            try:
                return handler(fallback)
            except (GraphBubbleUp, MiddlewareError):
                raise
            except Exception as exc:
                error = exc
        raise error

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> ModelResponse[Any]:
        try:
            return await handler(request)
        except (GraphBubbleUp, MiddlewareError):
            raise
        except Exception as exc:
            error = exc
        for number, model, fallback in self._fallbacks(request):
            self._announce(request, number, model, error)
            try:
                return await handler(fallback)
            except (GraphBubbleUp, MiddlewareError):
                raise
            except Exception as exc:
                error = exc
        raise error
