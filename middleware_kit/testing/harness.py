"""Run one hook, or one chain of wrappers, without building a graph.

These use the same engine as ``create_agent`` (validation, ordering, sync/async bridging), so a middleware that
passes here behaves the same inside an agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Command, StreamWriter

from middleware_kit._engine.bridge import bridge_node_hook, run_coroutine_sync
from middleware_kit._engine.chain import CallState, _note_bubble, call_flow, compose
from middleware_kit._engine.compat import update_pairs
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit._engine.model_call import ModelCall
from middleware_kit._engine.phases import NodeStep
from middleware_kit._engine.pipeline import build_pipeline, defined_hooks
from middleware_kit._engine.schema import merge_state_schemas
from middleware_kit._engine.state import StateSemantics
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.hooks import HOOKS
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.types import ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest

__all__ = [
    "arun_hook",
    "arun_model_chain",
    "arun_tool_chain",
    "make_request",
    "make_runtime",
    "run_hook",
    "run_model_chain",
    "run_tool_chain",
]


def make_runtime(
    context: Any = None, *, store: BaseStore | None = None, stream_writer: StreamWriter | None = None
) -> Runtime[Any]:
    """A LangGraph ``Runtime`` for calling hooks outside a graph."""
    if stream_writer is None:
        return Runtime(context=context, store=store)
    return Runtime(context=context, store=store, stream_writer=stream_writer)


def make_request(
    messages: Sequence[AnyMessage | str] = ("hi",), *, model: BaseChatModel | None = None, **fields: Any
) -> ModelRequest[Any]:
    """A ``ModelRequest`` with sensible defaults (a scripted model, a one-message conversation)."""
    from middleware_kit.testing.model import ScriptedChatModel

    msgs: list[AnyMessage] = [HumanMessage(m) if isinstance(m, str) else m for m in messages]
    fields.setdefault("state", {"messages": msgs})
    return ModelRequest(model=model or ScriptedChatModel(["ok"]), messages=msgs, **fields)


def _node_step(middleware: AgentMiddleware[Any, Any], hook: str) -> tuple[NodeStep, StateSemantics] | None:
    if hook not in HOOKS or HOOKS[hook].kind != "node":
        raise MiddlewareConfigError.run_hook_not_a_node_hook(middleware.name, hook)
    impl = defined_hooks(middleware).get(hook)
    if impl is None:
        return None
    run_sync, run_async = bridge_node_hook(impl.sync, impl.async_)
    step = NodeStep(impl.owner, hook, impl.mode, run_sync, run_async, impl.can_jump_to, impl.may_interrupt)
    keys = merge_state_schemas([(middleware.name, middleware.state_schema)]).keys
    return step, StateSemantics(keys, {})


def _hook_flow(
    middleware: AgentMiddleware[Any, Any], hook: str, state: Any, runtime: Runtime[Any] | None
) -> Steps[Any]:
    found = _node_step(middleware, hook)
    if found is None:
        return None
    step, semantics = found
    result = yield Step(step.run_sync, step.run_async, state, runtime if runtime is not None else make_runtime())
    if result is None:
        return None
    semantics.check(step, result)
    return dict(result)


def run_hook(
    middleware: AgentMiddleware[Any, Any], hook: str, state: Any, runtime: Runtime[Any] | None = None
) -> dict[str, Any] | None:
    """Run one node hook as an agent would (async twins driven to completion) and validate what it returns."""
    result: dict[str, Any] | None = run_sync(_hook_flow(middleware, hook, state, runtime))
    return result


async def arun_hook(
    middleware: AgentMiddleware[Any, Any], hook: str, state: Any, runtime: Runtime[Any] | None = None
) -> dict[str, Any] | None:
    """Async twin of :func:`run_hook` (sync-only hooks run in a worker thread, as under ``ainvoke``)."""
    result: dict[str, Any] | None = await run_async(_hook_flow(middleware, hook, state, runtime))
    return result


def _as_list(middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]]) -> list[Any]:
    return [middleware] if isinstance(middleware, AgentMiddleware) else list(middleware)


ModelHandlerLike = Callable[[ModelRequest[Any]], "ModelResponse[Any] | AIMessage"]
_MODEL_CALL = ModelCall()
"""The agent's model binding (tools, structured tools, tool_choice, model_settings), for any request."""


def _normalized(value: Any) -> Any:
    return ModelResponse(result=[value]) if isinstance(value, AIMessage) else value


def _given_flow(handler: Callable[[Any], Any], normalize: Callable[[Any], Any], request: Any) -> Steps[Any]:
    """A handler given by the test, sync or async, in either mode (as the agent's base handlers, interrupts it
    raises are recorded so a wrapper that swallows them does not hide them)."""
    try:
        result = yield Step(handler, None, request, blocking=False)
        if isinstance(result, Awaitable):
            result = yield Step(_run_awaitable, _await, result)
    except GraphBubbleUp as exc:
        _note_bubble(exc)
        raise
    return normalize(result)


def _run_awaitable(awaitable: Any) -> Any:
    return run_coroutine_sync(awaitable)


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _model_handlers(handler: ModelHandlerLike | None) -> tuple[Callable[..., Any], Callable[..., Awaitable[Any]]]:
    if handler is None:
        return _MODEL_CALL.handlers()
    given = handler

    def base(request: ModelRequest[Any]) -> Any:
        return run_sync(_given_flow(given, _normalized, request))

    async def abase(request: ModelRequest[Any]) -> Any:
        return await run_async(_given_flow(given, _normalized, request))

    return base, abase


def _with_commands(response: ModelResponse[Any], call: CallState) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    if not call.commands:
        return response
    inner_first = sorted(call.commands, reverse=True)
    updates = [pair for depth in inner_first for pair in update_pairs(call.commands[depth])]
    return ExtendedModelResponse(model_response=response, command=Command(update=updates))


def _chain_flow(layers_of: str, middleware: Any, request: Any, handlers: tuple[Any, Any]) -> Steps[Any]:
    pipeline = build_pipeline(_as_list(middleware), client_tools=(), validate_jumps=False)
    chain, achain = compose(getattr(pipeline, layers_of), *handlers)
    return (yield from call_flow(chain, achain, request))


def run_model_chain(
    middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]],
    request: ModelRequest[Any],
    handler: ModelHandlerLike | None = None,
) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """Run ``modify_model_request`` and ``wrap_model_call`` of ``middleware`` (first = outermost) around ``handler``
    (default: call ``request.model`` bound as an agent binds it: tools, structured tools, ``tool_choice``,
    ``model_settings``). Returns the response the outermost layer produced; when wrappers returned
    ``ExtendedModelResponse``s, an ``ExtendedModelResponse`` whose command holds all their updates, inner first
    (the order an agent applies them in)."""
    return _with_commands(*run_sync(_chain_flow("model_layers", middleware, request, _model_handlers(handler))))


async def arun_model_chain(
    middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]],
    request: ModelRequest[Any],
    handler: ModelHandlerLike | None = None,
) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """Async twin of :func:`run_model_chain` (``handler`` may be sync or async)."""
    flow = _chain_flow("model_layers", middleware, request, _model_handlers(handler))
    return _with_commands(*await run_async(flow))


ToolHandlerLike = Callable[[ToolCallRequest], "ToolMessage | Command[Any]"]


def _invoke_tool(request: ToolCallRequest) -> Any:
    if request.tool is None:
        raise ValueError(f"run_tool_chain: no tool for call {request.tool_call['name']!r} and no handler given")
    return request.tool.invoke({**request.tool_call, "type": "tool_call"})


async def _ainvoke_tool(request: ToolCallRequest) -> Any:
    if request.tool is None:
        raise ValueError(f"run_tool_chain: no tool for call {request.tool_call['name']!r} and no handler given")
    return await request.tool.ainvoke({**request.tool_call, "type": "tool_call"})


def _tool_handlers(handler: ToolHandlerLike | None) -> tuple[Callable[..., Any], Callable[..., Awaitable[Any]]]:
    def base(request: ToolCallRequest) -> Any:
        if handler is None:
            return run_sync(_tool_flow(request))
        return run_sync(_given_flow(handler, _same, request))

    async def abase(request: ToolCallRequest) -> Any:
        if handler is None:
            return await run_async(_tool_flow(request))
        return await run_async(_given_flow(handler, _same, request))

    return base, abase


def _tool_flow(request: ToolCallRequest) -> Steps[Any]:
    try:
        return (yield Step(_invoke_tool, _ainvoke_tool, request))
    except GraphBubbleUp as exc:
        _note_bubble(exc)
        raise


def _same(value: Any) -> Any:
    return value


def run_tool_chain(
    middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]],
    request: ToolCallRequest,
    handler: ToolHandlerLike | None = None,
) -> ToolMessage | Command[Any]:
    """Run ``before_tool``/``wrap_tool_call``/``after_tool`` of ``middleware`` around ``handler`` (default: invoke
    ``request.tool``)."""
    result: ToolMessage | Command[Any] = run_sync(
        _chain_flow("tool_layers", middleware, request, _tool_handlers(handler))
    )[0]
    return result


async def arun_tool_chain(
    middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]],
    request: ToolCallRequest,
    handler: ToolHandlerLike | None = None,
) -> ToolMessage | Command[Any]:
    """Async twin of :func:`run_tool_chain`."""
    flow = _chain_flow("tool_layers", middleware, request, _tool_handlers(handler))
    result: ToolMessage | Command[Any] = (await run_async(flow))[0]
    return result
