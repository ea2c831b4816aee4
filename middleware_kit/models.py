"""Model strings: ``"openai:gpt-4o"`` -> a chat model, the way LangChain's ``init_chat_model`` resolves them.

:func:`resolve_model` turns ``"provider:model"`` (or a bare model name whose provider can be inferred from its prefix,
``"gpt-4o"`` -> openai, ``"claude-..."`` -> anthropic) into an instance of the provider package's chat model class.
The provider package is imported lazily, when a string naming it is resolved: middleware_kit depends on none of them
(nor on ``langchain``), and a missing one is a :class:`~middleware_kit.errors.MiddlewareConfigError` naming the
package to ``pip install``. A ``BaseChatModel`` instance is returned as it is.

:data:`PROVIDERS` is the table of providers (the same names as ``init_chat_model``'s ``model_provider``); it is a
read-only mapping.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from langchain_core.language_models import BaseChatModel

from middleware_kit.errors import MiddlewareConfigError, ProviderPackageError

__all__ = ["PROVIDERS", "Provider", "infer_provider", "init_chat_model", "parse_model_string", "resolve_model"]


@dataclass(frozen=True, slots=True)
class Provider:
    """Where a provider's chat model class lives."""

    module: str
    """The module to import (``langchain_openai``)."""
    class_name: str
    """The chat model class in it (``ChatOpenAI``)."""
    model_argument: str = "model"
    """The constructor argument that takes the model name (``model_id`` for some)."""

    @property
    def package(self) -> str:
        """The distribution to ``pip install`` (``langchain-openai``)."""
        return self.module.split(".")[0].replace("_", "-")


PROVIDERS: MappingProxyType[str, Provider] = MappingProxyType(
    {
        "openai": Provider("langchain_openai", "ChatOpenAI"),
        "anthropic": Provider("langchain_anthropic", "ChatAnthropic"),
        "azure_openai": Provider("langchain_openai", "AzureChatOpenAI"),
        "azure_ai": Provider("langchain_azure_ai.chat_models", "AzureAIChatCompletionsModel"),
        "google_vertexai": Provider("langchain_google_vertexai", "ChatVertexAI"),
        "google_genai": Provider("langchain_google_genai", "ChatGoogleGenerativeAI"),
        "google_anthropic_vertex": Provider("langchain_google_vertexai.model_garden", "ChatAnthropicVertex"),
        "bedrock": Provider("langchain_aws", "ChatBedrock", "model_id"),
        "bedrock_converse": Provider("langchain_aws", "ChatBedrockConverse"),
        "cohere": Provider("langchain_cohere", "ChatCohere"),
        "fireworks": Provider("langchain_fireworks", "ChatFireworks"),
        "together": Provider("langchain_together", "ChatTogether"),
        "mistralai": Provider("langchain_mistralai", "ChatMistralAI"),
        "huggingface": Provider("langchain_huggingface", "ChatHuggingFace", "model_id"),
        "groq": Provider("langchain_groq", "ChatGroq"),
        "ollama": Provider("langchain_ollama", "ChatOllama"),
        "deepseek": Provider("langchain_deepseek", "ChatDeepSeek"),
        "ibm": Provider("langchain_ibm", "ChatWatsonx", "model_id"),
        "nvidia": Provider("langchain_nvidia_ai_endpoints", "ChatNVIDIA"),
        "xai": Provider("langchain_xai", "ChatXAI"),
        "perplexity": Provider("langchain_perplexity", "ChatPerplexity"),
        "upstage": Provider("langchain_upstage", "ChatUpstage"),
    }
)
"""Provider name -> where its chat model class lives (``init_chat_model``'s ``model_provider`` names)."""

_PREFIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("gpt-", "o1", "o3", "o4", "chatgpt", "text-davinci"), "openai"),
    (("claude",), "anthropic"),
    (("command",), "cohere"),
    (("accounts/fireworks",), "fireworks"),
    (("gemini",), "google_vertexai"),
    (("amazon.", "anthropic."), "bedrock"),
    (("mistral", "mixtral", "codestral"), "mistralai"),
    (("deepseek",), "deepseek"),
    (("grok",), "xai"),
    (("sonar",), "perplexity"),
    (("solar",), "upstage"),
)


def infer_provider(model: str) -> str | None:
    """The provider a bare model name belongs to, from its prefix (``"gpt-4o"`` -> ``"openai"``), or None."""
    name = model.lower()
    for prefixes, provider in _PREFIXES:
        if name.startswith(prefixes):
            return provider
    return None


def _normalize(provider: str) -> str:
    return provider.strip().replace("-", "_").lower()


def parse_model_string(spec: str, model_provider: str | None = None) -> tuple[str, str]:
    """``(provider, model name)`` for a model string: ``"openai:gpt-4o"``, or ``"gpt-4o"`` with the provider given
    or inferred. Raises :class:`MiddlewareConfigError` when no provider can be found."""
    model = spec.strip()
    provider = _normalize(model_provider) if model_provider else None
    if provider is None and ":" in model:
        head, _, tail = model.partition(":")
        if _normalize(head) in PROVIDERS:
            provider, model = _normalize(head), tail
    if provider is None:
        provider = infer_provider(model)
    if not model:
        raise MiddlewareConfigError(
            f"Unable to infer model provider for model={spec!r}. The model name is empty: pass "
            f"'provider:model', e.g. 'openai:gpt-4o-mini'.",
            middleware="resolve_model",
            hook="model",
        )
    if provider is None:
        raise MiddlewareConfigError(
            f"Unable to infer model provider for model={spec!r}. Please specify 'model_provider' directly. "
            f"Fix: write 'provider:model' (e.g. 'openai:{model}'); known providers: {', '.join(sorted(PROVIDERS))}.",
            middleware="resolve_model",
            hook="model",
        )
    if provider not in PROVIDERS:
        raise MiddlewareConfigError(
            f"Unsupported model_provider={provider!r}. Supported model providers are: "
            f"{', '.join(sorted(PROVIDERS))}. Fix: use one of them, or pass a chat model instance.",
            middleware="resolve_model",
            hook="model_provider",
        )
    return provider, model


def resolve_model(spec: str | BaseChatModel, **kwargs: Any) -> BaseChatModel:
    """A chat model for ``spec``: an instance as it is; a string through its provider package, imported now.

    ``"openai:gpt-4o-mini"``, ``"anthropic:claude-sonnet-4-5"``, or a bare name whose provider is inferred from its
    prefix (``"gpt-4o"``, ``"claude-..."``, ``"gemini-..."``, ...). Keyword arguments go to the model's constructor
    (``temperature=0``); ``model_provider="groq"`` names the provider of a bare name, as in ``init_chat_model``.

    Raises:
        MiddlewareConfigError: the provider is unknown or cannot be inferred; its package is not installed (the
            message names the package to ``pip install``); or what it built is not a chat model.
    """
    if isinstance(spec, BaseChatModel):
        if kwargs:
            raise MiddlewareConfigError(
                f"resolve_model got a chat model instance and keyword arguments {sorted(kwargs)}; arguments apply "
                f"only to a model string. Fix: configure the instance itself.",
                middleware="resolve_model",
                hook="model",
            )
        return spec
    if not isinstance(spec, str):
        raise MiddlewareConfigError(
            f"resolve_model needs a model string such as 'openai:gpt-4o-mini' or a BaseChatModel instance, got "
            f"{type(spec).__name__} ({spec!r:.60}).",
            middleware="resolve_model",
            hook="model",
        )
    provider_name, model = parse_model_string(spec, kwargs.pop("model_provider", None))
    provider = PROVIDERS[provider_name]
    root = provider.module.split(".")[0]
    if importlib.util.find_spec(root) is None:
        raise ProviderPackageError(
            f"Unable to import {root}. Please install with `pip install -U {provider.package}` "
            f"(needed to resolve the model string {spec!r}; or pass a chat model instance instead).",
            middleware="resolve_model",
            hook="model",
        )
    module = importlib.import_module(provider.module)
    cls = getattr(module, provider.class_name, None)
    if not isinstance(cls, type) or not issubclass(cls, BaseChatModel):
        raise MiddlewareConfigError(
            f"{provider.module}.{provider.class_name} is not a chat model class (resolving {spec!r}); the installed "
            f"{provider.package} may be too old or too new. Fix: `pip install -U {provider.package}`, or pass a chat "
            f"model instance.",
            middleware="resolve_model",
            hook="model",
        )
    if provider_name == "huggingface":
        factory = getattr(cls, "from_model_id", None)
        if callable(factory):
            built = factory(model_id=model, task=kwargs.pop("task", "text-generation"), **kwargs)
            if isinstance(built, BaseChatModel):
                return built
    return cls(**{provider.model_argument: model, **kwargs})


init_chat_model = resolve_model
"""LangChain's name for :func:`resolve_model` (``langchain.chat_models.init_chat_model``): ``init_chat_model(
"openai:gpt-4o-mini", temperature=0)``."""
