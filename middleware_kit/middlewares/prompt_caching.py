"""``PromptCachingMiddleware``: cache breakpoints for models that take them, and a watch on the cached prefix.

Provider prompt caches match the request **prefix** byte for byte: one changed byte early in the prompt (a timestamp
in the system prompt, a reordered tool, a rewritten old message) and every later token is billed again, silently.
This middleware does two things:

1. **Breakpoints.** For models that take Anthropic-style ``cache_control`` markers -- ``ChatAnthropic``,
   ``ChatAnthropicVertex``, and Claude models on ``ChatBedrock`` -- it marks the end of the system prompt (which, in
   Anthropic's prefix order, covers the tools too) and the newest message. ``ChatBedrockConverse`` with a Claude or
   Nova model gets Bedrock's ``cachePoint`` blocks instead. Models are recognised by class name and model id, so no
   provider package is imported. Other models are left untouched (``unsupported_model_behavior``).
2. **Prefix stability.** For every model (OpenAI and others cache prefixes automatically), it keeps a fingerprint
   of the prompt each call sent (hashes of the system prompt, the tools and each message) in private state, and
   when a later call of the thread changes what an earlier call sent, it emits a ``prompt_cache_prefix_changed``
   event on the custom stream saying what changed (system prompt, tools or the first differing message index) and
   where: ``"state"`` (the thread's history was rewritten, e.g. by summarization) or ``"request"`` (a middleware
   rewrote the request for this call only). Naming the exact middleware would need a view between the layers of
   the onion, which a middleware does not have; list this middleware last (innermost) so that what it checks is
   what the model receives.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.types import Command
from typing_extensions import TypedDict

from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import INT_AT_LEAST_0, Config, one_of
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import AgentState, ExtendedModelResponse, ModelRequest, ModelResponse, PrivateStateAttr

__all__ = [
    "AnthropicPromptCachingMiddleware",
    "PromptCacheFingerprint",
    "PromptCachingMiddleware",
    "PromptCachingState",
    "cache_style",
]

CacheStyle = Literal["cache_control", "cache_point"]
UnsupportedBehavior = Literal["ignore", "warn", "raise"]

_ANTHROPIC_CLASSES = frozenset({"ChatAnthropic", "ChatAnthropicVertex", "ChatAnthropicMessages"})
_BEDROCK_INVOKE_CLASSES = frozenset({"ChatBedrock", "BedrockChat"})
_BEDROCK_CONVERSE_CLASSES = frozenset({"ChatBedrockConverse"})
_MARKABLE = frozenset({"text", "image", "image_url", "document", "file", "tool_result", "search_result"})
"""Content block types a breakpoint may follow (Anthropic rejects ``cache_control`` on thinking and server-tool
blocks)."""


def _is_cache_point(block: Any) -> bool:
    return isinstance(block, Mapping) and "cachePoint" in block and len(block) == 1


class PromptCacheFingerprint(TypedDict):
    """What the previous model call of the thread sent, as hashes (16 hex digits each)."""

    system: str
    tools: str
    messages: list[str]


class PromptCachingState(AgentState[Any]):
    """State of :class:`PromptCachingMiddleware`."""

    prompt_cache_fingerprint: NotRequired[Annotated[PromptCacheFingerprint | None, PrivateStateAttr]]


def _unwrap(model: Any) -> Any:
    seen = 0
    while hasattr(model, "bound") and seen < 8:  # RunnableBinding from bind_tools / with_config
        model = model.bound
        seen += 1
    return model


def _model_id(model: Any) -> str:
    for attribute in ("model_id", "model", "model_name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value.lower()
    return ""


def cache_style(model: Any) -> CacheStyle | None:
    """How ``model`` takes cache breakpoints: ``"cache_control"`` (Anthropic-style content-block markers),
    ``"cache_point"`` (Bedrock Converse ``cachePoint`` blocks) or None (not supported). Decided by class name and
    model id only; no provider package is imported."""
    model = _unwrap(model)
    name = type(model).__name__
    model_id = _model_id(model)
    if name in _ANTHROPIC_CLASSES:
        return "cache_control"
    if name in _BEDROCK_INVOKE_CLASSES and ("anthropic" in model_id or "claude" in model_id):
        return "cache_control"
    if name in _BEDROCK_CONVERSE_CLASSES and any(k in model_id for k in ("anthropic", "claude", "nova")):
        return "cache_point"
    return None


def _digest(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def _strip_markers(content: Any) -> Any:
    """Content without cache markers (they are not part of the cached bytes and move every call)."""
    if not isinstance(content, list):
        return content
    out = []
    for block in content:
        if _is_cache_point(block):
            continue
        if isinstance(block, Mapping):
            block = {k: v for k, v in block.items() if k != "cache_control"}
        out.append(block)
    return out


def _message_digest(message: BaseMessage) -> str:
    payload: dict[str, Any] = {"type": message.type, "content": _strip_markers(message.content)}
    if isinstance(message, AIMessage) and message.tool_calls:
        payload["tool_calls"] = [[c["name"], c["args"], c.get("id")] for c in message.tool_calls]
    tool_call_id = getattr(message, "tool_call_id", None)
    if tool_call_id is not None:
        payload["tool_call_id"] = tool_call_id
    return _digest(payload)


def _tool_digest(tools: Sequence[Any]) -> str:
    described: list[Any] = []
    for tool in tools:
        try:
            described.append(convert_to_openai_tool(tool))
        except Exception:  # pragma: no cover - a tool no converter understands: its repr still detects changes
            described.append(repr(tool))
    return _digest(described)


class PromptCachingMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware[PromptCachingState, Any]):
    """Place cache breakpoints for models that support them, and report when the cached prefix changes.

    Args:
        type: The cache type in ``cache_control`` markers; only ``"ephemeral"``.
        ttl: ``"5m"`` (default) or ``"1h"``.
        min_messages_to_cache: Add breakpoints only when the request has at least this many messages (the system
            message counts). Default 0.
        unsupported_model_behavior: For models without breakpoints: ``"ignore"`` (default here), ``"warn"`` or
            ``"raise"`` (``MiddlewareConfigError``, a ``ValueError``).
        check_prefix_stability: Keep a fingerprint per thread and emit ``prompt_cache_prefix_changed`` events.
    """

    state_schema = PromptCachingState
    _default_unsupported: UnsupportedBehavior = "ignore"
    __config__ = Config(
        type=one_of("ephemeral").saying("'ephemeral' (the only cache type)"),
        ttl=one_of("5m", "1h"),
        min_messages_to_cache=INT_AT_LEAST_0,
        unsupported_model_behavior=one_of("ignore", "warn", "raise").or_none("'ignore', 'warn' or 'raise'"),
    )

    def __init__(
        self,
        type: Literal["ephemeral"] = "ephemeral",
        ttl: Literal["5m", "1h"] = "5m",
        min_messages_to_cache: int = 0,
        unsupported_model_behavior: UnsupportedBehavior | None = None,
        *,
        check_prefix_stability: bool = True,
    ) -> None:
        behavior = self._default_unsupported if unsupported_model_behavior is None else unsupported_model_behavior
        self.type = type
        self.ttl = ttl
        self.min_messages_to_cache = min_messages_to_cache
        self.unsupported_model_behavior: UnsupportedBehavior = behavior
        self.check_prefix_stability = bool(check_prefix_stability)

    # -- the hook: one flow body serves invoke and ainvoke -------------------------------------------------------
    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        prepared, fingerprint = self._prepare(request)
        response = yield prepared
        return self._finish(response, fingerprint)

    def _finish(
        self, response: ModelResponse[Any], fingerprint: PromptCacheFingerprint | None
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        if fingerprint is None:
            return response
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"prompt_cache_fingerprint": fingerprint})
        )

    def _prepare(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], PromptCacheFingerprint | None]:
        fingerprint = self._check(request) if self.check_prefix_stability else None
        style = cache_style(request.model)
        if style is None:
            self._unsupported(request.model)
            return request, fingerprint
        count = len(request.messages) + (1 if request.system_message is not None else 0)
        if count < self.min_messages_to_cache or count == 0:
            return request, fingerprint
        changes: dict[str, Any] = {}
        if request.system_message is not None:
            marked = self._mark(request.system_message, style)
            if marked is not None:
                changes["system_message"] = marked
        messages: list[BaseMessage] = list(request.messages)
        for index in range(len(messages) - 1, -1, -1):
            marked_message = self._mark(messages[index], style)
            if marked_message is not None:
                messages[index] = marked_message
                changes["messages"] = messages
                break
        return (request.override(**changes) if changes else request), fingerprint

    def _unsupported(self, model: Any) -> None:
        if self.unsupported_model_behavior == "ignore":
            return
        message = (
            f"{self.name} places cache breakpoints only for Anthropic models (ChatAnthropic, ChatAnthropicVertex, "
            f"Claude on ChatBedrock/ChatBedrockConverse), not {type(_unwrap(model)).__name__}; the request is sent "
            f"unchanged. Pass unsupported_model_behavior='ignore' to silence this."
        )
        if self.unsupported_model_behavior == "raise":
            raise MiddlewareConfigError(message, middleware=self.name, hook="unsupported_model_behavior")
        warnings.warn(message, stacklevel=3)

    def _marker(self) -> dict[str, Any]:
        marker: dict[str, Any] = {"type": self.type}
        if self.ttl != "5m":
            marker["ttl"] = self.ttl
        return marker

    def _mark(self, message: BaseMessage, style: CacheStyle) -> BaseMessage | None:
        """``message`` with a breakpoint after its last markable content block, or None when it has none.

        Only block types that accept ``cache_control`` are marked (text, images, documents, tool results): thinking
        blocks and server-tool blocks (code execution, web search) reject it, and empty text is invalid."""
        content = message.content
        blocks: list[Any]
        if isinstance(content, str):
            if not content:
                return None
            blocks = [{"type": "text", "text": content}]
        else:
            blocks = [dict(b) if isinstance(b, Mapping) else b for b in content if not _is_cache_point(b)]
        for index in range(len(blocks) - 1, -1, -1):
            block = blocks[index]
            if not isinstance(block, dict) or block.get("type") not in _MARKABLE:
                continue
            if block.get("type") == "text" and not block.get("text"):
                continue
            if style == "cache_point":
                blocks.insert(index + 1, {"cachePoint": {"type": "default"}})
            else:
                blocks[index] = {**block, "cache_control": self._marker()}
            return message.model_copy(update={"content": blocks})
        return None

    # -- prefix stability ---------------------------------------------------------------------------------------
    def _check(self, request: ModelRequest[Any]) -> PromptCacheFingerprint:
        system = request.system_message
        current = PromptCacheFingerprint(
            system=_digest(_strip_markers(system.content)) if isinstance(system, SystemMessage) else "",
            tools=_tool_digest(request.tools),
            messages=[_message_digest(m) for m in request.messages],
        )
        state = request.state if isinstance(request.state, Mapping) else {}
        previous: PromptCacheFingerprint | None = state.get("prompt_cache_fingerprint")
        if previous:
            change = self._difference(previous, current)
            if change is not None:
                component, index = change
                source = self._source(index, current, state.get("messages", ()))
                emit(
                    request.runtime,
                    {
                        "event": "prompt_cache_prefix_changed",
                        "middleware": self.name,
                        "component": component,
                        "message_index": index,
                        "changed_in": source,
                        "cached_messages": len(previous["messages"]),
                        "detail": self._explain(component, index, source),
                    },
                )
        return current

    @staticmethod
    def _source(index: int | None, current: PromptCacheFingerprint, history: Sequence[BaseMessage]) -> str:
        """``"state"`` when the request still mirrors the thread's history at the changed position (so the history
        itself was rewritten), else ``"request"`` (a middleware changed this call's messages only)."""
        if index is None:
            return "request"
        sent = current["messages"]
        if index >= len(sent):
            return "state" if len(history) <= index else "request"
        if index < len(history) and _message_digest(history[index]) == sent[index]:
            return "state"
        return "request"

    @staticmethod
    def _difference(
        previous: PromptCacheFingerprint, current: PromptCacheFingerprint
    ) -> tuple[str, int | None] | None:
        if previous["tools"] != current["tools"]:
            return "tools", None
        if previous["system"] != current["system"]:
            return "system_prompt", None
        old, new = previous["messages"], current["messages"]
        for index, digest in enumerate(old):
            if index >= len(new) or new[index] != digest:
                return "messages", index
        return None

    @staticmethod
    def _explain(component: str, index: int | None, source: str) -> str:
        if component == "tools":
            return "The tools (or their order or descriptions) differ from the previous call: the whole cache is lost."
        if component == "system_prompt":
            return (
                "The system prompt differs from the previous call (a date, a counter, per-call text?): every token "
                "after it is billed again. Keep per-call text out of the system prompt."
            )
        where = (
            "the thread's history was rewritten (summarization, context editing, RemoveMessage)"
            if source == "state"
            else "a middleware changed the messages of this request only"
        )
        return f"Message {index} differs from what the previous call sent: {where}."


class AnthropicPromptCachingMiddleware(PromptCachingMiddleware):
    """LangChain's ``langchain_anthropic.middleware.AnthropicPromptCachingMiddleware`` constructor:
    :class:`PromptCachingMiddleware` with ``unsupported_model_behavior="warn"`` by default."""

    _default_unsupported: UnsupportedBehavior = "warn"

    def __init__(
        self,
        type: Literal["ephemeral"] = "ephemeral",
        ttl: Literal["5m", "1h"] = "5m",
        min_messages_to_cache: int = 0,
        unsupported_model_behavior: UnsupportedBehavior = "warn",
        *,
        check_prefix_stability: bool = True,
    ) -> None:
        super().__init__(
            type, ttl, min_messages_to_cache, unsupported_model_behavior, check_prefix_stability=check_prefix_stability
        )
