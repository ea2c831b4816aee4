"""Run one hook, or one chain of wrappers, without building a graph.

These use the same engine as ``create_agent`` (validation, ordering, sync/async bridging), so a middleware that
passes here behaves the same inside an agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Command, StreamWriter

from middleware_kit.chain import CallState, call_async, call_sync, compose
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.hooks import HOOKS
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.phases import NodeStep, StateSemantics, bridge_node_hook
from middleware_kit.pipeline import build_pipeline, defined_hooks
from middleware_kit.schema import merge_state_schemas
from middleware_kit.structured_output import ToolStrategy, parse_model_output, to_strategy
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
        raise MiddlewareConfigError(
            f"run_hook runs node hooks (before_agent, before_model, after_model, after_agent); got {hook!r}. Use "
            f"run_model_chain or run_tool_chain for the others.",
            middleware=middleware.name,
            hook=hook,
        )
    impl = defined_hooks(middleware).get(hook)
    if impl is None:
        return None
    run_sync, run_async = bridge_node_hook(impl.sync, impl.async_)
    step = NodeStep(impl.owner, hook, impl.mode, run_sync, run_async, impl.can_jump_to, impl.may_interrupt)
    keys = merge_state_schemas([(middleware.name, middleware.state_schema)]).keys
    return step, StateSemantics(keys, {})


def run_hook(
    middleware: AgentMiddleware[Any, Any], hook: str, state: Any, runtime: Runtime[Any] | None = None
) -> dict[str, Any] | None:
    """Run one node hook as an agent would (async twins driven to completion) and validate what it returns."""
    found = _node_step(middleware, hook)
    if found is None:
        return None
    step, semantics = found
    result = step.run_sync(state, runtime if runtime is not None else make_runtime())
    if result is None:
        return None
    semantics.check(step, result)
    return dict(result)


async def arun_hook(
    middleware: AgentMiddleware[Any, Any], hook: str, state: Any, runtime: Runtime[Any] | None = None
) -> dict[str, Any] | None:
    """Async twin of :func:`run_hook` (sync-only hooks run in a worker thread, as under ``ainvoke``)."""
    from middleware_kit.bridge import run_sync_in_thread

    found = _node_step(middleware, hook)
    if found is None:
        return None
    step, semantics = found
    rt = runtime if runtime is not None else make_runtime()
    if step.run_async is not None:
        result = await step.run_async(state, rt)
    else:
        result = await run_sync_in_thread(step.run_sync, state, rt)
    if result is None:
        return None
    semantics.check(step, result)
    return dict(result)


def _as_list(middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]]) -> list[Any]:
    return [middleware] if isinstance(middleware, AgentMiddleware) else list(middleware)


ModelHandlerLike = Callable[[ModelRequest[Any]], "ModelResponse[Any] | AIMessage"]


def _model_base(handler: ModelHandlerLike | None) -> tuple[Callable[..., Any], Callable[..., Awaitable[Any]]]:
    def messages_of(request: ModelRequest[Any]) -> list[BaseMessage]:
        head = [request.system_message] if request.system_message is not None else []
        return [*head, *request.messages]

    def normalize(value: Any) -> ModelResponse[Any]:
        return ModelResponse(result=[value]) if isinstance(value, AIMessage) else value

    def bound(request: ModelRequest[Any]) -> tuple[Any, ToolStrategy[Any] | None]:
        # As in an agent: the structured tools after the regular ones, tool use forced unless chosen.
        strategy = to_strategy(request.response_format)
        tools = [*request.tools, *(strategy.tools if strategy is not None else ())]
        if not tools:
            return request.model, strategy
        choice = request.tool_choice if request.tool_choice is not None or strategy is None else "any"
        kwargs = {"tool_choice": choice} if choice is not None else {}
        return request.model.bind_tools(tools, **kwargs), strategy

    def parsed(message: Any, strategy: ToolStrategy[Any] | None) -> ModelResponse[Any]:
        return normalize(message) if strategy is None else parse_model_output(message, strategy)

    def base(request: ModelRequest[Any]) -> ModelResponse[Any]:
        if handler is not None:
            return normalize(handler(request))
        model, strategy = bound(request)
        return parsed(model.invoke(messages_of(request)), strategy)

    async def abase(request: ModelRequest[Any]) -> ModelResponse[Any]:
        if handler is not None:
            result = handler(request)
            if isinstance(result, Awaitable):
                result = await result
            return normalize(result)
        model, strategy = bound(request)
        return parsed(await model.ainvoke(messages_of(request)), strategy)

    return base, abase


def _with_commands(response: ModelResponse[Any], call: CallState) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    if not call.commands:
        return response
    inner_first = sorted(call.commands, reverse=True)
    updates = [pair for depth in inner_first for pair in call.commands[depth]._update_as_tuples()]
    return ExtendedModelResponse(model_response=response, command=Command(update=updates))


def run_model_chain(
    middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]],
    request: ModelRequest[Any],
    handler: ModelHandlerLike | None = None,
) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """Run ``modify_model_request`` and ``wrap_model_call`` of ``middleware`` (first = outermost) around ``handler``
    (default: call ``request.model``). Returns the response the outermost layer produced; when wrappers returned
    ``ExtendedModelResponse``s, an ``ExtendedModelResponse`` whose command holds all their updates, inner first
    (the order an agent applies them in)."""
    pipeline = build_pipeline(_as_list(middleware), client_tools=(), validate_jumps=False)
    chain, _ = compose(pipeline.model_layers, *_model_base(handler))
    response, call = call_sync(chain, request)
    return _with_commands(response, call)


async def arun_model_chain(
    middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]],
    request: ModelRequest[Any],
    handler: ModelHandlerLike | None = None,
) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """Async twin of :func:`run_model_chain` (``handler`` may be sync or async)."""
    pipeline = build_pipeline(_as_list(middleware), client_tools=(), validate_jumps=False)
    _, achain = compose(pipeline.model_layers, *_model_base(handler))
    response, call = await call_async(achain, request)
    return _with_commands(response, call)


ToolHandlerLike = Callable[[ToolCallRequest], "ToolMessage | Command[Any]"]


def _tool_base(handler: ToolHandlerLike | None) -> tuple[Callable[..., Any], Callable[..., Awaitable[Any]]]:
    def run(request: ToolCallRequest) -> Any:
        if handler is not None:
            return handler(request)
        if request.tool is None:
            raise ValueError(f"run_tool_chain: no tool for call {request.tool_call['name']!r} and no handler given")
        output = request.tool.invoke({**request.tool_call, "type": "tool_call"})
        return output

    async def arun(request: ToolCallRequest) -> Any:
        if handler is not None:
            result = handler(request)
            if isinstance(result, Awaitable):
                result = await result
            return result
        if request.tool is None:
            raise ValueError(f"run_tool_chain: no tool for call {request.tool_call['name']!r} and no handler given")
        return await request.tool.ainvoke({**request.tool_call, "type": "tool_call"})

    return run, arun


def run_tool_chain(
    middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]],
    request: ToolCallRequest,
    handler: ToolHandlerLike | None = None,
) -> ToolMessage | Command[Any]:
    """Run ``before_tool``/``wrap_tool_call``/``after_tool`` of ``middleware`` around ``handler`` (default: invoke
    ``request.tool``)."""
    pipeline = build_pipeline(_as_list(middleware), client_tools=(), validate_jumps=False)
    chain, _ = compose(pipeline.tool_layers, *_tool_base(handler))
    result: ToolMessage | Command[Any] = call_sync(chain, request)[0]
    return result


async def arun_tool_chain(
    middleware: AgentMiddleware[Any, Any] | Sequence[AgentMiddleware[Any, Any]],
    request: ToolCallRequest,
    handler: ToolHandlerLike | None = None,
) -> ToolMessage | Command[Any]:
    """Async twin of :func:`run_tool_chain`."""
    pipeline = build_pipeline(_as_list(middleware), client_tools=(), validate_jumps=False)
    _, achain = compose(pipeline.tool_layers, *_tool_base(handler))
    result: ToolMessage | Command[Any] = (await call_async(achain, request))[0]
    return result
