"""``AgentMiddleware``: the base class. It only supplies defaults, ``name`` and a readable ``repr``.

What each hook means, and in which order hooks run, is the contract in :mod:`middleware_kit.hooks`. A subclass
overrides the hooks it needs, sync, async (``a``-prefixed twin) or both; whichever it defines works under both
``invoke`` and ``ainvoke``. The defaults below do nothing, so hooks may be called directly in unit tests
(``mw.before_model(state, None)``).

Middleware must be stateless: one instance serves many concurrent runs. Keep per-run data in state or context.
"""

from __future__ import annotations

import difflib
import operator
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from types import FunctionType, MethodType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal
from weakref import WeakKeyDictionary

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime
from typing_extensions import TypeVar

from middleware_kit._engine.compat import StateLike
from middleware_kit.errors import HookNameError
from middleware_kit.flow import ModelCallFlowHooks, ToolCallFlowHooks, WrapModelCallHook, WrapToolCallHook
from middleware_kit.hooks import (
    GUARDS,
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
from middleware_kit.types import _ModelRequestOverrides as _ModelRequestOverrides  # LangChain's types module has it

__all__ = [
    "HOOK_METHODS",
    "AgentMiddleware",
    "ClassHooks",
    "HookImpl",
    "HookNameError",
    "MiddlewareContextT",
    "StateT",
    "StateT_co",
    "StateT_contra",
    "class_hooks",
    "defined_hooks",
    "hook_facts",
]

StateT = TypeVar("StateT", bound=AgentState[Any], default=AgentState[Any])
"""The state schema a middleware reads (``AgentMiddleware[MyState]``)."""
MiddlewareContextT = TypeVar("MiddlewareContextT", bound=StateLike | None, default=Any)
"""The runtime context type a middleware reads (``AgentMiddleware[MyState, MyContext]``)."""
StateT_co = TypeVar("StateT_co", bound=AgentState[Any], default=AgentState[Any], covariant=True)
"""A covariant state type, for signatures that accept any middleware of a state (LangChain 1.5's name; deepagents'
``create_deep_agent(middleware: Sequence[AgentMiddleware[StateT_co, ContextT]])``)."""
StateT_contra = TypeVar("StateT_contra", bound=AgentState[Any], contravariant=True)
"""A contravariant state type (LangChain 1.5's name)."""


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

    not_hooks: ClassVar[Collection[str]] = ()
    """Names of methods that look like a misspelled hook but are deliberate (``not_hooks = ("after_tools",)``).
    Without it, a public method named close to a hook (``before_modle``) makes ``create_agent`` raise
    :class:`HookNameError`, since the engine would never call it."""

    _hook_config: ClassVar[dict[str, dict[str, Any]]] = {}
    """Per-hook ``can_jump_to``/``may_interrupt`` set by the decorators (``hook_config`` sets them on functions)."""

    stream_holdback: int | Literal["message"] | None = None
    """What this middleware must see of a model's streamed answer before any of it may reach a caller: ``None``
    (the default) lets tokens through as they come; an ``int`` holds back that many characters per content block (a
    value split across tokens is still caught: PII); ``"message"`` holds back the whole message until the middleware
    has judged it (an output guard). The engine applies the strictest declaration of the stack to every stream
    surface. A class attribute or an instance attribute set in ``__init__``."""

    inherited: bool = False
    """Whether an agent run inside a run of this agent (as a tool, a subgraph node, a ``task`` sub-agent) applies this
    middleware too, around its own stack. True for the bundled policies (PII, budgets, guardrails, human review);
    set it to ``False`` on an instance to keep a policy at the top level only."""

    _engine_layer: ClassVar[bool] = False
    """True for the layers the engine itself adds (run control's): see :func:`is_engine_layer`."""

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

    # -- message guard (not a step of the run: see middleware_kit.hooks.GUARD_MESSAGES) --------------------
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
    mode: HookMode = field(init=False, compare=False)
    """How the middleware wrote it (decided here, once: the engine reads it several times per build)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", HookMode.of(self.sync, self.async_, HOOKS[self.hook].kind))

    @classmethod
    def _known(
        cls, owner: str, hook: str, sync: Callable[..., Any] | None, async_: Callable[..., Any] | None,
        can_jump_to: frozenset[str], may_interrupt: bool, mode: HookMode,
    ) -> HookImpl:
        """A HookImpl whose mode is already known (found once per class): built per middleware per build."""
        impl = object.__new__(cls)
        put = object.__setattr__
        put(impl, "owner", owner)
        put(impl, "hook", hook)
        put(impl, "sync", sync)
        put(impl, "async_", async_)
        put(impl, "can_jump_to", can_jump_to)
        put(impl, "may_interrupt", may_interrupt)
        put(impl, "mode", mode)
        return impl


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


def _flow_name(cls: type, hook: str) -> str | None:
    """The flow method of a class that takes both twins of ``hook`` from a flow mixin (overriding neither): the
    engine drives it inline instead of calling the mixin's drivers."""
    mixin_and_flow = _FLOW_MIXINS.get(hook)
    if mixin_and_flow is None:
        return None
    mixin, flow_name = mixin_and_flow
    if getattr(cls, hook) is getattr(mixin, hook) and getattr(cls, "a" + hook) is getattr(mixin, "a" + hook):
        return flow_name
    return None


def _flow_of(
    mw: AgentMiddleware[Any, Any], hook: str, sync_fn: Callable[..., Any] | None, async_fn: Callable[..., Any] | None
) -> Callable[..., Any] | None:
    if sync_fn is None or async_fn is None:
        return None
    flow_name = _flow_name(type(mw), hook)
    if flow_name is None:
        return None
    flow_fn: Callable[..., Any] = getattr(mw, flow_name)
    return flow_fn


def _config(cls: type, method: str, fn: Callable[..., Any] | None) -> dict[str, Any]:
    cfg: dict[str, Any] = dict(getattr(cls, "_hook_config", {}).get(method, {}))
    target = getattr(fn, "__func__", fn)
    if target is not None:
        if hasattr(target, "__can_jump_to__"):
            cfg["can_jump_to"] = list(target.__can_jump_to__)
        if getattr(target, "__may_interrupt__", False):
            cfg["may_interrupt"] = True
    return cfg


def _routing(cls: type, spec_name: str, sync_fn: Any, async_fn: Any) -> tuple[frozenset[str], bool]:
    """``can_jump_to`` and ``may_interrupt`` declared on either twin (or in the class's ``_hook_config``)."""
    jumps: set[str] = set()
    may_interrupt = False
    for method, fn in ((spec_name, sync_fn), ("a" + spec_name, async_fn)):
        if fn is None:
            continue
        cfg = _config(cls, method, fn)
        jumps.update(str(jump_target(j)) for j in cfg.get("can_jump_to") or ())
        may_interrupt = may_interrupt or bool(cfg.get("may_interrupt"))
    return frozenset(jumps), may_interrupt


def _discover(mw: AgentMiddleware[Any, Any]) -> dict[str, HookImpl]:
    """The hooks ``mw`` defines, read from the instance itself (the path for instance-level overrides)."""
    found: dict[str, HookImpl] = {}
    for spec in HOOKS.values():
        sync_fn = _implementation(mw, spec.name)
        async_fn = _implementation(mw, spec.async_name)
        flow_fn = _flow_of(mw, spec.name, sync_fn, async_fn)
        if flow_fn is not None:
            sync_fn, async_fn = flow_fn, None
        if sync_fn is None and async_fn is None:
            continue
        jumps, may_interrupt = _routing(type(mw), spec.name, sync_fn, async_fn)
        found[spec.name] = HookImpl(mw.name, spec.name, sync_fn, async_fn, jumps, may_interrupt)
    return found


# -- per-class facts, found once per class ------------------------------------------------------------------------
HOOK_METHODS: tuple[str, ...] = (*(n for spec in HOOKS.values() for n in (spec.name, spec.async_name)), *GUARDS)
"""Every method name the engine reads as a hook (both twins of each hook, and the guards)."""
_HOOK_METHOD_SET = frozenset(HOOK_METHODS)
_fingerprint = operator.attrgetter(*HOOK_METHODS, "_hook_config")
"""The class attributes :func:`class_hooks` reads (every one is defined on ``AgentMiddleware``)."""
_NEAR_MISS_CUTOFF = 0.85


@dataclass(frozen=True, slots=True)
class _Slot:
    """One hook a class defines: the attributes to bind on an instance, and its declared routing."""

    hook: str
    sync_attr: str | None
    async_attr: str | None
    can_jump_to: frozenset[str]
    may_interrupt: bool
    mode: HookMode


@dataclass(slots=True)
class ClassHooks:
    """What a middleware class defines, found once per class and shared by its instances."""

    fingerprint: tuple[object, ...]
    """The class's hook attributes when this was found: a class patched later is read again."""
    slots: tuple[_Slot, ...] | None
    """The hooks, in run order; None when one of them is a descriptor whose value may depend on the instance (a
    property...): such a class is read per instance."""
    near_misses: tuple[tuple[str, str, str], ...]
    """``(class, method, hook)`` for each public method of the user's classes whose name is close to a hook's."""
    checked: bool = False
    """Set by the pipeline once the hooks passed the checks that depend only on the class (signatures...)."""


_CLASS_HOOKS: WeakKeyDictionary[type, ClassHooks] = WeakKeyDictionary()


def class_hooks(cls: type) -> ClassHooks:
    """The hooks ``cls`` defines and its near-miss method names (cached per class, read again if it is patched)."""
    try:
        fingerprint: tuple[object, ...] = _fingerprint(cls)
    except AttributeError:  # a descriptor that refuses class access: read the attributes one by one
        fingerprint = tuple(getattr(cls, name, None) for name in (*HOOK_METHODS, "_hook_config"))
    found = _CLASS_HOOKS.get(cls)
    if found is None or found.fingerprint != fingerprint:
        found = ClassHooks(fingerprint, _class_slots(cls), _near_misses(cls))
        _CLASS_HOOKS[cls] = found
    return found


def _class_slots(cls: type) -> tuple[_Slot, ...] | None:
    slots: list[_Slot] = []
    for spec in HOOKS.values():
        sync_fn, async_fn = (_class_attr(cls, name) for name in (spec.name, spec.async_name))
        if sync_fn is _PER_INSTANCE or async_fn is _PER_INSTANCE:
            return None
        if sync_fn is None and async_fn is None:
            continue
        flow = _flow_name(cls, spec.name) if sync_fn is not None and async_fn is not None else None
        sync_attr = flow or (spec.name if sync_fn is not None else None)
        async_attr = None if flow or async_fn is None else spec.async_name
        if flow:
            sync_fn, async_fn = getattr(cls, flow), None
        jumps, may_interrupt = _routing(cls, spec.name, sync_fn, async_fn)
        mode = HookMode.of(sync_fn, async_fn, spec.kind)
        slots.append(_Slot(spec.name, sync_attr, async_attr, jumps, may_interrupt, mode))
    return tuple(slots)


_PER_INSTANCE = object()


def _class_attr(cls: type, method: str) -> object:
    """The class's override of ``method``, None if it keeps the base default, or ``_PER_INSTANCE`` when the value
    an instance sees cannot be told from the class (a property or another descriptor)."""
    impl = getattr(cls, method, None)
    if impl is None or impl is getattr(AgentMiddleware, method, None):
        return None
    return impl if isinstance(impl, (FunctionType, MethodType)) else _PER_INSTANCE


def _is_library_class(klass: type) -> bool:
    module = getattr(klass, "__module__", "") or ""
    return module.partition(".")[0] in ("middleware_kit", "builtins", "typing", "typing_extensions", "abc")


def _near_misses(cls: type) -> tuple[tuple[str, str, str], ...]:
    """Public methods defined on the user's own classes (not middleware_kit's) whose names are close to a hook's
    but are not one (``before_modle``): the engine would never call them. ``not_hooks`` lists deliberate ones."""
    allowed: set[str] = set()
    for klass in cls.__mro__:
        names = vars(klass).get("not_hooks", ())
        allowed.update((names,) if isinstance(names, str) else names)  # not_hooks = "after_tools" means that name
    found: list[tuple[str, str, str]] = []
    for klass in cls.__mro__:
        if _is_library_class(klass):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in _HOOK_METHOD_SET or name in allowed:
                continue
            if not isinstance(value, (FunctionType, staticmethod, classmethod)):
                continue
            match = difflib.get_close_matches(name, HOOK_METHODS, n=1, cutoff=_NEAR_MISS_CUTOFF)
            if match:
                found.append((klass.__qualname__, name, match[0]))
    return tuple(found)


def hook_facts(mw: AgentMiddleware[Any, Any]) -> tuple[dict[str, HookImpl], ClassHooks, bool]:
    """The hooks ``mw`` defines, its class's facts, and whether the hooks are the class's (False: ``mw`` overrides
    a hook in its own ``__dict__``, as ``self.before_model = ...`` in ``__init__`` does, or its class is read per
    instance: checks of its hooks cannot be cached per class)."""
    record = class_hooks(type(mw))
    own = getattr(mw, "__dict__", None)
    if record.slots is None or (own and not _HOOK_METHOD_SET.isdisjoint(own)):
        return _discover(mw), record, False
    name = mw.name
    found: dict[str, HookImpl] = {}
    for slot in record.slots:
        sync_fn = getattr(mw, slot.sync_attr) if slot.sync_attr is not None else None
        async_fn = getattr(mw, slot.async_attr) if slot.async_attr is not None else None
        found[slot.hook] = HookImpl._known(
            name, slot.hook, sync_fn, async_fn, slot.can_jump_to, slot.may_interrupt, slot.mode
        )
    return found, record, True


def is_engine_layer(mw: object) -> bool:
    """Whether ``mw`` is a layer the engine adds around the user's middleware (``RunControlMiddleware`` and
    ``RunControlGuard`` in a controlled agent). The one rule for them, applied where each part of the engine looks:
    they run like any middleware, but are not the user's stack: the plan shows them on a line of their own, they
    record no hook runs in traces, their ``wrap_tool_call`` does not make a tool node (nor handle dynamic tools),
    and their node hooks (idempotent checks) do not count as work that a later hook's interrupt would repeat."""
    return bool(getattr(type(mw), "_engine_layer", False))


def defined_hooks(mw: AgentMiddleware[Any, Any]) -> dict[str, HookImpl]:
    """The hooks ``mw`` defines, in the order a run meets them."""
    return hook_facts(mw)[0]


if TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """Every public name of ``middleware_kit`` also imports from here, as from ``langchain.agents.middleware``
        (the package root puts them in this module at import; type checkers learn it from this declaration)."""
