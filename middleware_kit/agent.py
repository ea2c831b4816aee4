"""``create_agent``: the public entry point. Thin: validate the arguments, then pipeline -> graph -> compile."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer
from typing_extensions import TypeVar

from middleware_kit._compat import StateLike, hide_from_streams
from middleware_kit.context import install_context_check
from middleware_kit.errors import AgentArgumentError, MiddlewareConfigError
from middleware_kit.graph import build_graph
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.models import resolve_model
from middleware_kit.pipeline import Pipeline, build_pipeline
from middleware_kit.plan import MiddlewarePlan, build_plan
from middleware_kit.schema import MergedSchema, merge_state_schemas
from middleware_kit.structured_output import to_strategy

if TYPE_CHECKING:
    from middleware_kit.run_control import RunControl

__all__ = ["create_agent"]

ContextT = TypeVar("ContextT", bound="StateLike | None", default=Any)
"""The agent's ``context_schema``, kept on the compiled graph's type so ``invoke(context=...)`` is type-checked."""


def _split_tools(tools: Sequence[Any] | None) -> tuple[list[BaseTool], list[dict[str, Any]]]:
    if tools is None:
        return [], []
    if isinstance(tools, ToolNode):
        raise AgentArgumentError.tool_node_given()
    if isinstance(tools, (BaseTool, dict)) or not isinstance(tools, Sequence):
        raise AgentArgumentError.tools_not_a_list(tools)
    client: list[BaseTool] = []
    provider: list[dict[str, Any]] = []
    for item in tools:
        if isinstance(item, ToolNode):
            raise AgentArgumentError.tool_node_given(listed=True)
        if isinstance(item, BaseTool):
            client.append(item)
        elif isinstance(item, dict):
            provider.append(item)
        elif callable(item):
            client.append(as_tool(item))
        else:
            raise AgentArgumentError.not_a_tool(item)
    return client, provider


def _system_message(system_prompt: str | SystemMessage | None) -> SystemMessage | None:
    if system_prompt is None or isinstance(system_prompt, SystemMessage):
        return system_prompt
    if isinstance(system_prompt, str):
        return SystemMessage(content=system_prompt)
    raise AgentArgumentError.bad_system_prompt(system_prompt)


def _merged_schema(state_schema: type[Any] | None, pipeline: Pipeline, name: str | None) -> MergedSchema:
    """``AgentState``, ``state_schema`` and every middleware's ``state_schema``, merged; the messages reducer behind
    the agent's message guards."""
    sources: list[tuple[str, type[Any]]] = []
    if state_schema is not None:
        sources.append(("create_agent", state_schema))
    for mw in pipeline.middleware:
        schema = getattr(mw, "state_schema", None)
        if schema is not None:
            sources.append((mw.name, schema))
    schema_name = "".join(ch for ch in (name or "Agent").title() if ch.isalnum()) or "Agent"
    guards = pipeline.guards
    return merge_state_schemas(sources, name=schema_name, messages_reducer=guards.reducer() if guards else None)


def _check_interrupt_nodes(nodes: list[str], before: list[str] | None, after: list[str] | None) -> None:
    for option, names in (("interrupt_before", before), ("interrupt_after", after)):
        unknown = [n for n in names or () if n != "*" and n not in nodes]
        if unknown:
            raise MiddlewareConfigError.unknown_nodes(option, unknown, nodes)


def _stream_transformers(pipeline: Pipeline, extra: Sequence[Any]) -> list[Any]:
    """LangGraph's ``ToolCallTransformer``, then each middleware's ``transformers`` (list order), then ``extra``: the
    stream transformer factories of ``stream_events(version="v3")``, in LangChain 1.5's order."""
    from langgraph.prebuilt import ToolCallTransformer

    factories = [*((mw.name, f) for mw in pipeline.middleware for f in mw.transformers), *(("create_agent", f)
                                                                                          for f in extra)]
    for owner, factory in factories:
        if not callable(factory):
            raise AgentArgumentError.not_a_transformer(owner, factory)
    return [ToolCallTransformer, *(f for _, f in factories)]


def create_agent(
    model: str | BaseChatModel,
    tools: Sequence[BaseTool | Callable[..., Any] | dict[str, Any]] | None = None,
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[AgentMiddleware[Any, Any]] = (),
    response_format: Any = None,
    state_schema: type[Any] | None = None,
    context_schema: type[ContextT] | None = None,
    checkpointer: Checkpointer = None,
    store: BaseStore | None = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    debug: bool = False,
    name: str | None = None,
    run_control: RunControl | None = None,
    transformers: Sequence[Callable[[tuple[str, ...]], Any]] = (),
) -> CompiledStateGraph[Any, ContextT, Any, Any]:
    """Build an agent: a compiled LangGraph graph running ``model`` and ``tools`` through ``middleware``.

    The first middleware in the list is the outermost layer of the onion. Everything is validated and composed
    here, once; the result has ``invoke``/``ainvoke``/``stream``/``astream`` like any compiled graph, plus
    ``middleware_plan`` (print it to see the order of every hook).

    Args:
        model: A ``BaseChatModel`` instance, or a model string (``"openai:gpt-4o"``, ``"gpt-4o"``) resolved through
            its provider package by :func:`middleware_kit.models.resolve_model` (no ``langchain`` dependency).
        tools: Tools the model may call (``BaseTool``s, functions, or provider tool dicts).
        system_prompt: Sent first on every model call, never stored in state.
        middleware: ``AgentMiddleware`` instances, outermost first.
        response_format: Structured output: ``ToolStrategy(schema)`` or a bare schema (pydantic model, dataclass,
            TypedDict, JSON schema dict with a ``title``; wrapped in a ``ToolStrategy``). The model is offered a
            structured tool; when it calls it, the parsed object lands in ``result["structured_response"]`` and the
            run ends (after any regular tools called in the same message). On every ``ModelRequest`` as
            ``response_format`` (a wrapper may override it).
        state_schema: A TypedDict extending ``AgentState`` with extra state keys.
        context_schema: The type of ``invoke(..., context=...)`` (dataclass, pydantic model or TypedDict).
        checkpointer, store, interrupt_before, interrupt_after, debug, name: passed to LangGraph's ``compile``.
        run_control: A :class:`middleware_kit.run_control.RunControl`: one run per thread, resumes applied exactly
            once, a deadline, cancellation (see docs/production.md). The agent is then a ``ControlledAgent`` and its
            middleware list gets ``RunControlMiddleware`` first and ``RunControlGuard`` last.
        transformers: Stream transformer factories (LangGraph's ``StreamTransformer`` classes) for
            ``stream_events(version="v3")``, registered after ``ToolCallTransformer`` and every middleware's
            ``transformers``, as in LangChain 1.5.
    """
    if run_control is not None:
        from middleware_kit.run_control import controlled_middleware

        middleware = controlled_middleware(middleware)
    if isinstance(model, str):
        model = resolve_model(model)  # "openai:gpt-4o", "gpt-4o": through the provider package, as init_chat_model
    if not isinstance(model, BaseChatModel):
        raise AgentArgumentError.not_a_chat_model(model)
    client_tools, provider_tools = _split_tools(tools)
    system_message = _system_message(system_prompt)
    strategy = to_strategy(response_format)
    pipeline = build_pipeline(middleware, client_tools=client_tools)

    guards = pipeline.guards
    merged = _merged_schema(state_schema, pipeline, name)

    if context_schema is not None and not isinstance(context_schema, type):
        raise MiddlewareConfigError.context_schema_not_a_class(context_schema)

    graph = build_graph(
        model=model,
        client_tools=client_tools,
        provider_tools=provider_tools,
        pipeline=pipeline,
        schema=merged,
        system_message=system_message,
        response_format=strategy,
        context_schema=context_schema,
    )
    _check_interrupt_nodes(graph.nodes, interrupt_before, interrupt_after)
    compiled = graph.builder.compile(
        checkpointer=checkpointer,
        store=store,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        debug=debug,
        name=name,
        transformers=_stream_transformers(pipeline, transformers),
    )
    # private state (PrivateStateAttr/OmitFromOutput, jump_to) never reaches a stream; decided once, free per call
    hide_from_streams(compiled, compiled.output_channels)
    guards.install(compiled)
    install_context_check(compiled)
    plan: MiddlewarePlan = build_plan(
        name or "LangGraph",
        pipeline,
        graph.node_of,
        graph.nodes,
        lambda: compiled.get_graph().draw_mermaid(),
        has_tool_node="tools" in graph.nodes,
    )
    compiled.middleware_plan = plan  # type: ignore[attr-defined]
    if run_control is not None:
        from middleware_kit.run_control import with_run_control

        return with_run_control(compiled, run_control)
    return compiled

