"""``ContextEditingMiddleware`` and ``ClearToolUsesEdit``: clear old tool results from what the model is sent.

When the conversation grows past a token threshold, the results of older tool calls (and optionally their
arguments) are replaced by a placeholder **in the request of this model call only**: the stored history is never
changed, so a checkpointed thread keeps every original message, and the next call decides afresh. A cleared
``ToolMessage`` keeps its ``tool_call_id`` (and the ``AIMessage`` keeps its calls), so tool-call pairing holds.

The edit runs as a ``modify_model_request``: once per model call, not again when a wrapper retries. LangChain's
``wrap_model_call(request, handler)`` / ``awrap_model_call`` edit too, for a direct call (as LangChain's own tests
make it); an agent does not run them (no wrap layer): the edit is its ``modify_model_request``.

Tests may patch :data:`count_tokens_approximately` in this module (it is looked up at call time).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.flow import adrive, drive
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import CALLABLE, INT_AT_LEAST_0, Config, one_of
from middleware_kit.middlewares._direct import direct_call_only
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.types import ModelRequest, ModelResponse

__all__ = [
    "DEFAULT_TOOL_PLACEHOLDER",
    "ClearToolUsesEdit",
    "ContextEdit",
    "ContextEditingMiddleware",
    "TokenCounter",
    "count_tokens_approximately",
]

DEFAULT_TOOL_PLACEHOLDER = "[cleared]"

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Counts the tokens of a list of messages."""


class ContextEdit(Protocol):
    """One edit strategy: rewrite ``messages`` (a private copy of this call's messages) in place.

    Replace entries (``messages[i] = msg.model_copy(update=...)``); never mutate a message object: the originals
    belong to the graph state.
    """

    def apply(self, messages: list[AnyMessage], *, count_tokens: TokenCounter) -> None: ...


@dataclass(frozen=True, slots=True)
class ClearToolUsesEdit:
    """Clear the results of older tool calls once the conversation exceeds ``trigger`` tokens.

    Args:
        trigger: Token count (of the messages sent, system message included with ``"model"`` counting) above
            which the edit runs.
        clear_at_least: Stop clearing once at least this many tokens were saved (0: clear every candidate).
        keep: The most recent tool results that are never cleared.
        clear_tool_inputs: Also replace the arguments of the cleared calls with ``{}`` on the ``AIMessage``.
        exclude_tools: Names of tools whose results are never cleared.
        placeholder: The content of a cleared ``ToolMessage``.
    """

    trigger: int = 100_000
    clear_at_least: int = 0
    keep: int = 3
    clear_tool_inputs: bool = False
    exclude_tools: Sequence[str] = ()
    placeholder: str = DEFAULT_TOOL_PLACEHOLDER

    def __post_init__(self) -> None:
        for field_name in ("trigger", "clear_at_least", "keep"):
            value = getattr(self, field_name)
            if not INT_AT_LEAST_0.accepts(value):
                raise MiddlewareConfigError(
                    f"ClearToolUsesEdit({field_name}={value!r}): expected {INT_AT_LEAST_0.expected}.",
                    middleware="ContextEditingMiddleware",
                    hook="edits",
                )
        if isinstance(self.exclude_tools, str):
            raise MiddlewareConfigError(
                f"ClearToolUsesEdit(exclude_tools={self.exclude_tools!r}): pass a list of tool names, e.g. "
                f"exclude_tools=[{self.exclude_tools!r}].",
                middleware="ContextEditingMiddleware",
                hook="edits",
            )
        # A value type: the caller's list is copied, so changing it later changes nothing here.
        object.__setattr__(self, "exclude_tools", tuple(self.exclude_tools))

    def apply(self, messages: list[AnyMessage], *, count_tokens: TokenCounter) -> None:
        """Clear in ``messages`` (this call's private copy): replace entries, never mutate message objects."""
        tokens = count_tokens(messages)
        if tokens <= self.trigger:
            return
        results = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
        candidates = results[: len(results) - self.keep] if self.keep < len(results) else []
        if not candidates:
            return
        # Where each call was made: tool_call_id -> (index of its AIMessage, name). One pass.
        calls: dict[str, tuple[int, str]] = {}
        for i, message in enumerate(messages):
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    call_id = call.get("id")
                    if call_id:
                        calls[call_id] = (i, call["name"])
        excluded = set(self.exclude_tools)
        for i in candidates:
            result = messages[i]
            assert isinstance(result, ToolMessage)
            if result.response_metadata.get("context_editing", {}).get("cleared"):
                continue
            origin = calls.get(result.tool_call_id)
            if origin is None:
                continue
            ai_index, name = origin
            if (result.name or name) in excluded:
                continue
            messages[i] = result.model_copy(
                update={
                    "content": self.placeholder,
                    "artifact": None,
                    "response_metadata": {
                        **result.response_metadata,
                        "context_editing": {"cleared": True, "strategy": "clear_tool_uses"},
                    },
                }
            )
            if self.clear_tool_inputs:
                messages[ai_index] = _without_inputs(messages[ai_index], result.tool_call_id)
            if self.clear_at_least > 0 and tokens - count_tokens(messages) >= self.clear_at_least:
                break


def _without_inputs(message: AnyMessage, tool_call_id: str) -> AnyMessage:
    assert isinstance(message, AIMessage)
    calls = [{**call, "args": {}} if call.get("id") == tool_call_id else call for call in message.tool_calls]
    metadata = dict(message.response_metadata)
    entry = dict(metadata.get("context_editing", {}))
    entry["cleared_tool_inputs"] = sorted({*entry.get("cleared_tool_inputs", ()), tool_call_id})
    metadata["context_editing"] = entry
    return message.model_copy(update={"tool_calls": calls, "response_metadata": metadata})


class ContextEditingMiddleware(FrozenConfig, AgentMiddleware):
    """Apply context edits (default: one :class:`ClearToolUsesEdit`) to the messages of each model call.

    Args:
        edits: The edits, applied in order to this call's copy of the messages.
        token_count_method: ``"approximate"`` (langchain-core's ``count_tokens_approximately``, fast) or ``"model"``
            (``model.get_num_tokens_from_messages``, with the system message and tools; falls back to the
            approximation for models that cannot count).
        token_counter: Your own ``(messages) -> int``; overrides ``token_count_method``.
    """

    __config__ = Config(
        owner=lambda _: "ContextEditingMiddleware",
        template="{owner}({param}={value!r}): {expected}.",
        token_count_method=one_of("approximate", "model").saying("use 'approximate' or 'model'"),
        token_counter=CALLABLE.or_none("pass a function (messages) -> int"),
    )

    def __init__(
        self,
        *,
        edits: Sequence[ContextEdit] | None = None,
        token_count_method: Literal["approximate", "model"] = "approximate",
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.edits: tuple[ContextEdit, ...] = tuple(edits) if edits is not None else (ClearToolUsesEdit(),)
        for edit in self.edits:
            if not callable(getattr(edit, "apply", None)):
                raise MiddlewareConfigError(
                    f"ContextEditingMiddleware(edits=[...]) holds {edit!r}, which has no apply(messages, *, "
                    f"count_tokens) method. Use ClearToolUsesEdit(...) or your own ContextEdit.",
                    middleware="ContextEditingMiddleware",
                    hook="edits",
                )
        self.token_count_method = token_count_method
        self.token_counter = token_counter

    def _counter(self, request: ModelRequest[Any]) -> TokenCounter:
        if self.token_counter is not None:
            return self.token_counter
        if self.token_count_method == "approximate":
            return lambda messages: count_tokens_approximately(messages)
        head = [request.system_message] if request.system_message is not None else []
        model = request.model
        tools = list(request.tools) or None

        def by_model(messages: Sequence[BaseMessage]) -> int:
            try:
                return int(model.get_num_tokens_from_messages([*head, *messages], tools))
            except (NotImplementedError, ImportError, AttributeError):  # the model cannot count: approximate
                return count_tokens_approximately([*head, *messages])

        return by_model

    def _edit(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        if not request.messages:
            return request
        messages = list(request.messages)  # a private copy of the list; the message objects are never mutated
        count = self._counter(request)
        for edit in self.edits:
            edit.apply(messages, count_tokens=count)
        if all(a is b for a, b in zip(messages, request.messages, strict=False)) and len(messages) == len(
            request.messages
        ):
            return request
        return request.override(messages=messages)

    def modify_model_request(self, request: ModelRequest[Any], state: Any) -> ModelRequest[Any]:
        return self._edit(request)

    async def amodify_model_request(self, request: ModelRequest[Any], state: Any) -> ModelRequest[Any]:
        return self._edit(request)

    def _edited_call(self, request: ModelRequest[Any]) -> Generator[ModelRequest[Any], Any, Any]:
        return (yield self._edit(request))

    @direct_call_only
    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> ModelResponse[Any] | AIMessage:
        """LangChain's hook, for a direct call: ``handler`` gets the edited request. An agent does not run it (see
        :class:`~._direct.direct_call_only`): there :meth:`modify_model_request` edits, once per model call."""
        return cast("ModelResponse[Any] | AIMessage", drive(self._edited_call(request), handler, ModelRequest))

    @direct_call_only
    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> ModelResponse[Any] | AIMessage:
        """Async twin of :meth:`wrap_model_call` (the same one-step flow, awaited)."""
        return cast("ModelResponse[Any] | AIMessage", await adrive(self._edited_call(request), handler, ModelRequest))
