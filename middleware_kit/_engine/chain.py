"""Wrap-chain composition: the one execution primitive of the model call and of each tool call.

Every hook around a call compiles to a *layer*: a function of the next handler returning a handler. Layers are
composed once, innermost first (koa-compose / Django ``load_middleware`` style), into one closure per mode (sync and
async), so a call walks prebuilt closures and never the middleware list. ``modify_model_request`` and
``before_tool``/``after_tool`` are layers too, placed outside every wrapper, which is why a retrying wrapper never
re-runs them.

Handlers are re-entrant: a wrapper may call its handler 0..n times (retry, fallback, cache). Composition is closed:
:func:`compose` of layers is itself usable as a layer (see :func:`middleware_kit.testing.run_model_chain`).

LangGraph control flow (``GraphInterrupt``, ``ParentCommand``: ``GraphBubbleUp``) passes through every layer: the
first one raised during a call is recorded, and if a wrapper swallows it (returns normally or raises something else)
the entry point re-raises it.

An exception a hook raises itself gets one note naming the middleware and the hook
(:func:`~middleware_kit._engine.validation.note_hook_failure`); one that only came through a wrap hook from its handler
(the
model's, the tool's, an inner hook's) does not. Which it is is read from the traceback (did it pass through the
handler's frame?), on the error path only: the happy path costs nothing but the ``try``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from types import CodeType
from typing import Any, Generic, TypeVar, cast

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from middleware_kit import flow as _flow
from middleware_kit._engine.bridge import blocking_form, run_coroutine_sync, run_sync_in_thread
from middleware_kit._engine.drive import Abort, Step, Steps, run_async, run_sync
from middleware_kit._engine.validation import (
    check_model_request,
    check_model_response,
    check_tool_result,
    note_hook_failure,
)
from middleware_kit.errors import HookReturnError
from middleware_kit.flow import Sleep
from middleware_kit.hooks import HookMode
from middleware_kit.types import ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest

__all__ = [
    "CallState",
    "Layer",
    "ChainCall",
    "call_async",
    "call_flow",
    "call_sync",
    "compose",
    "model_request_layer",
    "tool_hooks_layer",
    "wrap_model_layer",
    "wrap_tool_layer",
]

Req = TypeVar("Req")
Res = TypeVar("Res")
SyncHandler = Callable[[Any], Any]
AsyncHandler = Callable[[Any], Awaitable[Any]]
Normalize = Callable[[object, int, Any], Any]
"""How a wrap layer normalizes what its hook returned: ``normalize(value, depth, request)``."""
InvokeOf = Callable[[Any], tuple[Callable[[Any, Any], Any], Any]]
"""How a wrap layer calls its hook, given the next handler: ``call, arg = invoke_of(nxt)``, then ``call(request, arg)``
for each request (a classic hook is ``(fn, nxt)`` itself: no frame of ours between the layer and the hook); for a flow,
``call(flow(request), arg)``, ``call`` the engine's driver (no frame of ours between the layer and the driver)."""


def _forget_commands(state: CallState, depth: int) -> None:
    """Drop the ``ExtendedModelResponse`` commands recorded at ``depth`` and deeper: a new call of the layer at
    ``depth``, or its failure, voids them (only the last successful call of each layer counts)."""
    for stale in [d for d in state.commands if d >= depth]:
        del state.commands[stale]


def _note_bubble(exc: GraphBubbleUp) -> None:
    state = _CALL.get()
    if state is not None and state.bubble is None:
        state.bubble = exc


@dataclass(frozen=True, slots=True)
class Layer(Generic[Req, Res]):
    """One layer of a chain: how to build its sync and async handler around the next one."""

    owner: str
    """The middleware's name."""
    hook: str
    """The hook it comes from (``wrap_model_call``, ``modify_model_request``, ``before_tool``+``after_tool``...)."""
    mode: str
    """``sync``, ``async`` or ``sync+async``: which twins the middleware defines (the plan shows it)."""
    build_sync: Callable[[SyncHandler, int], SyncHandler]
    build_async: Callable[[AsyncHandler, int], AsyncHandler]
    """Only called for layers that define an async twin; runs of sync-only layers share one thread hop."""


def compose(
    layers: Sequence[Layer[Any, Any]], base_sync: SyncHandler, base_async: AsyncHandler
) -> tuple[SyncHandler, AsyncHandler]:
    """Nest ``layers`` (first = outermost) around the base handlers, once. Returns the sync and async entry.

    In the async chain, a run of consecutive sync-only layers is composed as one sync sub-chain that runs in a
    single worker-thread hop (its innermost handler goes back to the event loop for the rest of the chain), instead
    of two hops per layer.
    """
    sync_h = base_sync
    for depth in range(len(layers) - 1, -1, -1):
        sync_h = layers[depth].build_sync(sync_h, depth)
    async_h = base_async
    depth = len(layers) - 1
    while depth >= 0:
        if layers[depth].mode != "sync":
            async_h = layers[depth].build_async(async_h, depth)
            depth -= 1
            continue
        first = depth
        while first > 0 and layers[first - 1].mode == "sync":
            first -= 1
        async_h = _sync_run(layers, first, depth, async_h)
        depth = first - 1
    return sync_h, async_h


def _sync_run(layers: Sequence[Layer[Any, Any]], first: int, last: int, inner: AsyncHandler) -> AsyncHandler:
    """Layers ``first..last`` (all sync-only) as one async handler: one thread hop for the whole run; the innermost
    sync handler runs the rest of the chain back on the caller's loop
    (:func:`~middleware_kit._engine.bridge.run_coroutine_sync`
    knows the loop the thread was moved off)."""

    def back_to_loop(request: Any) -> Any:
        __tracebackhide__ = True
        return run_coroutine_sync(_awaited(inner, request))

    sub: SyncHandler = back_to_loop
    for depth in range(last, first - 1, -1):
        sub = layers[depth].build_sync(sub, depth)
    chain = sub

    async def hop(request: Any) -> Any:
        __tracebackhide__ = True
        return await run_sync_in_thread(chain, request)

    return hop


async def _awaited(handler: AsyncHandler, request: Any) -> Any:
    __tracebackhide__ = True
    return await handler(request)


class ChainCall:
    """One call through a composed chain, as a context manager around it, and the call's scratch space, shared by
    the layers of the chain (current in a ContextVar while the chain runs). An interrupt a wrapper swallowed is raised
    again when the call ends (in place of the wrapper's answer, or of the error that followed it). The rule of every
    entry point, stated once; a context manager, so an entry point written as an engine body and one written as a
    plain call share it."""

    __slots__ = ("_token", "bubble", "commands")

    commands: dict[int, Command[Any]]
    """``ExtendedModelResponse`` commands by layer depth (the last call of each layer wins)."""
    bubble: GraphBubbleUp | None
    """The first LangGraph control-flow exception seen during the call."""

    def __enter__(self) -> ChainCall:
        self.commands, self.bubble = {}, None  # no __init__: entering is the one call a chain call makes here
        self._token = _CALL.set(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if self.bubble is None:  # nothing swallowed (the usual case): the call ends as it ended
            _CALL.reset(self._token)
            return
        ending = self.leave(exc)
        if ending is not exc:
            raise_instead(ending, exc)

    def leave(self, exc: BaseException | None) -> BaseException | None:
        """Leave the call; the exception it ends with, given the one it raised (None: none): a swallowed interrupt
        wins over an answer or another error; an interrupt the call raised itself stands."""
        _CALL.reset(self._token)
        bubble = self.bubble
        if bubble is None or isinstance(exc, GraphBubbleUp):
            return exc
        return bubble


CallState = ChainCall
"""What the layers of a chain call read and record (``commands``, ``bubble``): the :class:`ChainCall` itself."""

_CALL: ContextVar[ChainCall | None] = ContextVar("middleware_kit_call", default=None)


def raise_instead(ending: BaseException | None, exc: BaseException | None) -> None:
    """Raise ``ending`` where ``exc`` (None: a result) was the outcome, hiding ``exc`` as its context."""
    if ending is None:
        return
    if exc is None:
        raise ending
    raise ending from None


def call_flow(chain: SyncHandler, achain: AsyncHandler | None, request: Any) -> Steps[tuple[Any, CallState]]:
    """Run a composed chain for one call (``chain`` under invoke, ``achain`` under ainvoke); re-raise a swallowed
    interrupt (:class:`ChainCall`)."""
    __tracebackhide__ = True
    with ChainCall() as state:
        result = yield Step(chain, achain, request)
    return result, state


def call_sync(chain: SyncHandler, request: Any) -> tuple[Any, CallState]:
    """Run a composed sync chain for one call; re-raise a swallowed interrupt."""
    __tracebackhide__ = True
    return run_sync(call_flow(chain, None, request))


async def call_async(chain: AsyncHandler, request: Any) -> tuple[Any, CallState]:
    """Run a composed async chain for one call; re-raise a swallowed interrupt."""
    __tracebackhide__ = True
    return await run_async(call_flow(_unused, chain, request))


def _unused(request: Any) -> Any:
    raise AssertionError("the sync chain of an async call")


def _as_async(handler: SyncHandler) -> AsyncHandler:
    async def ahandler(request: Any) -> Any:
        __tracebackhide__ = True
        return handler(request)

    return ahandler


# -- model chain -------------------------------------------------------------------------------------------------
_UNSUPPORTED_COMMAND = (
    ("goto", "Command goto is not yet supported in wrap_model_call middleware. Use the jump_to state field with "
             "before_model/after_model hooks instead."),
    ("resume", "Command resume is not yet supported in wrap_model_call middleware."),
    ("graph", "Command graph is not yet supported in wrap_model_call middleware."),
)
"""LangChain 1.5's sentences for the Command fields a ``wrap_model_call`` may not set, in the order it checks them."""


def _refuse_routing(command: Command[Any], owner: str) -> None:
    for name, sentence in _UNSUPPORTED_COMMAND:
        value = getattr(command, name)
        if value if name == "goto" else value is not None:  # goto's default is (), the others' None
            raise NotImplementedError(
                f"{sentence} {owner}.wrap_model_call returned an ExtendedModelResponse whose Command sets {name}; "
                f"only Command(update=...) is supported there. Route with jump_to from a node hook."
            )


def _model_response(value: object, owner: str, depth: int) -> ModelResponse[Any]:
    """Normalize what a ``wrap_model_call`` returned; outer layers always receive a plain ``ModelResponse``."""
    check_model_response(value, owner)
    if isinstance(value, ModelResponse):
        return value
    if isinstance(value, AIMessage):
        return ModelResponse(result=[value])
    if isinstance(value, ExtendedModelResponse):
        command = value.command
        if command is not None:
            _refuse_routing(command, owner)
            state = _CALL.get()
            if state is not None:
                state.commands[depth] = command
        return _model_response(value.model_response, owner, depth)
    raise HookReturnError.for_wrap_hook(
        owner, "wrap_model_call", value, "a ModelResponse, an AIMessage or an ExtendedModelResponse"
    )


def _body_build(nxt: Any, depth: int, *, body: Callable[[Any, Any, int], Steps[Any]], run: Callable[..., Any]) -> Any:
    """The handler of a layer written as an engine body (``body(request, next_handler, depth)``) for one mode:
    ``run`` is :func:`~middleware_kit._engine.drive.run_sync` or :func:`~middleware_kit._engine.drive.run_async`."""

    def layer(request: Any) -> Any:
        __tracebackhide__ = True
        return run(body(request, nxt, depth))

    if (code := _code_of(body)) is not None:
        layer._runs_code = code  # type: ignore[attr-defined]  # under ainvoke ``layer`` returns a coroutine: only
        # the body's frame is in a traceback
    return layer


def _body_layer(
    owner: str, hook: str, mode: str, body: Callable[[Any, Any, int], Steps[Any]]
) -> Layer[Any, Any]:
    """A layer written once: ``body(request, next_handler, depth)`` is an engine body, run by the sync driver in the
    sync chain and by the async driver in the async chain (its steps call the hook's twin for the mode)."""
    return Layer(
        owner, hook, mode, partial(_body_build, body=body, run=run_sync), partial(_body_build, body=body, run=run_async)
    )


def _layer_failed(exc: BaseException, depth: int, owner: str, hook: str, below: CodeType | None) -> None:
    """A wrap layer's call failed with ``exc``: record a LangGraph interrupt (re-raised at the entry point if an outer
    wrapper swallows it), or void the ``ExtendedModelResponse`` commands of this layer and deeper; an exception the
    hook raised itself (not one from its handler, whose code is ``below``) gets a note naming the hook."""
    if isinstance(exc, GraphBubbleUp):
        _note_bubble(exc)
        return
    if (call := _CALL.get()) is not None:
        _forget_commands(call, depth)
    if not _from_handler(exc, below):
        note_hook_failure(exc, owner, hook)


def _code_of(handler: Any) -> CodeType | None:
    """The code a call of ``handler`` runs (a function, a bound method or a partial of one), or None. A handler whose
    own frame is not in a traceback of what it runs (it returns an awaitable) carries the code whose frame is, as
    ``_runs_code``."""
    if (code := getattr(handler, "_runs_code", None)) is not None:
        return cast(CodeType, code)
    while isinstance(handler, partial):
        handler = handler.func
    code = getattr(getattr(handler, "__func__", handler), "__code__", None)
    return code if isinstance(code, CodeType) else None


def _from_handler(exc: BaseException, below: CodeType | None) -> bool:
    """Whether ``exc``, caught in a wrap layer, came out of the handler its hook called (a frame running ``below``
    is in its traceback, under the layer's own frame): then the hook only let it through (it is the model's, the
    tool's or an inner hook's). Read on the error path only. Unknown code (``below`` None): not the hook's."""
    if below is None:
        return True
    tb = exc.__traceback__
    tb = tb.tb_next if tb is not None else None  # the first entry is the layer's own frame
    while tb is not None:
        if tb.tb_frame.f_code is below:
            return True
        tb = tb.tb_next
    return False


class _LayerCall:
    """What a ``wrap_*_call`` layer does around each call of its hook, in either mode: on entry a model layer voids
    the ``ExtendedModelResponse`` commands of its last call; on failure :func:`_layer_failed`. A context manager, so
    the two handlers of :func:`_wrap_build` differ only in the ``await`` (and an exception passes through unchanged:
    no frame of ours is added to its traceback)."""

    __slots__ = ("below", "depth", "hook", "owner", "tracks")

    def __init__(self, depth: int, owner: str, hook: str, below: CodeType | None, tracks: bool) -> None:
        self.depth, self.owner, self.hook, self.below, self.tracks = depth, owner, hook, below, tracks

    def __enter__(self) -> None:
        if self.tracks and (call := _CALL.get()) is not None and call.commands:
            _forget_commands(call, self.depth)  # a new call of this layer voids the commands of its last call

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            self.failed(exc)

    def failed(self, exc: BaseException) -> None:
        _layer_failed(exc, self.depth, self.owner, self.hook, self.below)


def _wrap_build(
    nxt: Any, depth: int, *, awaiting: bool, invoke_of: InvokeOf, tracks: bool, normalize: Normalize, owner: str,
    hook: str, flow: Callable[[Any], Any] | None = None,
) -> Any:
    """The handler of a ``wrap_*_call`` layer in one mode: ``call(request, arg)`` (from ``invoke_of(nxt)``) calls the
    hook (a classic ``fn(request, handler)``; for a ``flow``, its generator run by the engine's driver, see
    :func:`_flow_invoke`), awaited
    under ``ainvoke``; what it returns is normalized; around it, :class:`_LayerCall`. Plain closures, not an engine
    body: this is the hot path of every model and tool call (bench/README.md). Under ``invoke`` the layer does the
    guard's two steps itself (a ``try`` costs nothing until it raises; the ``with`` protocol costs two calls, and the
    entry check is inline: no call unless the call has commands)."""
    call, arg = invoke_of(nxt)
    guard = _LayerCall(depth, owner, hook, _code_of(nxt), tracks)
    if awaiting:

        async def alayer(request: Any) -> Any:
            __tracebackhide__ = True
            with guard:
                return normalize(await call(request if flow is None else flow(request), arg), depth, request)

        return alayer

    def layer(request: Any) -> Any:
        __tracebackhide__ = True
        if tracks and (state := _CALL.get()) is not None and state.commands:
            guard.__enter__()
        try:
            value = call(request if flow is None else flow(request), arg)
            # The usual answer passes without a call (a subset of what ``normalize`` returns unchanged, by exact
            # types): a model response of one AIMessage, a ToolMessage answering this call.
            if tracks:
                if type(value) is ModelResponse and type(rs := value.result) is list and len(rs) == 1 \
                        and type(rs[0]) is AIMessage:
                    return value
            elif type(value) is ToolMessage and value.tool_call_id == request.tool_call["id"]:
                return value
            return normalize(value, depth, request)
        except BaseException as exc:
            guard.failed(exc)
            raise

    return layer


def _hook_invoke(fn: Callable[..., Any]) -> InvokeOf:
    """``invoke_of`` of a classic wrap hook: ``fn(request, next_handler)``."""

    def invoke_of(nxt: Any) -> tuple[Callable[[Any, Any], Any], Any]:
        return fn, nxt

    return invoke_of


def _flow_invoke(run: Callable[..., Any], call_of: Callable[[Any], Callable[[Any], Any]]) -> InvokeOf:
    """``invoke_of`` of a flow hook: the engine's driver for the mode (``run``), to run the flow's generator (the
    layer makes it), with ``call_of(nxt)`` giving what its yields mean."""

    def invoke_of(nxt: Any) -> tuple[Callable[[Any, Any], Any], Any]:
        return run, call_of(nxt)

    return invoke_of


def _flow_call(owner: str, hook: str, request_type: type, sleep_of: Callable[[], Callable[[float], Any]]) -> Any:
    """``call_of`` of a flow hook: a yielded request goes to the next handler, a ``Sleep`` to ``sleep_of()``
    (:data:`middleware_kit.flow.sleep` or ``asleep``, looked up at each sleep so tests may patch them);
    anything else
    closes the flow with a ``HookReturnError`` naming the middleware and the hook."""

    def call_of(nxt: Any) -> Callable[[Any], Any]:
        def call(command: Any) -> Any:
            __tracebackhide__ = True
            if isinstance(command, request_type):
                return nxt(command)
            if isinstance(command, Sleep):
                return sleep_of()(command.seconds)
            raise Abort(HookReturnError.for_flow_yield(owner, hook, command, request_type.__name__))

        return call

    return call_of


def _wrap_layer(
    owner: str,
    hook: str,
    sync_fn: Callable[..., Any] | None,
    async_fn: Callable[..., Any] | None,
    normalize: Normalize,
    flow: bool,
) -> Layer[Any, Any]:
    """A ``wrap_*_call`` as a layer: classic (``fn(request, handler)``: ``sync_fn``, ``async_fn`` or both) or a flow
    (``sync_fn`` is the generator function). An async-only hook under ``invoke`` is driven to completion on a loop
    (:func:`middleware_kit._engine.bridge.blocking_form`); a sync-only one never gets an async build (:func:`compose`
    runs it
    in a thread hop)."""
    tracks = hook == "wrap_model_call"  # only model layers record ExtendedModelResponse commands
    sync_build = partial(_wrap_build, awaiting=False, tracks=tracks, normalize=normalize, owner=owner, hook=hook)
    async_build = partial(_wrap_build, awaiting=True, tracks=tracks, normalize=normalize, owner=owner, hook=hook)
    if flow:
        assert sync_fn is not None
        request_type = ModelRequest if tracks else ToolCallRequest
        sync_call = _flow_call(owner, hook, request_type, lambda: _flow.sleep)
        async_call = _flow_call(owner, hook, request_type, lambda: _flow.asleep)
        return Layer(
            owner,
            hook,
            HookMode.FLOW,
            partial(sync_build, invoke_of=_flow_invoke(run_sync, sync_call), flow=sync_fn),
            partial(async_build, invoke_of=_flow_invoke(run_async, async_call), flow=sync_fn),
        )
    if sync_fn is not None:
        sync_invoke = _hook_invoke(sync_fn)
    else:
        assert async_fn is not None
        sync_invoke = _hook_invoke(_driven(async_fn))
    return Layer(
        owner,
        hook,
        _mode(sync_fn, async_fn),
        partial(sync_build, invoke_of=sync_invoke),
        partial(async_build, invoke_of=_hook_invoke(async_fn)) if async_fn is not None else _no_async_build(owner),
    )


def _driven(async_fn: Callable[..., Any]) -> Callable[[Any, SyncHandler], Any]:
    """An async-only wrap hook in the sync chain: its handler made awaitable, the call driven on a loop."""
    blocking = blocking_form(async_fn)

    def driven(request: Any, nxt: SyncHandler) -> Any:
        __tracebackhide__ = True
        return blocking(request, _as_async(nxt))

    return driven


def _no_async_build(owner: str) -> Callable[[AsyncHandler, int], AsyncHandler]:
    def build(nxt: AsyncHandler, depth: int) -> AsyncHandler:
        # compose() runs sync-only layers through _sync_run; reaching here is a bug in middleware_kit itself.
        raise RuntimeError(f"middleware_kit internal error: async build requested for sync-only layer {owner}")

    return build


def wrap_model_layer(
    owner: str,
    sync_fn: Callable[..., Any] | None,
    async_fn: Callable[..., Any] | None,
    mode: HookMode | None = None,
) -> Layer[ModelRequest[Any], ModelResponse[Any]]:
    """A ``wrap_model_call`` (sync, async, both, or a flow) as a layer."""

    def normalize(value: object, depth: int, request: Any) -> ModelResponse[Any]:
        if type(value) is ModelResponse:  # the usual case, checked inline: one AIMessage
            result = value.result
            if type(result) is list and len(result) == 1 and type(result[0]) is AIMessage:
                return value
        return _model_response(value, owner, depth)

    is_flow = (mode or HookMode.of(sync_fn, async_fn, "wrap_model")) is HookMode.FLOW
    return _wrap_layer(owner, "wrap_model_call", sync_fn, async_fn, normalize, is_flow)


def model_request_layer(
    owner: str, sync_fn: Callable[..., Any] | None, async_fn: Callable[..., Any] | None
) -> Layer[ModelRequest[Any], ModelResponse[Any]]:
    """A ``modify_model_request`` as a layer: it rewrites the request, then calls the next handler once."""
    hook = Step.twin(sync_fn, async_fn)

    def body(request: ModelRequest[Any], nxt: Any, depth: int) -> Steps[Any]:
        __tracebackhide__ = True
        try:
            changed = yield hook.with_args(request, request.state)
        except Exception as exc:
            note_hook_failure(exc, owner, "modify_model_request")
            raise
        if not isinstance(changed, ModelRequest):
            raise HookReturnError.for_request_hook(owner, "modify_model_request", changed)
        check_model_request(changed, request, owner, "modify_model_request")
        return (yield Step(nxt, nxt, changed))

    return _body_layer(owner, "modify_model_request", _mode(sync_fn, async_fn), body)


# -- tool chain --------------------------------------------------------------------------------------------------
def _tool_result(value: object, owner: str, hook: str, request: ToolCallRequest) -> ToolMessage | Command[Any]:
    if isinstance(value, (ToolMessage, Command)):
        check_tool_result(value, request, owner, hook)
        return value
    raise HookReturnError.for_wrap_hook(owner, hook, value, "a ToolMessage or a Command")


def wrap_tool_layer(
    owner: str,
    sync_fn: Callable[..., Any] | None,
    async_fn: Callable[..., Any] | None,
    mode: HookMode | None = None,
) -> Layer[ToolCallRequest, ToolMessage | Command[Any]]:
    """A ``wrap_tool_call`` (sync, async, both, or a flow) as a layer."""

    def normalize(value: object, depth: int, request: Any) -> ToolMessage | Command[Any]:
        if type(value) is ToolMessage and value.tool_call_id == request.tool_call["id"]:  # the usual case
            return value
        return _tool_result(value, owner, "wrap_tool_call", request)

    is_flow = (mode or HookMode.of(sync_fn, async_fn, "wrap_tool")) is HookMode.FLOW
    return _wrap_layer(owner, "wrap_tool_call", sync_fn, async_fn, normalize, is_flow)


def _before_result(value: object, owner: str) -> ToolCallRequest | ToolMessage | None:
    if value is None or isinstance(value, (ToolCallRequest, ToolMessage)):
        return value
    raise HookReturnError.for_wrap_hook(
        owner, "before_tool", value, "None, a ToolCallRequest (to change the call) or a ToolMessage (to skip the tool)"
    )


def _after_result(value: object, owner: str, result: Any) -> Any:
    if value is None:
        return result
    if isinstance(value, (ToolMessage, Command)):
        return value
    raise HookReturnError.for_wrap_hook(owner, "after_tool", value, "None, a ToolMessage or a Command")


def tool_hooks_layer(
    owner: str,
    before: tuple[Callable[..., Any] | None, Callable[..., Any] | None],
    after: tuple[Callable[..., Any] | None, Callable[..., Any] | None],
) -> Layer[ToolCallRequest, ToolMessage | Command[Any]]:
    """One middleware's ``before_tool``/``after_tool`` pair as one layer, outside every ``wrap_tool_call``.

    ``before_tool`` may replace the request or return a ``ToolMessage`` that skips the tool (then only the
    ``after_tool`` hooks of outer middlewares see it, as in any onion). ``after_tool`` may replace the result.
    """
    before_hook = Step.twin(*before) if any(before) else None
    after_hook = Step.twin(*after) if any(after) else None

    def body(request: ToolCallRequest, nxt: Any, depth: int) -> Steps[Any]:
        __tracebackhide__ = True
        if before_hook is not None:
            try:
                value = yield before_hook.with_args(request)
            except Exception as exc:
                note_hook_failure(exc, owner, "before_tool")
                raise
            changed = _before_result(value, owner)
            if isinstance(changed, ToolMessage):
                check_tool_result(changed, request, owner, "before_tool")
                return changed
            request = changed if changed is not None else request
        result = yield Step(nxt, nxt, request)
        if after_hook is None:
            return result
        try:
            value = yield after_hook.with_args(request, result)
        except Exception as exc:
            note_hook_failure(exc, owner, "after_tool")
            raise
        changed_result = _after_result(value, owner, result)
        if changed_result is not result:
            check_tool_result(changed_result, request, owner, "after_tool")
        return changed_result

    hooks = "+".join(h for h, fns in (("before_tool", before), ("after_tool", after)) if any(fns))
    modes = {_mode(*fns) for fns in (before, after) if any(fns)}
    return _body_layer(owner, hooks, "/".join(sorted(modes)), body)


def _mode(sync_fn: object, async_fn: object) -> HookMode:
    return HookMode.of(sync_fn, async_fn, "node")
