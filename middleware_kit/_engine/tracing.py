"""Every hook a langchain-core run: ``"{middleware}.{hook}"`` runs for callback handlers, LangSmith and OpenTelemetry.

For each fused node and each chain, the engine has two variants: the plain one (what every run executes when nobody
listens), composed when the agent is built, and a *traced* one in which every node hook and every chain layer opens
its own chain run, composed on the first run that has a callback handler (once, under a lock: :class:`Once`). A node
run reads its config's callbacks once and picks the variant (:func:`variant`): with no handler the traced variant
is never built nor touched, so tracing costs nothing when it is off, neither per run nor per build.

Nesting follows the onion. A hook run is a child of the run current when it starts (the graph node's, or the outer
layer's), and it is the parent of everything its hook does: the next layer, the chat-model run (the model call picks
its parent from langchain-core's context), the tool run, and any runnable the hook calls. So a retrying
``wrap_model_call`` shows each attempt (the inner hook runs and the chat-model run) under its own run, and each
parallel tool call has its wrap runs under its own ``tools`` task.

* node hooks (``before_agent``, ``before_model``, ``after_model``, ``after_agent``): input the state the hook sees,
  output its update;
* ``wrap_model_call`` / ``wrap_tool_call`` layers (classic, async twin or flow): input the request, output the
  response; the rest of the chain runs inside;
* ``modify_model_request``, ``before_tool``, ``after_tool``: one run per hook call, around the hook alone.

What a hook run records follows its middleware's trace policy (:mod:`middleware_kit.trace_policy`). Hooks also run
inside :func:`middleware_kit.events.hook_scope`'s marker, so events they emit carry their hook name; in the plain
variant the marker is only set for hooks whose function is not named after the hook (decorator hooks), the others
are found on the call stack for free.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import is_dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

from langchain_core.callbacks import AsyncCallbackManager, CallbackManager
from langchain_core.runnables.config import (
    RunnableConfig,
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
    var_child_runnable_config,
)
from langchain_core.tracers.base import BaseTracer
from langgraph.types import Command

from middleware_kit._engine.chain import Layer, compose, model_request_layer, tool_hooks_layer
from middleware_kit._engine.compat import is_internal_config_key
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit.events import _HOOK_METHODS, enter_hook, leave_hook
from middleware_kit.middleware import AgentMiddleware, HookImpl, is_engine_layer
from middleware_kit.trace_policy import TracePolicy, config_callbacks_active, recorded, resolve_trace_policy
from middleware_kit.types import ModelRequest, ToolCallRequest

if TYPE_CHECKING:
    from middleware_kit._engine.phases import ModelStep, NodeStep

__all__ = [
    "HOOK_TAG",
    "HookTracing",
    "Once",
    "config_callbacks_active",
    "variant",
]

T = TypeVar("T")

_SYNC = Callable[..., Any]
_ASYNC = Callable[..., Awaitable[Any]]
_SPLIT_HOOKS: Final = frozenset({"before_tool", "after_tool", "before_tool+after_tool"})
HOOK_TAG: Final = "middleware_kit:hook"
"""The tag of every hook run (not inherited by its children): tells a hook run from a graph node of the same name
(a node holding one hook is named ``"{middleware}.{hook}"`` too)."""


def variant(plain: T, traced: Once[T]) -> T:
    """The variant of a node for the current run (langchain-core's context config): ``traced()`` when the run has a
    callback handler, else ``plain``. Decided once per node run."""
    return traced() if config_callbacks_active(var_child_runnable_config.get()) else plain


class Once(Generic[T]):
    """``make()``, called on first use and kept: the traced variants, which most agents never run, cost nothing when
    the agent is built. Thread-safe: concurrent first runs (parallel tool calls, two threads invoking one agent)
    build it once and all get the same value. If ``make`` raises, nothing is kept and the next use tries again."""

    __slots__ = ("_lock", "_make", "_value")

    _UNSET: Final = object()

    def __init__(self, make: Callable[[], T]) -> None:
        self._make: Callable[[], T] | None = make
        self._value: object = Once._UNSET
        self._lock = threading.Lock()

    def __call__(self) -> T:
        value = self._value
        if value is Once._UNSET:
            with self._lock:
                if self._value is Once._UNSET:
                    assert self._make is not None
                    self._value = self._make()
                    self._make = None  # what it closed over can go
                value = self._value
        return cast(T, value)


# -- opening and closing one hook run --------------------------------------------------------------------------------
def _is_tracer(handler: Any) -> bool:
    """Tracers get the policy's payload; stream handlers (``astream_log``/``astream_events``) feed the caller's own
    stream, so they get the real one, as every other handler."""
    return isinstance(handler, BaseTracer) and not any(
        base.__name__ == "_StreamingCallbackHandler" for base in type(handler).__mro__
    )


def _split(manager: Any) -> tuple[Any, Any]:
    """Two copies of a callback manager (or run manager): non-tracers and tracers."""
    import copy

    real, tracers = copy.copy(manager), copy.copy(manager)
    tracers.handlers = [h for h in manager.handlers if _is_tracer(h)]
    real.handlers = [h for h in manager.handlers if not _is_tracer(h)]
    return real, tracers


def _current_config() -> RunnableConfig:
    config = var_child_runnable_config.get()
    return config if config is not None else {}


def _manager(config: RunnableConfig, kind: type[Any], configure: Callable[[RunnableConfig], Any]) -> Any:
    """The callback manager a hook run starts from, tagged as a hook run. Inside a graph node the config already
    holds a manager of the right kind (the node's child manager): a copy of it is much cheaper than configuring a
    new one from the config (which re-reads tags, metadata and the tracing environment)."""
    callbacks: Any = config.get("callbacks")
    manager: Any = callbacks.copy() if type(callbacks) is kind else configure(config)
    manager.add_tags([HOOK_TAG], inherit=False)
    return manager


def _child(config: RunnableConfig, run: Any) -> RunnableConfig:
    """``config`` with the hook run's child manager (``patch_config(config, callbacks=...)`` without its copy)."""
    child = dict(config)
    child["callbacks"] = run.get_child()
    child.pop("run_name", None)
    child.pop("run_id", None)
    return child  # type: ignore[return-value]


def _step(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Step:
    """A callback-manager call as an engine step: the same bound method in both modes (a sync manager's returns
    the value, an async manager's a coroutine the async driver awaits)."""
    bound = functools.partial(method, *args, **kwargs)
    return Step(bound, bound)


def _hook_run(
    owner: str,
    hook: str,
    policy_of: Callable[[], TracePolicy | None],
    inputs: Any,
    call: Step,
    asynchronous: bool,
    private: frozenset[str],
) -> Steps[Any]:
    """One hook call (``call``) as the chain run ``"{owner}.{hook}"``, a child of the current run and the parent
    of whatever the hook does. One body for both modes (:mod:`middleware_kit._engine.drive`); ``asynchronous`` picks the
    kind of callback manager."""
    __tracebackhide__ = True
    name = f"{owner}.{hook}"
    policy = policy_of()
    config = _current_config()
    manager = (
        _manager(config, AsyncCallbackManager, get_async_callback_manager_for_config) if asynchronous
        else _manager(config, CallbackManager, get_callback_manager_for_config)
    )
    shown = recorded(inputs, policy.process_inputs) if policy is not None else inputs
    if shown is inputs:
        run = yield _step(manager.on_chain_start, None, inputs, name=name)
    else:  # tracers record what the policy says; other handlers see the real payload
        real, tracers = _split(manager)
        run = yield _step(real.on_chain_start, None, inputs, name=name)
        yield _step(tracers.on_chain_start, None, shown, name=name, run_id=run.run_id)
        run.handlers = manager.handlers
    token = var_child_runnable_config.set(_child(config, run))
    marker = enter_hook(owner, hook)
    try:
        output = yield call
    except BaseException as exc:
        leave_hook(marker)
        var_child_runnable_config.reset(token)
        yield _step(run.on_chain_error, exc)
        raise
    leave_hook(marker)
    var_child_runnable_config.reset(token)
    public = _public(output, private)  # what the hook wrote, private state keys left out
    shown = recorded(public, policy.process_outputs) if policy is not None else public
    if shown is public:
        yield _step(run.on_chain_end, public)
    else:
        real, tracers = _split(run)
        yield _step(tracers.on_chain_end, shown)
        yield _step(real.on_chain_end, public)
    return output


def _traced_sync(
    fn: _SYNC, owner: str, hook: str, policy_of: Callable[[], TracePolicy | None], inputs: Callable[..., Any],
    private: frozenset[str],
) -> _SYNC:
    """``fn`` (the sync twin of a hook, or a layer's sync handler) run as its hook run."""

    def traced(*args: Any) -> Any:
        __tracebackhide__ = True
        return run_sync(_hook_run(owner, hook, policy_of, inputs(*args), Step(fn, None, *args), False, private))

    return traced


def _traced_async(
    fn: _ASYNC, owner: str, hook: str, policy_of: Callable[[], TracePolicy | None], inputs: Callable[..., Any],
    private: frozenset[str],
) -> _ASYNC:
    """``fn`` (the async twin of a hook, or a layer's async handler) run as its hook run."""

    async def atraced(*args: Any) -> Any:
        __tracebackhide__ = True
        return await run_async(
            _hook_run(owner, hook, policy_of, inputs(*args), Step(_unused, fn, *args), True, private)
        )

    return atraced


def _unused(*args: Any) -> Any:
    raise AssertionError("the sync twin of an async hook run")


def _scoped_sync(fn: _SYNC, owner: str, hook: str) -> _SYNC:
    def scoped(*args: Any) -> Any:
        __tracebackhide__ = True
        marker = enter_hook(owner, hook)
        try:
            return fn(*args)
        finally:
            leave_hook(marker)

    return scoped


def _scoped_async(fn: _ASYNC, owner: str, hook: str) -> _ASYNC:
    async def ascoped(*args: Any) -> Any:
        __tracebackhide__ = True
        marker = enter_hook(owner, hook)
        try:
            return await fn(*args)
        finally:
            leave_hook(marker)

    return ascoped


def _public(value: Any, private: frozenset[str]) -> Any:
    """What a hook run records as its input: ``value`` (a state, a ``ModelRequest``, a ``ToolCallRequest``) without
    the agent's private state keys, which never reach a stream, an event or a trace (docs/observability.md)."""
    if not private:
        return value
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if k not in private} if not private.isdisjoint(value) else value
    if isinstance(value, Command) and isinstance(value.update, Mapping) and not private.isdisjoint(value.update):
        return Command(graph=value.graph, update=_public(value.update, private), resume=value.resume, goto=value.goto)
    state = getattr(value, "state", None)
    if not (isinstance(value, (ModelRequest, ToolCallRequest)) and isinstance(state, Mapping)) or private.isdisjoint(
        state
    ):
        return value
    public = {k: v for k, v in state.items() if k not in private}
    if isinstance(value, ModelRequest):
        return value.override(state=public)
    runtime = value.runtime  # a ToolRuntime: it carries the state too, and LangGraph's internals in its config
    if is_dataclass(runtime) and isinstance(getattr(runtime, "state", None), Mapping):
        runtime = replace(runtime, state=_public(runtime.state, private), config=_public_config(runtime.config))
    return ToolCallRequest(value.tool_call, value.tool, public, runtime)


def _public_config(config: Any) -> Any:
    """A tool call's config without LangGraph's internals (``__pregel_*``: the channels, by name, the scratchpad)."""
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(configurable, Mapping):
        return config
    return {**config, "configurable": {k: v for k, v in configurable.items() if not is_internal_config_key(k)}}


def _found_on_stack(*fns: object) -> bool:
    """Whether events sent by these hook functions find their hook by the stack walk (methods named after it)."""
    return all(fn is None or getattr(fn, "__name__", "") in _HOOK_METHODS for fn in fns)


class HookTracing:
    """The plain and the traced variants of an agent's nodes and chains, made once when the agent is built."""

    def __init__(
        self,
        middleware: Sequence[AgentMiddleware[Any, Any]],
        hooks: Sequence[Mapping[str, HookImpl]],
        private: frozenset[str] = frozenset(),
    ) -> None:
        self._middleware = {mw.name: mw for mw in middleware}
        self._engine = frozenset(mw.name for mw in middleware if is_engine_layer(mw))
        """Layers the engine added (run control's): they record no hook runs."""
        self._impls = {(impl.owner, name): impl for per_mw in hooks for name, impl in per_mw.items()}
        self._private = private
        """State keys a hook run's recorded input leaves out (private state: ``PrivateStateAttr``, ``jump_to``)."""

    def _first(self, *args: Any) -> Any:
        return _public(args[0], self._private)

    def _tool_result(self, request: Any, result: Any) -> dict[str, Any]:
        return {"request": _public(request, self._private), "result": result}

    def _policy_of(self, owner: str) -> Callable[[], TracePolicy | None]:
        middleware = self._middleware.get(owner)
        return lambda: resolve_trace_policy(middleware)

    def _needs_scope(self, owner: str, *hooks: str) -> bool:
        for hook in hooks:
            impl = self._impls.get((owner, hook))
            if impl is not None and not _found_on_stack(impl.sync, impl.async_):
                return True
        return False

    # -- node hooks -----------------------------------------------------------------------------------------------
    def plain_step(self, step: NodeStep) -> NodeStep:
        """``step`` with the hook marker set while it runs, when its events could not find their hook otherwise."""
        if not self._needs_scope(step.owner, step.hook):
            return step
        run_async = None if step.run_async is None else _scoped_async(step.run_async, step.owner, step.hook)
        return replace(step, run_sync=_scoped_sync(step.run_sync, step.owner, step.hook), run_async=run_async)

    def traced_step(self, step: NodeStep) -> NodeStep:
        """``step`` run as the chain run ``"{owner}.{hook}"`` (input: the state it sees; output: its update)."""
        if step.owner in self._engine:
            return step
        policy_of = self._policy_of(step.owner)
        run_async = (
            None if step.run_async is None
            else _traced_async(step.run_async, step.owner, step.hook, policy_of, self._first, self._private)
        )
        return replace(
            step, run_sync=_traced_sync(step.run_sync, step.owner, step.hook, policy_of, self._first, self._private),
            run_async=run_async,
        )

    def plain_items(self, items: Sequence[NodeStep | ModelStep]) -> tuple[NodeStep | ModelStep, ...]:
        """The plain items of one fused node."""
        from middleware_kit._engine.phases import NodeStep  # phases imports this module

        return tuple(self.plain_step(i) if isinstance(i, NodeStep) else i for i in items)

    def traced_items(
        self, items: Sequence[NodeStep | ModelStep], model: ModelStep, traced_model: Callable[[], ModelStep]
    ) -> tuple[NodeStep | ModelStep, ...]:
        """The traced items of one fused node (``model``, the plain model call, becomes ``traced_model()``)."""
        from middleware_kit._engine.phases import NodeStep  # phases imports this module

        return tuple(
            self.traced_step(i) if isinstance(i, NodeStep) else traced_model() if i is model else i for i in items
        )

    # -- chain layers ---------------------------------------------------------------------------------------------
    def plain_layers(self, layers: Sequence[Layer[Any, Any]]) -> tuple[Layer[Any, Any], ...]:
        """``layers`` with the hook marker where their events could not find their hook otherwise."""
        return tuple(self._layer(layer, traced=False) for layer in layers)

    def traced_layers(self, layers: Sequence[Layer[Any, Any]]) -> tuple[Layer[Any, Any], ...]:
        """``layers`` with every hook a chain run."""
        return tuple(self._layer(layer, traced=True) for layer in layers)

    def traced_chain(self, layers: Sequence[Layer[Any, Any]]) -> tuple[Layer[Any, Any], ...]:
        """The traced variant of the chain of ``layers`` as one layer (a composed chain is itself a layer), composed
        on its first call: what :func:`compose` around it builds is a handler that composes the real one then."""
        if not layers:
            return ()
        traced = Once(lambda: self.traced_layers(layers))

        def build_sync(nxt: _SYNC, depth: int) -> _SYNC:
            chain = Once(lambda: compose(traced(), nxt, _unused)[0])

            def entry(request: Any) -> Any:
                __tracebackhide__ = True
                return chain()(request)

            return entry

        def build_async(nxt: _ASYNC, depth: int) -> _ASYNC:
            achain = Once(lambda: compose(traced(), _unused, nxt)[1])

            async def aentry(request: Any) -> Any:
                __tracebackhide__ = True
                return await achain()(request)

            return aentry

        return (Layer(layers[0].owner, "traced chain", "sync+async", build_sync, build_async),)

    def _layer(self, layer: Layer[Any, Any], *, traced: bool) -> Layer[Any, Any]:
        owner = layer.owner
        if owner in self._engine:
            return layer
        if layer.hook == "modify_model_request":
            impl = self._impls.get((owner, layer.hook))
            if impl is None or not (traced or self._needs_scope(owner, layer.hook)):
                return layer
            sync_fn, async_fn = self._hook_fns(impl, traced, self._first)
            return model_request_layer(owner, sync_fn, async_fn)
        if layer.hook in _SPLIT_HOOKS:
            before, after = self._impls.get((owner, "before_tool")), self._impls.get((owner, "after_tool"))
            if not (traced or self._needs_scope(owner, "before_tool", "after_tool")):
                return layer
            return tool_hooks_layer(
                owner,
                self._hook_fns(before, traced, self._first) if before is not None else (None, None),
                self._hook_fns(after, traced, self._tool_result) if after is not None else (None, None),
            )
        if traced:
            return _traced_layer(layer, self._policy_of(owner), self._first, self._private)
        if self._needs_scope(owner, layer.hook):
            return _scoped_layer(layer)
        return layer

    def _hook_fns(
        self, impl: HookImpl, traced: bool, inputs: Callable[..., Any]
    ) -> tuple[_SYNC | None, _ASYNC | None]:
        owner, hook = impl.owner, impl.hook
        if traced:
            policy_of = self._policy_of(owner)
            return (
                None if impl.sync is None else _traced_sync(impl.sync, owner, hook, policy_of, inputs, self._private),
                None if impl.async_ is None
                else _traced_async(impl.async_, owner, hook, policy_of, inputs, self._private),
            )
        return (
            None if impl.sync is None else _scoped_sync(impl.sync, owner, hook),
            None if impl.async_ is None else _scoped_async(impl.async_, owner, hook),
        )


def _traced_layer(
    layer: Layer[Any, Any], policy_of: Callable[[], TracePolicy | None], inputs: Callable[..., Any],
    private: frozenset[str],
) -> Layer[Any, Any]:
    """A wrap layer whose every call is the chain run ``"{owner}.{hook}"``; the rest of the chain runs inside it."""

    def build_sync(nxt: _SYNC, depth: int) -> _SYNC:
        return _traced_sync(layer.build_sync(nxt, depth), layer.owner, layer.hook, policy_of, inputs, private)

    def build_async(nxt: _ASYNC, depth: int) -> _ASYNC:
        return _traced_async(layer.build_async(nxt, depth), layer.owner, layer.hook, policy_of, inputs, private)

    return Layer(layer.owner, layer.hook, layer.mode, build_sync, build_async)


def _scoped_layer(layer: Layer[Any, Any]) -> Layer[Any, Any]:
    def build_sync(nxt: _SYNC, depth: int) -> _SYNC:
        return _scoped_sync(layer.build_sync(nxt, depth), layer.owner, layer.hook)

    def build_async(nxt: _ASYNC, depth: int) -> _ASYNC:
        return _scoped_async(layer.build_async(nxt, depth), layer.owner, layer.hook)

    return Layer(layer.owner, layer.hook, layer.mode, build_sync, build_async)
