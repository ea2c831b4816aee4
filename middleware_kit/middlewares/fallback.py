"""``ModelFallbackMiddleware``: when the model call fails, try other models, in order.

Every fallback request is derived from the request this middleware received (``request.override(model=...)``), never
from a previous fallback's, so nothing one attempt changed leaks into the next. LangGraph control flow
(``GraphInterrupt``, ``ParentCommand``) and ``MiddlewareError`` propagate at once: no fallback is tried for them.

Prompt-cache settings only one provider understands are removed from a fallback request whose model would reject
them, as LangChain 1.5 does:

- Anthropic ``cache_control`` markers (and Bedrock ``cachePoint`` blocks) are kept only when the fallback is
  Anthropic-compatible: ``ChatAnthropic``, ``ChatAnthropicVertex``, or a Claude model on ``ChatBedrock`` /
  ``ChatBedrockConverse`` (recognised by class name and model id; no provider package is imported). Otherwise they
  are removed from ``model_settings``, from the content blocks of the system message and of every message, and from
  the tools' ``extras`` and dict tools.
- OpenAI's ``prompt_cache_key`` / ``prompt_cache_retention`` and Fireworks' prompt-cache settings
  (:data:`PROVIDER_SPECIFIC_SETTINGS`) are kept only for a fallback of that provider.

Each fallback writes ``{"event": "fallback", "middleware", "fallback", "model", "error"}`` to the custom stream
(``fallback``: 1 for the first fallback model).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
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


def _unwrap(model: Any) -> Any:
    """The chat model inside ``model.bind(...)`` / ``bind_tools`` wrappers."""
    while not isinstance(model, BaseChatModel) and hasattr(model, "bound"):
        model = model.bound
    return model


def _class_names(model: Any) -> set[str]:
    return {cls.__name__ for cls in type(_unwrap(model)).__mro__}


def _model_id(model: Any) -> str:
    model = _unwrap(model)
    for attribute in ("model_id", "model", "model_name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value.lower()
    return ""


def is_anthropic_compatible(model: Any) -> bool:
    """Whether ``model`` accepts Anthropic ``cache_control`` markers: Anthropic's own chat model, Anthropic on
    Vertex, or a Claude model on Bedrock. Decided by class name and model id only."""
    names = _class_names(model)
    if names & _ANTHROPIC_CLASSES:
        return True
    model_id = _model_id(model)
    return bool(names & _BEDROCK_CLASSES) and ("anthropic" in model_id or "claude" in model_id)


def _is_openai(model: Any) -> bool:
    return bool(_class_names(model) & _OPENAI_CLASSES)


def _is_fireworks(model: Any) -> bool:
    return bool(_class_names(model) & _FIREWORKS_CLASSES)


PROVIDER_SPECIFIC_SETTINGS: Mapping[str, Callable[[Any], bool]] = {
    "cache_control": is_anthropic_compatible,
    "prompt_cache_key": _is_openai,
    "prompt_cache_retention": _is_openai,
    "prompt_cache_max_len": _is_fireworks,
    "prompt_cache_isolation_key": _is_fireworks,
}
"""``model_settings`` keys that only one provider understands -> which fallback models keep them."""


def _label(model: BaseChatModel) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _clean_blocks(content: Any) -> Any:
    """``content`` without ``cache_control`` keys and ``cachePoint`` blocks (the same object when it has none)."""
    if not isinstance(content, list):
        return content
    changed = False
    out: list[Any] = []
    for block in content:
        if isinstance(block, Mapping) and "cachePoint" in block and len(block) == 1:
            changed = True
            continue
        if isinstance(block, Mapping) and "cache_control" in block:
            block = {k: v for k, v in block.items() if k != "cache_control"}
            changed = True
        out.append(block)
    return out if changed else content


def _clean_message(message: BaseMessage) -> BaseMessage:
    content = _clean_blocks(message.content)
    if content is message.content:
        return message
    return message.model_copy(update={"content": content})


def _clean_tool(tool: Any) -> Any:
    if isinstance(tool, BaseTool):
        extras = getattr(tool, "extras", None)
        if isinstance(extras, Mapping) and "cache_control" in extras:
            return tool.model_copy(update={"extras": {k: v for k, v in extras.items() if k != "cache_control"}})
        return tool
    if isinstance(tool, Mapping) and "cache_control" in tool:
        return {k: v for k, v in tool.items() if k != "cache_control"}
    return tool


class ModelFallbackMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware):
    """On a model error, retry the call with ``first_model``, then each of ``more``; the first success wins.

    Args:
        first_model: The first model to fall back to: a ``BaseChatModel``, or a model string such as
            ``"openai:gpt-4o-mini"`` (resolved through :func:`middleware_kit.models.resolve_model`).
        *more: Further fallbacks, tried in order.

    If every model fails, the last error is raised. Errors are not filtered: list a :class:`ModelRetryMiddleware`
    inside this one (after it in ``middleware=[...]``) to retry each model before falling back. Prompt-cache
    settings a fallback model would reject are removed from its request (see the module docstring). The
    configuration is frozen (``mw.replace(first_model=...)`` makes a changed copy).
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

    def _for(self, request: ModelRequest[Any], model: BaseChatModel) -> ModelRequest[Any]:
        """``request`` for ``model``: the original request, with the cache settings ``model`` would reject removed."""
        changes: dict[str, Any] = {"model": model}
        settings = request.model_settings
        dropped = {k for k, keeps in PROVIDER_SPECIFIC_SETTINGS.items() if k in settings and not keeps(model)}
        if dropped:
            changes["model_settings"] = {k: v for k, v in request.model_settings.items() if k not in dropped}
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
            yield number, model, self._for(request, model)

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
