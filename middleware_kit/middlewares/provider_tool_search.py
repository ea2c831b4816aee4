"""``ProviderToolSearchMiddleware``: defer tools behind the provider's server-side tool search.

Instead of sending every tool schema on every call, the chosen tools are marked deferred (``extras["defer_loading"]
= True`` on a copy of the tool; the provider integrations send it as ``defer_loading``) and the provider's own tool
search tool is added. The provider loads a deferred tool's full schema only when the model searches for it, which
keeps requests small when many tools are bound. The agent still executes the tools: only what the model is sent
changes.

A tool is deferred when it is named (or given) in ``searchable_tools``, or already carries
``extras["defer_loading"] = True``. Supported providers (inferred from the request's model, as LangChain 1.5):

| provider | detected by | search tool added |
|---|---|---|
| Anthropic | ``ls_provider == "anthropic"`` / ``_llm_type`` containing ``anthropic`` | :data:`ANTHROPIC_TOOL_SEARCH` |
| OpenAI | ``ls_provider == "openai"`` / ``_llm_type`` containing ``openai`` | :data:`OPENAI_TOOL_SEARCH` |

When nothing is deferred the request passes through unchanged, whatever the provider. When something is deferred
and the provider is not supported, the model call raises :class:`ToolSearchUnsupportedError` (a ``ValueError``, as
LangChain) naming the model and the tools; beyond LangChain, ``on_unsupported="send_all"`` sends the tools normally
instead (with a ``tool_search_unsupported`` event), which keeps a ``ModelFallbackMiddleware`` to another provider
working. Each deferring call writes ``{"event": "tools_deferred", "middleware", "provider", "deferred",
"missing"}`` (``missing``: ``searchable_tools`` names the request does not have, usually a typo).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._model_arg import tool_names
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import ModelRequest

__all__ = [
    "ANTHROPIC_TOOL_SEARCH",
    "OPENAI_TOOL_SEARCH",
    "ProviderToolSearchMiddleware",
    "ToolIdentifier",
    "ToolSearchUnsupportedError",
]

ToolIdentifier: TypeAlias = "str | BaseTool"
"""A tool, or its name."""

ANTHROPIC_TOOL_SEARCH: dict[str, str] = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
"""Anthropic's server-side tool search tool (regex variant)."""
OPENAI_TOOL_SEARCH: dict[str, str] = {"type": "tool_search"}
"""OpenAI's server-side tool search tool (Responses API)."""

_SEARCH_TOOLS: dict[str, dict[str, str]] = {"anthropic": ANTHROPIC_TOOL_SEARCH, "openai": OPENAI_TOOL_SEARCH}
_NAME = "ProviderToolSearchMiddleware"


class ToolSearchUnsupportedError(MiddlewareConfigError):
    """Tools are deferred but the request's model has no server-side tool search we know of."""


def provider_of(model: BaseChatModel) -> str | None:
    """``"anthropic"``, ``"openai"`` or None: the tool-search provider of ``model``."""
    names: list[str] = []
    try:
        params = model._get_ls_params()
        names.append(str(params.get("ls_provider") or ""))
    except Exception:  # a model whose tracing params fail is identified by its type name
        pass
    names.append(str(getattr(model, "_llm_type", "") or ""))
    for name in names:
        lowered = name.lower()
        for provider in _SEARCH_TOOLS:
            if lowered == provider or lowered.startswith(f"{provider}-") or lowered.startswith(f"{provider}_"):
                return provider
    return None


def _is_deferred(tool: BaseTool) -> bool:
    return bool((tool.extras or {}).get("defer_loading") is True)


class ProviderToolSearchMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware):
    """Defer selected tools behind provider-native tool search (Anthropic, OpenAI).

    Args:
        searchable_tools: Tools (or names) to defer. ``None``: only tools already carrying
            ``extras["defer_loading"] = True``.
        on_unsupported: ``"error"`` (default): a deferring call on a model without tool search raises
            :class:`ToolSearchUnsupportedError`. ``"send_all"``: send every tool normally to such a model.
    """

    def __init__(
        self,
        *,
        searchable_tools: Sequence[ToolIdentifier] | None = None,
        on_unsupported: Literal["error", "send_all"] = "error",
    ) -> None:
        if searchable_tools is not None and (
            isinstance(searchable_tools, (str, BaseTool)) or not isinstance(searchable_tools, Sequence)
        ):
            raise MiddlewareConfigError(
                f"{_NAME}: searchable_tools must be a list of tools or tool names; got {searchable_tools!r:.60}.",
                middleware=_NAME,
                hook="searchable_tools",
            )
        names = tool_names(searchable_tools or (), middleware=_NAME, parameter="searchable_tools")
        self.searchable_tools: tuple[str, ...] = names
        """Names of the tools deferred behind tool search."""
        if on_unsupported not in ("error", "send_all"):
            raise MiddlewareConfigError(
                f"{_NAME}: on_unsupported must be 'error' or 'send_all'; got {on_unsupported!r}.",
                middleware=_NAME,
                hook="on_unsupported",
            )
        self.on_unsupported: Literal["error", "send_all"] = on_unsupported

    def _deferred_request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        wanted = set(self.searchable_tools)
        tools = list(request.tools)
        deferred = [t.name for t in tools if isinstance(t, BaseTool) and (t.name in wanted or _is_deferred(t))]
        if not deferred:
            return request
        provider = provider_of(request.model)
        if provider is None:
            if self.on_unsupported == "send_all":
                emit(
                    request.runtime,
                    {
                        "event": "tool_search_unsupported",
                        "middleware": self.name,
                        "model": type(request.model).__name__,
                        "deferred": deferred,
                    },
                )
                return request.override(tools=[_undeferred(t) for t in tools])
            raise ToolSearchUnsupportedError(
                f"{self.name}: tools {deferred} are deferred behind provider tool search, but the model "
                f"{type(request.model).__name__} has no server-side tool search (supported: Anthropic, OpenAI). "
                f"Fix: use a supported model, stop deferring these tools, or pass on_unsupported='send_all' to send "
                f"them normally to such models.",
                middleware=self.name,
                hook="wrap_model_call",
            )
        present = {t.name for t in tools if isinstance(t, BaseTool)}
        search_tool = _SEARCH_TOOLS[provider]
        changed: list[Any] = [_deferred(t) if isinstance(t, BaseTool) and t.name in deferred else t for t in tools]
        if not any(isinstance(t, dict) and t.get("type") == search_tool["type"] for t in tools):
            changed.append(dict(search_tool))
        emit(
            request.runtime,
            {
                "event": "tools_deferred",
                "middleware": self.name,
                "provider": provider,
                "deferred": deferred,
                "missing": [n for n in self.searchable_tools if n not in present],
            },
        )
        return request.override(tools=changed)

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Defer the chosen tools and add the provider's tool search tool (a flow hook: invoke and ainvoke)."""
        return (yield self._deferred_request(request))


def _deferred(tool: BaseTool) -> BaseTool:
    """A copy of ``tool`` marked ``defer_loading`` (the agent's own tool object is never changed)."""
    if _is_deferred(tool):
        return tool
    return tool.model_copy(update={"extras": {**(tool.extras or {}), "defer_loading": True}})


def _undeferred(tool: Any) -> Any:
    if isinstance(tool, BaseTool) and _is_deferred(tool):
        extras = {k: v for k, v in (tool.extras or {}).items() if k != "defer_loading"}
        return tool.model_copy(update={"extras": extras or None})
    return tool
