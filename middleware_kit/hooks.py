"""The hook contract: every hook, when it runs, in which order, what it may return, where it may jump.

This module is the single source of truth the engine, the decorators, the plan and the docs read. The base class
(:mod:`middleware_kit.middleware`) only supplies defaults; the engine (:mod:`middleware_kit._engine.pipeline`) compiles
the
hooks a middleware defines into node steps and wrap layers according to the specs below.

The one ordering rule: **the first middleware in the list is the outermost layer of the onion.**
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, Protocol, get_args

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit.types import ExtendedModelResponse, JumpTo, ModelRequest, ModelResponse, ToolCallRequest

__all__ = [
    "GUARDS",
    "GUARD_MESSAGES",
    "GUARD_RESUME",
    "HOOKS",
    "NODE_PHASES",
    "AfterToolHook",
    "AsyncAfterToolHook",
    "AsyncBeforeToolHook",
    "AsyncModelRequestHook",
    "AsyncNodeHook",
    "AsyncWrapModelCallHook",
    "AsyncWrapToolCallHook",
    "BeforeToolHook",
    "HookKind",
    "HookMode",
    "HookSpec",
    "JUMP_TARGETS",
    "jump_target",
    "MessageGuard",
    "ModelRequestHook",
    "NodeHook",
    "ResumeGuard",
    "WrapModelCallHook",
    "WrapToolCallHook",
]

HookKind = Literal[
    "node", "model_request", "wrap_model", "wrap_tool", "before_tool", "after_tool", "guard", "resume_guard"
]

JUMP_TARGETS: tuple[str, ...] = get_args(JumpTo)
"""Every place a node hook may jump to (:data:`~middleware_kit.types.JumpTo`; each :class:`HookSpec` says which of
them it may use)."""


def jump_target(name: Any) -> Any:
    """A jump target as the engine names it: LangGraph's ``END`` (``"__end__"``), which LangChain write-ups use, is
    an alias of ``"end"``; anything else is returned as is (and validated by the caller)."""
    return "end" if name == "__end__" else name

FLOW_KINDS: frozenset[HookKind] = frozenset({"wrap_model", "wrap_tool"})
"""The kinds of hook that may be written as a flow (a generator: see :mod:`middleware_kit.flow`)."""


class HookMode(StrEnum):
    """How a middleware wrote a hook, which decides how the engine runs it (the plan's "defines" column).

    Decided once, by :meth:`of`, when the agent is built.
    """

    SYNC = "sync"
    """Only the sync method: run directly under ``invoke``, in a worker thread under ``ainvoke``."""
    ASYNC = "async"
    """Only the ``a``-prefixed twin: awaited under ``ainvoke``, driven to completion on a loop under ``invoke``."""
    BOTH = "sync+async"
    """Both twins: each mode runs its own, directly."""
    FLOW = "flow"
    """A generator (wrap hooks only): one body, run by a sync driver or an async driver, directly in both modes."""

    @classmethod
    def of(cls, sync_fn: object, async_fn: object, kind: HookKind) -> HookMode:
        if sync_fn is not None and kind in FLOW_KINDS and inspect.isgeneratorfunction(sync_fn):
            return cls.FLOW
        if sync_fn is not None and async_fn is not None:
            return cls.BOTH
        return cls.SYNC if sync_fn is not None else cls.ASYNC

    @property
    def under_invoke(self) -> str:
        """``direct``, or ``loop`` (an async twin driven to completion)."""
        return "loop" if self is HookMode.ASYNC else "direct"

    @property
    def under_ainvoke(self) -> str:
        """``direct``, or ``thread`` (a sync hook run off the event loop)."""
        return "thread" if self is HookMode.SYNC else "direct"


@dataclass(frozen=True, slots=True)
class HookSpec:
    """The contract of one hook."""

    name: str
    """The sync method name; the async twin is ``"a" + name``."""
    kind: HookKind
    """How the engine compiles it: a graph-node step, or a layer of the model or tool chain."""
    order: Literal["forward", "reverse"]
    """``forward``: A, B, C for ``middleware=[A, B, C]`` (outermost first); ``reverse``: C, B, A (on the way out)."""
    jump_targets: frozenset[str]
    """Where a hook of this kind may declare ``can_jump_to`` (empty: it cannot jump)."""
    returns: str
    """What it may return, for error messages and the docs."""
    doc: str
    """When it runs and what it may change."""

    @property
    def async_name(self) -> str:
        return "a" + self.name


_NODE_RETURNS = "None or a dict of state updates (with 'jump_to' if declared)"
HOOKS: Mapping[str, HookSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            HookSpec(
                "before_agent",
                "node",
                "forward",
                frozenset(JUMP_TARGETS),
                _NODE_RETURNS,
                "Once per invocation, before anything else (not again when an interrupted run resumes).",
            ),
            HookSpec(
                "before_model",
                "node",
                "forward",
                frozenset({"tools", "end"}),
                _NODE_RETURNS,
                "Before every model call. Jumping to 'model' from here is refused: it would loop forever.",
            ),
            HookSpec(
                "modify_model_request",
                "model_request",
                "forward",
                frozenset(),
                "a ModelRequest",
                "After before_model, outside every wrapper, once per model call; each receives the previous one's "
                "request. Changes this call only, never state.",
            ),
            HookSpec(
                "wrap_model_call",
                "wrap_model",
                "forward",
                frozenset(),
                "a ModelResponse, an AIMessage or an ExtendedModelResponse",
                "Around the model call: A(B(C(model))). May change the request and the response, call handler "
                "0..n times (retry, fallback, cache).",
            ),
            HookSpec(
                "after_model",
                "node",
                "reverse",
                frozenset(JUMP_TARGETS),
                _NODE_RETURNS,
                "After every model call, before tools, in reverse order (C, B, A).",
            ),
            HookSpec(
                "before_tool",
                "before_tool",
                "forward",
                frozenset(),
                "None, a ToolCallRequest (replaces the call) or a ToolMessage (skips the tool)",
                "Once per tool call, outside the tool wrappers (a retrying wrapper does not re-run it).",
            ),
            HookSpec(
                "wrap_tool_call",
                "wrap_tool",
                "forward",
                frozenset(),
                "a ToolMessage or a Command",
                "Around each tool call: A(B(C(tool))). May change the call and the result, call handler 0..n times.",
            ),
            HookSpec(
                "after_tool",
                "after_tool",
                "reverse",
                frozenset(),
                "None, or a ToolMessage/Command replacing the result",
                "Once per tool call, outside the tool wrappers, in reverse order. It receives the request as this "
                "middleware passed it on (after its own before_tool), like any onion layer.",
            ),
            HookSpec(
                "after_agent",
                "node",
                "reverse",
                frozenset({"end"}),
                "None or a dict of state updates",
                "Once, at the end of the invocation (also after jump_to='end'), in reverse order.",
            ),
        )
    }
)
"""Every hook in the order a run meets it."""

GUARD_MESSAGES = HookSpec(
    "guard_messages",
    "guard",
    "forward",
    frozenset(),
    "None (unchanged) or the guarded list of messages",
    "Every list of messages before LangGraph commits it: the graph input's messages (runtime is None there: it runs "
    "in the messages reducer) and every node's messages write (model output, hook updates, tool results). Guards run "
    "in list order (first listed first), sync in both modes; they must be idempotent and must not mutate the "
    "messages they receive. Not a step of the run: only middlewares that override it are guards.",
)
"""Not in :data:`HOOKS` (it is not a step of the run): the contract of ``guard_messages``."""

GUARD_RESUME = HookSpec(
    "guard_resume",
    "resume_guard",
    "forward",
    frozenset(),
    "None (unchanged) or the guarded resume value",
    "A resume value (Command(resume=...): what a reviewer sends back, typed text included) before LangGraph stores it "
    "as a pending write, which it does before any hook runs (runtime is None). Resume guards run in list order, sync "
    "in both modes; they must be idempotent and must not mutate the value they receive; an exception refuses the "
    "resume (nothing is stored). Not a step of the run: only middlewares that override it are resume guards.",
)
"""Not in :data:`HOOKS` (it is not a step of the run): the contract of ``guard_resume``."""

GUARDS: Mapping[str, HookSpec] = MappingProxyType({spec.name: spec for spec in (GUARD_MESSAGES, GUARD_RESUME)})
"""The guards: hooks that are not steps of the run but rewrite what LangGraph is about to store."""

NODE_PHASES: tuple[str, ...] = ("before_agent", "before_model", "after_model", "after_agent")
"""The hooks that run as graph nodes (fused per phase)."""


class MessageGuard(Protocol):
    """``guard_messages(messages, runtime) -> Sequence[AnyMessage] | None``: see :data:`GUARD_MESSAGES`."""

    def __call__(
        self, messages: Sequence[AnyMessage], runtime: Runtime[Any] | None, /
    ) -> Sequence[AnyMessage] | None: ...


class ResumeGuard(Protocol):
    """``guard_resume(value, runtime) -> Any | None``: see :data:`GUARD_RESUME`."""

    def __call__(self, value: Any, runtime: Runtime[Any] | None, /) -> Any: ...


class NodeHook(Protocol):
    """``before_agent``/``before_model``/``after_model``/``after_agent``: ``(state, runtime) -> dict | None``."""

    def __call__(self, state: Any, runtime: Runtime[Any], /) -> dict[str, Any] | None: ...


class AsyncNodeHook(Protocol):
    def __call__(self, state: Any, runtime: Runtime[Any], /) -> Awaitable[dict[str, Any] | None]: ...


class ModelRequestHook(Protocol):
    """``modify_model_request(request, state) -> ModelRequest``: this call's request only."""

    def __call__(self, request: ModelRequest[Any], state: Any, /) -> ModelRequest[Any]: ...


class AsyncModelRequestHook(Protocol):
    def __call__(self, request: ModelRequest[Any], state: Any, /) -> Awaitable[ModelRequest[Any]]: ...


ModelHandler = Callable[[ModelRequest[Any]], ModelResponse[Any]]
AsyncModelHandler = Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
ToolResult = ToolMessage | Command[Any]
ToolHandler = Callable[[ToolCallRequest], ToolResult]
AsyncToolHandler = Callable[[ToolCallRequest], Awaitable[ToolResult]]


class WrapModelCallHook(Protocol):
    """``wrap_model_call(request, handler)``: call ``handler(request)`` 0..n times, return the response."""

    def __call__(
        self, request: ModelRequest[Any], handler: ModelHandler, /
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]: ...


class AsyncWrapModelCallHook(Protocol):
    def __call__(
        self, request: ModelRequest[Any], handler: AsyncModelHandler, /
    ) -> Awaitable[ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]]: ...


class WrapToolCallHook(Protocol):
    """``wrap_tool_call(request, handler)``: call ``handler(request)`` 0..n times, return the result."""

    def __call__(self, request: ToolCallRequest, handler: ToolHandler, /) -> ToolResult: ...


class AsyncWrapToolCallHook(Protocol):
    def __call__(self, request: ToolCallRequest, handler: AsyncToolHandler, /) -> Awaitable[ToolResult]: ...


class BeforeToolHook(Protocol):
    """``before_tool(request)``: None (unchanged), a new ``ToolCallRequest``, or a ``ToolMessage`` to skip the tool."""

    def __call__(self, request: ToolCallRequest, /) -> ToolCallRequest | ToolMessage | None: ...


class AsyncBeforeToolHook(Protocol):
    def __call__(self, request: ToolCallRequest, /) -> Awaitable[ToolCallRequest | ToolMessage | None]: ...


class AfterToolHook(Protocol):
    """``after_tool(request, result)``: None (unchanged) or a replacement ``ToolMessage``/``Command``."""

    def __call__(self, request: ToolCallRequest, result: ToolResult, /) -> ToolResult | None: ...


class AsyncAfterToolHook(Protocol):
    def __call__(self, request: ToolCallRequest, result: ToolResult, /) -> Awaitable[ToolResult | None]: ...
