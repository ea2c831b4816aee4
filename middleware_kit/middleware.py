"""``AgentMiddleware``: the base class. It only supplies defaults, ``name`` and a readable ``repr``.

What each hook means, and in which order hooks run, is the contract in :mod:`middleware_kit.hooks`. A subclass
overrides the hooks it needs, sync, async (``a``-prefixed twin) or both; whichever it defines works under both
``invoke`` and ``ainvoke``. The defaults below do nothing, so hooks may be called directly in unit tests
(``mw.before_model(state, None)``).

Middleware must be stateless: one instance serves many concurrent runs. Keep per-run data in state or context.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime
from typing_extensions import TypeVar

from middleware_kit._compat import StateLike
from middleware_kit.flow import ModelCallFlowHooks, ToolCallFlowHooks, WrapModelCallHook, WrapToolCallHook
from middleware_kit.hooks import (
    HOOKS,
    AsyncModelHandler,
    AsyncToolHandler,
    HookMode,
    ToolResult,
    jump_target,
)
from middleware_kit.trace_policy import TracePolicy
from middleware_kit.types import (
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    ResponseT,
    ToolCallRequest,
)

__all__ = ["AgentMiddleware", "HookImpl", "MiddlewareContextT", "StateT", "defined_hooks"]

StateT = TypeVar("StateT", bound=AgentState[Any], default=AgentState[Any])
"""The state schema a middleware reads (``AgentMiddleware[MyState]``)."""
MiddlewareContextT = TypeVar("MiddlewareContextT", bound=StateLike | None, default=Any)
"""The runtime context type a middleware reads (``AgentMiddleware[MyState, MyContext]``)."""


class AgentMiddleware(Generic[StateT, MiddlewareContextT, ResponseT]):
    """Base class of every middleware. Override the hooks you need; see :mod:`middleware_kit.hooks`.

    Generic as in LangChain 1.5: ``AgentMiddleware[State]``, ``AgentMiddleware[State, Context]`` or
    ``AgentMiddleware[State, Context, Response]`` (the structured response type the middleware works with).
    """

    state_schema: type[Any] = AgentState
    """A TypedDict extending ``AgentState`` with this middleware's own state keys."""
    tools: Sequence[BaseTool] = []
    """Tools this middleware adds to the agent (offered to the model and executed by the tool node). A list, as in
    LangChain; set your own (``tools = [my_tool]``) rather than appending to the shared default."""

    trace_policy: TracePolicy | None = None
    """What this middleware's hook runs (``"{name}.{hook}"``: node hooks and wrap hooks) record in traces, as in
    LangChain: None traces payloads as they are (or the default of
    :func:`middleware_kit.trace_policy.configure_trace_policy`); ``TracePolicy(process_inputs=omit_payload)`` keeps
    the run and its timing but drops the state/request payload (the messages stay on the chat-model run)."""

    transformers: Sequence[Callable[[tuple[str, ...]], Any]] = ()
    """Stream transformer factories (LangGraph's ``StreamTransformer`` classes, or callables ``(scope) ->
    StreamTransformer``) this middleware registers on the compiled agent, as in LangChain 1.5: they build projections
    of ``agent.stream_events(version="v3")``. ``create_agent`` registers LangGraph's ``ToolCallTransformer`` first,
    then every middleware's factories in middleware order, then its own ``transformers=``."""

    _hook_config: ClassVar[dict[str, dict[str, Any]]] = {}
    """Per-hook ``can_jump_to``/``may_interrupt`` set by the decorators (``hook_config`` sets them on functions)."""

    @property
    def name(self) -> str:
        """Unique within an agent; defaults to the class name. Node names in the graph are ``"{name}.{hook}"``."""
        explicit: str | None = self.__dict__.get("_middleware_name")
        return explicit if explicit is not None else type(self).__name__

    @name.setter
    def name(self, value: str) -> None:
        self.__dict__["_middleware_name"] = value

    def __repr__(self) -> str:
        hooks = ", ".join(defined_hooks(self))
        return f"<{type(self).__name__} name={self.name!r} hooks=[{hooks}]>"

    # -- node hooks ------------------------------------------------------------------------------------------
    def before_agent(self, state: StateT, runtime: Runtime[MiddlewareContextT]) -> dict[str, Any] | None:
        """Once per invocation, before anything else."""
        return None

    async def abefore_agent(self, state: StateT, runtime: Runtime[MiddlewareContextT]) -> dict[str, Any] | None:
        """Async twin of :meth:`before_agent`."""
        return None

    def before_model(self, state: StateT, runtime: Runtime[MiddlewareContextT]) -> dict[str, Any] | None:
        """Before every model call (forward order)."""
        return None

    async def abefore_model(self, state: StateT, runtime: Runtime[MiddlewareContextT]) -> dict[str, Any] | None:
        """Async twin of :meth:`before_model`."""
        return None

    def after_model(self, state: StateT, runtime: Runtime[MiddlewareContextT]) -> dict[str, Any] | None:
        """After every model call (reverse order)."""
        return None

    async def aafter_model(self, state: StateT, runtime: Runtime[MiddlewareContextT]) -> dict[str, Any] | None:
        """Async twin of :meth:`after_model`."""
        return None

    def after_agent(self, state: StateT, runtime: Runtime[MiddlewareContextT]) -> dict[str, Any] | None:
        """Once at the end of the invocation (reverse order)."""
        return None

    async def aafter_agent(self, state: StateT, runtime: Runtime[MiddlewareContextT]) -> dict[str, Any] | None:
        """Async twin of :meth:`after_agent`."""
        return None

    # -- model chain -----------------------------------------------------------------------------------------
    def modify_model_request(self, request: ModelRequest[MiddlewareContextT], state: StateT) -> ModelRequest[Any]:
        """Return the request for this model call (forward order, outside every wrapper)."""
        return request

    async def amodify_model_request(
        self, request: ModelRequest[MiddlewareContextT], state: StateT
    ) -> ModelRequest[Any]:
        """Async twin of :meth:`modify_model_request`."""
        return request

    if TYPE_CHECKING:
        # Typed as an attribute so a subclass may define either form: the classic (request, handler) hook, or a
        # flow (a generator taking only the request; see middleware_kit.flow).
        wrap_model_call: WrapModelCallHook
    else:

        def wrap_model_call(self, request, handler):
            """Around the model call. Call ``handler(request)`` 0..n times and return the response (or write it
            as a flow: ``def wrap_model_call(self, request): response = yield request; return response``)."""
            return handler(request)

    async def awrap_model_call(
        self, request: ModelRequest[MiddlewareContextT], handler: AsyncModelHandler
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Async twin of :meth:`wrap_model_call`."""
        return await handler(request)

    # -- tool chain ------------------------------------------------------------------------------------------
    def before_tool(self, request: ToolCallRequest) -> ToolCallRequest | Any | None:
        """Before each tool call, outside the wrappers: None, a new request, or a ``ToolMessage`` to skip the tool."""
        return None

    async def abefore_tool(self, request: ToolCallRequest) -> ToolCallRequest | Any | None:
        """Async twin of :meth:`before_tool`."""
        return None

    if TYPE_CHECKING:
        wrap_tool_call: WrapToolCallHook
    else:

        def wrap_tool_call(self, request, handler):
            """Around each tool call. Call ``handler(request)`` 0..n times and return the result (or write it as a
            flow: ``def wrap_tool_call(self, request): result = yield request; return result``)."""
            return handler(request)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncToolHandler) -> ToolResult:
        """Async twin of :meth:`wrap_tool_call`."""
        return await handler(request)

    def after_tool(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        """After each tool call, outside the wrappers (reverse order): None or a replacement result."""
        return None

    async def aafter_tool(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        """Async twin of :meth:`after_tool`."""
        return None

    # -- message guard (not a step of the run: see middleware_kit.hooks.GUARD_MESSAGES) --------------------------
    def guard_messages(
        self, messages: Sequence[AnyMessage], runtime: Runtime[Any] | None
    ) -> Sequence[AnyMessage] | None:
        """Override to guard every list of messages before LangGraph commits it (redact, drop, truncate).

        Return None to leave ``messages`` unchanged, or the guarded list (new messages: never mutate the ones you
        receive; keep their ids so a replacement replaces). ``runtime`` is None when the graph input is guarded.
        Must be idempotent. Only middlewares that override it are guards; this default is never called.
        """
        return None

    def guard_resume(self, value: Any, runtime: Runtime[Any] | None) -> Any:
        """Override to guard a resume value (``Command(resume=...)``) before LangGraph stores it as a pending write.

        Return None to leave ``value`` unchanged, or the guarded value (a new one: never mutate what you receive).
        ``runtime`` is None (the resume is stored before the run continues). Raise to refuse the resume. Must be
        idempotent. Only middlewares that override it are resume guards; this default is never called.
        """
        return None


@dataclass(frozen=True, slots=True)
class HookImpl:
    """A hook a middleware defines: its sync and/or async implementation and its declared routing."""

    owner: str
    hook: str
    sync: Callable[..., Any] | None
    async_: Callable[..., Any] | None
    can_jump_to: frozenset[str]
    may_interrupt: bool

    @property
    def mode(self) -> HookMode:
        return HookMode.of(self.sync, self.async_, HOOKS[self.hook].kind)


def _implementation(mw: AgentMiddleware[Any, Any], method: str) -> Callable[..., Any] | None:
    """The bound implementation of ``method`` if ``mw`` overrides the base default, else None."""
    if method in getattr(mw, "__dict__", {}):
        fn: Callable[..., Any] = mw.__dict__[method]
        return fn
    impl = getattr(type(mw), method, None)
    if impl is None or impl is getattr(AgentMiddleware, method):
        return None
    bound: Callable[..., Any] = getattr(mw, method)
    return bound


_FLOW_MIXINS: dict[str, tuple[type, str]] = {
    "wrap_model_call": (ModelCallFlowHooks, "model_call_flow"),
    "wrap_tool_call": (ToolCallFlowHooks, "tool_call_flow"),
}


def _flow_of(
    mw: AgentMiddleware[Any, Any], hook: str, sync_fn: Callable[..., Any] | None, async_fn: Callable[..., Any] | None
) -> Callable[..., Any] | None:
    """The flow method of a middleware that takes both twins of ``hook`` from a flow mixin (overriding neither):
    the engine drives it inline instead of calling the mixin's drivers."""
    mixin_and_flow = _FLOW_MIXINS.get(hook)
    if mixin_and_flow is None or sync_fn is None or async_fn is None:
        return None
    mixin, flow_name = mixin_and_flow
    cls = type(mw)
    if getattr(cls, hook) is getattr(mixin, hook) and getattr(cls, "a" + hook) is getattr(mixin, "a" + hook):
        flow_fn: Callable[..., Any] = getattr(mw, flow_name)
        return flow_fn
    return None


def _config(mw: AgentMiddleware[Any, Any], method: str, fn: Callable[..., Any] | None) -> dict[str, Any]:
    cfg: dict[str, Any] = dict(getattr(type(mw), "_hook_config", {}).get(method, {}))
    target = getattr(fn, "__func__", fn)
    if target is not None:
        if hasattr(target, "__can_jump_to__"):
            cfg["can_jump_to"] = list(target.__can_jump_to__)
        if getattr(target, "__may_interrupt__", False):
            cfg["may_interrupt"] = True
    return cfg


def defined_hooks(mw: AgentMiddleware[Any, Any]) -> dict[str, HookImpl]:
    """The hooks ``mw`` defines, in the order a run meets them."""
    found: dict[str, HookImpl] = {}
    for spec in HOOKS.values():
        sync_fn = _implementation(mw, spec.name)
        async_fn = _implementation(mw, spec.async_name)
        flow_fn = _flow_of(mw, spec.name, sync_fn, async_fn)
        if flow_fn is not None:
            sync_fn, async_fn = flow_fn, None
        if sync_fn is None and async_fn is None:
            continue
        jumps: set[str] = set()
        may_interrupt = False
        for method, fn in ((spec.name, sync_fn), (spec.async_name, async_fn)):
            if fn is None:
                continue
            cfg = _config(mw, method, fn)
            jumps.update(str(jump_target(j)) for j in cfg.get("can_jump_to") or ())
            may_interrupt = may_interrupt or bool(cfg.get("may_interrupt"))
        found[spec.name] = HookImpl(mw.name, spec.name, sync_fn, async_fn, frozenset(jumps), may_interrupt)
    return found


if TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """Every public name of ``middleware_kit`` also imports from here, as from ``langchain.agents.middleware``
        (the package root puts them in this module at import; type checkers learn it from this declaration)."""
