"""``ModelFallbackMiddleware``: when the model call fails, try other models, in order.

Every fallback request is derived from the request this middleware received (``request.override(model=...)``), never
from a previous fallback's, so nothing one attempt changed leaks into the next. LangGraph control flow
(``GraphInterrupt``, ``ParentCommand``) and ``MiddlewareError`` propagate at once: no fallback is tried for them.

Prompt-cache settings only one provider understands are removed from a fallback request whose model would reject
them, as LangChain 1.5 does:

- Anthropic ``cache_control`` markers (and Bedrock ``cachePoint`` blocks) are kept only when the fallback is
  Anthropic-compatible: its ``_llm_type`` is Anthropic's (direct, Bedrock or Vertex), or it is ``ChatAnthropic``,
  ``ChatAnthropicVertex``, or a Claude model on ``ChatBedrock`` / ``ChatBedrockConverse`` (recognised by
  ``_llm_type``, class name and model id; no provider package is imported). Otherwise they are removed from
  ``model_settings``, from the content blocks (and their ``extras``/``metadata``) of the system message and of every
  message, and from the tools' ``extras`` and dict tools (an ``extras`` left empty becomes None).
- ``prompt_cache_key`` is kept for OpenAI and Fireworks fallbacks, ``prompt_cache_retention`` for OpenAI, Fireworks'
  own settings and its ``X-Session-Affinity`` header (in ``model_settings["extra_headers"]``) for Fireworks
  (:data:`PROVIDER_SPECIFIC_SETTINGS`).

:meth:`ModelFallbackMiddleware.fallback_request` does this; override it to adapt requests to your fallbacks.

Each fallback writes ``{"event": "fallback", "middleware", "fallback", "model", "error"}`` to the custom stream
(``fallback``: 1 for the first fallback model).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._model_arg import resolve_chat_model
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import ModelRequest

__all__ = ["PROVIDER_SPECIFIC_SETTINGS", "ModelFallbackMiddleware", "is_anthropic_compatible"]

_ANTHROPIC_CLASSES = frozenset({"ChatAnthropic", "ChatAnthropicVertex", "ChatAnthropicMessages"})
_BEDROCK_CLASSES = frozenset({"ChatBedrock", "ChatBedrockConverse", "BedrockChat"})
_OPENAI_CLASSES = frozenset({"ChatOpenAI", "AzureChatOpenAI", "BaseChatOpenAI"})
_FIREWORKS_CLASSES = frozenset({"ChatFireworks"})
# ``_llm_type`` values of the provider integrations (each package reports its own): Anthropic direct, Claude on
# Bedrock through ``ChatAnthropicBedrock``, Claude on Vertex.
_ANTHROPIC_LLM_TYPES = frozenset({"anthropic-chat", "anthropic-bedrock-chat", "anthropic-chat-vertexai"})
_OPENAI_LLM_TYPES = frozenset({"openai-chat", "azure-openai-chat"})
_FIREWORKS_LLM_TYPE = "fireworks-chat"
_SESSION_AFFINITY_HEADER = "x-session-affinity"
"""Fireworks' prompt-cache affinity header (in ``model_settings["extra_headers"]``; names are case-insensitive)."""
_NESTED = ("extras", "metadata")
"""The dicts inside a content block that may carry their own ``cache_control``."""


def _unwrap(model: Any) -> Any:
    """The chat model inside ``model.bind(...)`` / ``bind_tools`` wrappers."""
    while not isinstance(model, BaseChatModel) and hasattr(model, "bound"):
        model = model.bound
    return model


def _class_names(model: Any) -> set[str]:
    return {cls.__name__ for cls in type(_unwrap(model)).__mro__}


def _llm_type(model: Any) -> str | None:
    try:
        value = getattr(_unwrap(model), "_llm_type", None)
    except Exception:  # a property that fails says nothing about the provider
        return None
    return value if isinstance(value, str) else None


def _model_id(model: Any) -> str:
    model = _unwrap(model)
    for attribute in ("model_id", "model", "model_name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value.lower()
    return ""


def is_anthropic_compatible(model: Any) -> bool:
    """Whether ``model`` accepts Anthropic ``cache_control`` markers: Anthropic's own chat model, Claude on Vertex,
    or a Claude model on Bedrock. Decided by the model's ``_llm_type`` (as LangChain 1.5), class name and model id
    only: no provider package is imported."""
    if _llm_type(model) in _ANTHROPIC_LLM_TYPES:
        return True
    names = _class_names(model)
    if names & _ANTHROPIC_CLASSES:
        return True
    model_id = _model_id(model)
    return bool(names & _BEDROCK_CLASSES) and ("anthropic" in model_id or "claude" in model_id)


def _is_openai(model: Any) -> bool:
    return _llm_type(model) in _OPENAI_LLM_TYPES or bool(_class_names(model) & _OPENAI_CLASSES)


def _is_fireworks(model: Any) -> bool:
    return _llm_type(model) == _FIREWORKS_LLM_TYPE or bool(_class_names(model) & _FIREWORKS_CLASSES)


def _is_openai_or_fireworks(model: Any) -> bool:
    return _is_openai(model) or _is_fireworks(model)


PROVIDER_SPECIFIC_SETTINGS: Mapping[str, Callable[[Any], bool]] = MappingProxyType(
    {
        "cache_control": is_anthropic_compatible,
        "prompt_cache_key": _is_openai_or_fireworks,
        "prompt_cache_retention": _is_openai,
        "prompt_cache_max_len": _is_fireworks,
        "prompt_cache_isolation_key": _is_fireworks,
    }
)
"""``model_settings`` keys that only some providers understand -> which fallback models keep them. Beyond these,
Fireworks' ``X-Session-Affinity`` header in ``model_settings["extra_headers"]`` is kept only for Fireworks."""


def _label(model: BaseChatModel) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _without_marker(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """``payload`` without ``cache_control`` (the same object when it has none)."""
    if "cache_control" not in payload:
        return payload
    return {k: v for k, v in payload.items() if k != "cache_control"}


def _clean_block(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """A content block without ``cache_control``, in itself or in its ``extras``/``metadata`` (the same object
    when it has none)."""
    cleaned = _without_marker(block)
    for key in _NESTED:
        nested = cleaned.get(key)
        if isinstance(nested, Mapping) and "cache_control" in nested:
            cleaned = {**cleaned, key: _without_marker(nested)}
    return cleaned


def _clean_blocks(content: Any) -> Any:
    """``content`` without cache markers and ``cachePoint`` blocks (the same object when it has none)."""
    if not isinstance(content, list):
        return content
    changed = False
    out: list[Any] = []
    for block in content:
        if isinstance(block, Mapping):
            if "cachePoint" in block and len(block) == 1:
                changed = True
                continue
            cleaned = _clean_block(block)
            changed = changed or cleaned is not block
            block = cleaned
        out.append(block)
    return out if changed else content


def _clean_message(message: BaseMessage) -> BaseMessage:
    content = _clean_blocks(message.content)
    if content is message.content:
        return message
    return message.model_copy(update={"content": content})


def _clean_tool(tool: Any) -> Any:
    """A tool without ``cache_control`` (a ``BaseTool``'s ``extras``; a dict tool's top level and ``extras``); an
    ``extras`` left empty becomes None. The same object when it has none."""
    if isinstance(tool, BaseTool):
        extras = tool.extras
        if isinstance(extras, Mapping) and "cache_control" in extras:
            return tool.model_copy(update={"extras": dict(_without_marker(extras)) or None})
        return tool
    if not isinstance(tool, Mapping):
        return tool
    cleaned = _without_marker(tool)
    extras = cleaned.get("extras")
    if isinstance(extras, Mapping) and "cache_control" in extras:
        cleaned = {**cleaned, "extras": dict(_without_marker(extras)) or None}
    return cleaned


def _clean_settings(settings: Mapping[str, Any], model: Any) -> Mapping[str, Any]:
    """``model_settings`` without what ``model`` would reject (the same object when nothing is)."""
    dropped = {k for k, keeps in PROVIDER_SPECIFIC_SETTINGS.items() if k in settings and not keeps(model)}
    cleaned = {k: v for k, v in settings.items() if k not in dropped} if dropped else settings
    headers = cleaned.get("extra_headers")
    if isinstance(headers, Mapping) and not _is_fireworks(model):
        kept = {k: v for k, v in headers.items() if not (isinstance(k, str) and k.lower() == _SESSION_AFFINITY_HEADER)}
        if len(kept) != len(headers):
            cleaned = {k: v for k, v in cleaned.items() if k != "extra_headers"}
            if kept:
                cleaned["extra_headers"] = kept
    return cleaned


class ModelFallbackMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware):
    """On a model error, retry the call with ``first_model``, then each of ``more``; the first success wins.

    Args:
        first_model: The first model to fall back to: a ``BaseChatModel``, or a model string such as
            ``"openai:gpt-4o-mini"`` (resolved through :func:`middleware_kit.models.resolve_model`).
        *more: Further fallbacks, tried in order.

    If every model fails, the last error is raised. Errors are not filtered: list a :class:`ModelRetryMiddleware`
    inside this one (after it in ``middleware=[...]``) to retry each model before falling back. Prompt-cache
    settings a fallback model would reject are removed from its request (see the module docstring). The
    configuration is read-only once an agent adopts the instance (``mw.replace(first_model=...)`` makes a changed
    copy).
    """

    def __init__(self, first_model: BaseChatModel | str, *more: BaseChatModel | str) -> None:
        resolved: list[BaseChatModel] = []
        for index, model in enumerate((first_model, *more)):
            if not isinstance(model, (BaseChatModel, str)):
                raise MiddlewareConfigError(
                    f"ModelFallbackMiddleware: fallback model #{index + 1} is {model!r:.60} "
                    f"({type(model).__name__}); it must be a BaseChatModel instance or a model string such as "
                    f"'openai:gpt-4o-mini'.",
                    middleware="ModelFallbackMiddleware",
                    hook="models",
                )
            try:
                resolved.append(resolve_chat_model(model, middleware="ModelFallbackMiddleware", parameter="models"))
            except MiddlewareConfigError as error:
                if error.middleware == "ModelFallbackMiddleware":
                    raise
                raise MiddlewareConfigError(
                    f"{error} (ModelFallbackMiddleware, fallback model #{index + 1}: {model!r}.)",
                    middleware="ModelFallbackMiddleware",
                    hook="models",
                ) from error
        self.models: tuple[BaseChatModel, ...] = tuple(resolved)
        """The fallback models, in the order they are tried."""

    def fallback_request(self, request: ModelRequest[Any], model: BaseChatModel) -> ModelRequest[Any]:
        """The request sent to fallback ``model``: ``request`` (the one this middleware received) with ``model`` and
        without the prompt-cache settings ``model`` would reject (see the module docstring). Fields with nothing to
        remove keep their identity.

        Override it to adapt requests to your fallbacks (call ``super()`` to keep the cleaning). It runs before the
        attempt, outside the error handling: an exception it raises propagates at once, it is never taken for a
        model failure and never hidden by a later fallback's success.
        """
        changes: dict[str, Any] = {"model": model}
        settings = _clean_settings(request.model_settings, model)
        if settings is not request.model_settings:
            changes["model_settings"] = settings
        if not is_anthropic_compatible(model):
            messages = tuple(_clean_message(m) for m in request.messages)
            if any(new is not old for new, old in zip(messages, request.messages, strict=True)):
                changes["messages"] = messages
            system = request.system_message
            if system is not None:
                cleaned = _clean_message(system)
                if cleaned is not system:
                    changes["system_message"] = cleaned
            tools = tuple(_clean_tool(t) for t in request.tools)
            if any(new is not old for new, old in zip(tools, request.tools, strict=True)):
                changes["tools"] = tools
        return request.override(**changes)

    def _fallbacks(self, request: ModelRequest[Any]) -> Iterator[tuple[int, BaseChatModel, ModelRequest[Any]]]:
        for number, model in enumerate(self.models, start=1):
            yield number, model, self.fallback_request(request, model)

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

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Try the model, then each fallback (a flow: one body for invoke and ainvoke)."""
        try:
            return (yield request)
        except (GraphBubbleUp, MiddlewareError):
            raise
        except Exception as exc:
            error = exc
        for number, model, fallback in self._fallbacks(request):
            self._announce(request, number, model, error)
            try:
                return (yield fallback)
            except (GraphBubbleUp, MiddlewareError):
                raise
            except Exception as exc:
                error = exc
        raise error
