"""``ProviderToolSearchMiddleware``: defer tools behind the provider's server-side tool search.

Instead of sending every tool schema on every call, the chosen tools are marked deferred (``extras["defer_loading"]
= True`` on a copy of the tool; the provider integrations send it as ``defer_loading``) and the provider's own tool
search tool is added. The provider loads a deferred tool's full schema only when the model searches for it, which
keeps requests small when many tools are bound. The agent still executes the tools: only what the model is sent
changes.

A tool is deferred when it is named (or given) in ``searchable_tools``, or already carries
``extras["defer_loading"] = True``. Every name in ``searchable_tools`` must be among the request's tools: a name that
is not (usually a typo, or a tool renamed) raises a ``ValueError`` naming it, before anything else is checked.

The provider is read from the request's model, as LangChain 1.5 does, first match wins:

1. a configurable model (``init_chat_model`` with configurable fields): its ``model_provider``, else the provider of
   its ``model`` (``"openai:gpt-5"``, or a bare name such as ``"claude-sonnet-4-5"`` whose provider
   :func:`middleware_kit.models.infer_provider` infers), from its parameters for this call (``runtime.config``) over
   its defaults;
2. the model's LangSmith provider (``_get_ls_params()["ls_provider"]``), whatever it is;
3. its class name (``ChatAnthropic``, ``ChatOpenAI``) or ``_llm_type`` (``anthropic-…``, ``openai-…``).

Provider names are compared lower-cased with ``-`` read as ``_``. Supported providers and their search tools:

- ``anthropic``: :data:`ANTHROPIC_TOOL_SEARCH` (BM25 variant);
- ``openai``: :data:`OPENAI_TOOL_SEARCH`.

When nothing is deferred the request passes through unchanged, whatever the provider. When something is deferred
and the provider cannot be determined or has no tool search, the model call raises :class:`ToolSearchUnsupportedError`
(a ``ValueError``, as LangChain) naming the model and the tools; beyond LangChain, ``on_unsupported="send_all"``
sends the tools normally instead (with a ``tool_search_unsupported`` event), which keeps a
``ModelFallbackMiddleware`` to another provider working. Each deferring call writes ``{"event": "tools_deferred",
"middleware", "provider", "deferred"}`` to the custom stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypeGuard

from langchain_core.tools import BaseTool

from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import TOOLS, Config, one_of
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._model_arg import tool_names
from middleware_kit.middlewares._stream import emit
from middleware_kit.models import infer_provider
from middleware_kit.types import ModelRequest

__all__ = [
    "ANTHROPIC_TOOL_SEARCH",
    "OPENAI_TOOL_SEARCH",
    "ProviderToolSearchMiddleware",
    "ToolIdentifier",
    "ToolSearchUnsupportedError",
    "provider_of",
]

ToolIdentifier: TypeAlias = "str | BaseTool"
"""A tool, or its name."""

ANTHROPIC_TOOL_SEARCH: dict[str, str] = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
"""Anthropic's server-side tool search tool (the BM25 variant, as LangChain 1.5 sends)."""
OPENAI_TOOL_SEARCH: dict[str, str] = {"type": "tool_search"}
"""OpenAI's server-side tool search tool (Responses API)."""

_SEARCH_TOOLS: dict[str, dict[str, str]] = {"anthropic": ANTHROPIC_TOOL_SEARCH, "openai": OPENAI_TOOL_SEARCH}
_CLASS_PROVIDERS = {"ChatAnthropic": "anthropic", "AnthropicChat": "anthropic", "ChatOpenAI": "openai",
                    "OpenAIChat": "openai"}
_NAME = "ProviderToolSearchMiddleware"


class ToolSearchUnsupportedError(MiddlewareConfigError):
    """Tools are deferred but the request's model has no server-side tool search we know of, or its provider cannot
    be determined."""


def _normalize(provider: str) -> str:
    return provider.strip().replace("-", "_").lower()


def _from_params(params: Mapping[str, Any]) -> str | None:
    """The provider named by model parameters: ``model_provider``, else that of ``model``."""
    provider = params.get("model_provider")
    if isinstance(provider, str) and provider:
        return _normalize(provider)
    model = params.get("model")
    if not isinstance(model, str) or not model:
        return None
    head, _, tail = model.partition(":")
    if tail:
        return _normalize(head)
    inferred = infer_provider(model)
    return _normalize(inferred) if inferred else None


def _configurable_provider(model: Any, runtime: Any) -> str | None:
    """The provider of a configurable model (duck-typed: ``_model_params(config)`` and ``_default_config``, as
    ``init_chat_model`` with configurable fields returns): this call's parameters over the defaults, then the
    defaults alone."""
    defaults = getattr(model, "_default_config", None)
    params_of = getattr(model, "_model_params", None)
    if callable(params_of):
        config = getattr(runtime, "config", None)
        params = params_of(config if isinstance(config, Mapping) else None)
        if isinstance(params, Mapping):
            merged = {**defaults, **params} if isinstance(defaults, Mapping) else params
            found = _from_params(merged)
            if found:
                return found
    return _from_params(defaults) if isinstance(defaults, Mapping) else None


def provider_of(model: Any, runtime: Any = None) -> str | None:
    """The provider of ``model`` for this call (normalized: ``"anthropic"``, ``"openai"``, ``"mistralai"``, ...), or
    None when it cannot be determined. See the module docstring for the order of the sources."""
    found = _configurable_provider(model, runtime)
    if found:
        return found
    ls_params = getattr(model, "_get_ls_params", None)
    if callable(ls_params):
        params = ls_params()
        if isinstance(params, Mapping) and isinstance(params.get("ls_provider"), str):
            return _normalize(params["ls_provider"])
    by_class = _CLASS_PROVIDERS.get(type(model).__name__)
    if by_class:
        return by_class
    llm_type = getattr(model, "_llm_type", None)
    if isinstance(llm_type, str):
        return next((p for p in _SEARCH_TOOLS if _normalize(llm_type).startswith(p)), None)
    return None


def _is_deferred(tool: Any, names: Sequence[str]) -> TypeGuard[BaseTool]:
    """Only ``BaseTool``s are deferred (a dict tool, such as a provider's own, has no ``extras``)."""
    if not isinstance(tool, BaseTool):
        return False
    extras = tool.extras if isinstance(tool.extras, Mapping) else {}
    return extras.get("defer_loading") is True or tool.name in names


class ProviderToolSearchMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware):
    """Defer selected tools behind provider-native tool search (Anthropic, OpenAI).

    Args:
        searchable_tools: Tools (or names) to defer; each must be among the tools of the request. ``None``: only
            tools already carrying ``extras["defer_loading"] = True``.
        on_unsupported: ``"error"`` (default): a deferring call on a model without tool search (or whose provider
            cannot be determined) raises :class:`ToolSearchUnsupportedError`. ``"send_all"``: send every tool
            normally to such a model.
    """

    __config__ = Config(
        template="{owner}: {param} must be {expected}; got {value!r}.",
        searchable_tools=TOOLS.or_none(
            "a list of tools or tool names", "{owner}: {param} must be {expected}; got {value!r:.60}."
        ),
        on_unsupported=one_of("error", "send_all"),
    )

    def __init__(
        self,
        *,
        searchable_tools: Sequence[ToolIdentifier] | None = None,
        on_unsupported: Literal["error", "send_all"] = "error",
    ) -> None:
        names = tool_names(searchable_tools or (), middleware=_NAME, parameter="searchable_tools")
        self.searchable_tools: tuple[str, ...] = names
        """Names of the tools deferred behind tool search."""
        self.on_unsupported: Literal["error", "send_all"] = on_unsupported

    def _check_bound(self, tools: Sequence[Any]) -> None:
        bound = {t.name for t in tools if isinstance(t, BaseTool)}
        unknown = sorted(set(self.searchable_tools) - bound)
        if unknown:
            raise MiddlewareConfigError(
                f"{self.name}: searchable_tools references tool(s) not bound to the model: {', '.join(unknown)}. "
                f"Fix: pass the agent's tools (or their exact names); a middleware listed before this one may have "
                f"removed them from the request.",
                middleware=self.name,
                hook="wrap_model_call",
            )

    def _unsupported(self, request: ModelRequest[Any], provider: str | None, deferred: list[str]) -> Exception:
        model = type(request.model).__name__
        fix = "Fix: use a supported model, stop deferring these tools, or pass on_unsupported='send_all' to send them "
        fix += "normally to such models."
        if provider is None:
            text = (
                f"{self.name} could not determine the provider of the model {model!r}, so tools {deferred} cannot be "
                f"deferred behind provider tool search (server-side tool search supports: Anthropic, OpenAI). {fix}"
            )
        else:
            text = (
                f"{self.name}: tools {deferred} are deferred behind provider tool search, but the model {model} has "
                f"no server-side tool search (supported: Anthropic, OpenAI). {fix}"
            )
        return ToolSearchUnsupportedError(text, middleware=self.name, hook="wrap_model_call")

    def _send_all(self, request: ModelRequest[Any], deferred: list[str]) -> ModelRequest[Any]:
        event = {"event": "tool_search_unsupported", "middleware": self.name, "model": type(request.model).__name__,
                 "deferred": deferred}
        emit(request.runtime, event)
        return request.override(tools=[_undeferred(t) for t in request.tools])

    def prepare_request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request the model is sent: the deferred tools marked, the provider's search tool added (the same
        request when nothing is deferred). Raises as the class docstring says."""
        tools = request.tools
        self._check_bound(tools)
        deferred = [t.name for t in tools if _is_deferred(t, self.searchable_tools)]
        if not deferred:
            return request
        provider = provider_of(request.model, request.runtime)
        if provider not in _SEARCH_TOOLS:
            if self.on_unsupported == "send_all":
                return self._send_all(request, deferred)
            raise self._unsupported(request, provider, deferred)
        search_tool = _SEARCH_TOOLS[provider]
        changed: list[Any] = [_deferred(t) if _is_deferred(t, self.searchable_tools) else t for t in tools]
        if not any(isinstance(t, Mapping) and t.get("type") == search_tool["type"] for t in tools):
            changed.append(dict(search_tool))
        emit(
            request.runtime,
            {"event": "tools_deferred", "middleware": self.name, "provider": provider, "deferred": deferred},
        )
        return request.override(tools=changed)

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Defer the chosen tools and add the provider's tool search tool (a flow hook: invoke and ainvoke)."""
        return (yield self.prepare_request(request))


def _deferred(tool: BaseTool) -> BaseTool:
    """A copy of ``tool`` marked ``defer_loading``, its other ``extras`` kept (the agent's own tool object is never
    changed)."""
    if (tool.extras or {}).get("defer_loading") is True:
        return tool
    return tool.model_copy(update={"extras": {**(tool.extras or {}), "defer_loading": True}})


def _undeferred(tool: Any) -> Any:
    if isinstance(tool, BaseTool) and (tool.extras or {}).get("defer_loading") is True:
        extras = {k: v for k, v in (tool.extras or {}).items() if k != "defer_loading"}
        return tool.model_copy(update={"extras": extras or None})
    return tool
