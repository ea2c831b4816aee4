"""``create_agent``: the public entry point. Thin: validate the arguments, then pipeline -> graph -> compile."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer
from typing_extensions import TypeVar

from middleware_kit._engine.compat import StateLike
from middleware_kit._engine.graph import build_graph
from middleware_kit._engine.inheritance import Frame, own_frame
from middleware_kit._engine.pipeline import Pipeline, build_pipeline
from middleware_kit._engine.private_state import hide_from_streams
from middleware_kit._engine.routing import install_tool_task_input
from middleware_kit._engine.schema import MergedSchema, merge_state_schemas
from middleware_kit._engine.tool_node import install_ledger
from middleware_kit.compiled import CompiledAgent
from middleware_kit.errors import AgentArgumentError, MiddlewareConfigError
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.models import resolve_model
from middleware_kit.plan import MiddlewarePlan, build_plan
from middleware_kit.structured_output import declared_format, setup_strategy, supports_provider_strategy

if TYPE_CHECKING:
    from langgraph.cache.base import BaseCache

    from middleware_kit.ledger import Ledger
    from middleware_kit.run_control import RunControl

__all__ = ["create_agent"]


def __getattr__(name: str) -> Any:
    """``_supports_provider_strategy`` (LangChain's name): whether a model gets ``ProviderStrategy`` for a bare-schema
    ``response_format``. Looked up here on every model call, so code written for LangChain can patch
    ``langchain.agents.factory._supports_provider_strategy``; served by this hook (not a global), so it is still
    there after ``mock.patch`` deletes the patched name on exit."""
    if name == "_supports_provider_strategy":
        return supports_provider_strategy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
    guard = functools.partial(guards.value, runtime=None) if guards else None
    return merge_state_schemas(sources, name=schema_name, messages_guard=guard)


def _check_interrupt_nodes(nodes: list[str], before: list[str] | None, after: list[str] | None) -> None:
    for option, names in (("interrupt_before", before), ("interrupt_after", after)):
        unknown = [n for n in names or () if n != "*" and n not in nodes]
        if unknown:
            raise MiddlewareConfigError.unknown_nodes(option, unknown, nodes)


def _stream_transformers(pipeline: Pipeline, extra: Sequence[Any]) -> list[Any]:
    """LangGraph's ``ToolCallTransformer`` and our ``SubagentTransformer`` (``run.subagents``), then each middleware's
    ``transformers`` (list order), then ``extra``: the stream transformer factories of
    ``stream_events(version="v3")``, in LangChain 1.5's order, each once."""
    from langgraph.prebuilt import ToolCallTransformer

    from middleware_kit._engine.subagent_stream import SubagentTransformer

    factories = [*((mw.name, f) for mw in pipeline.middleware for f in mw.transformers), *(("create_agent", f)
                                                                                          for f in extra)]
    for owner, factory in factories:
        if not callable(factory):
            raise AgentArgumentError.not_a_transformer(owner, factory)
    unique: list[Any] = []
    for factory in (ToolCallTransformer, SubagentTransformer, *(f for _, f in factories)):
        if not any(factory is seen for seen in unique):  # listed twice (ToolCallTransformer passed again): once
            unique.append(factory)
    return unique


def _chat_model(model: str | BaseChatModel) -> BaseChatModel:
    if isinstance(model, str):
        model = resolve_model(model)  # "openai:gpt-4o", "gpt-4o": through the provider package, as init_chat_model
    if not isinstance(model, BaseChatModel):
        raise AgentArgumentError.not_a_chat_model(model)
    return model


def _equip(
    compiled: CompiledStateGraph[Any, Any, Any, Any], pipeline: Pipeline, graph: Any, name: str | None,
    own: Frame | None,
) -> CompiledAgent[Any]:
    """The agent: ``compiled`` as a :class:`~middleware_kit.compiled.CompiledAgent`, with its private state hidden
    from streams, its message guards on the input, and its ``middleware_plan``."""
    # private state (PrivateStateAttr/OmitFromOutput, jump_to) never reaches a stream; decided once, free per call
    hide_from_streams(compiled, compiled.output_channels)
    install_tool_task_input(compiled)  # after the streams' mappers: the tool node's wraps theirs
    pipeline.guards.install(compiled)
    plan: MiddlewarePlan = build_plan(
        name or "LangGraph",
        pipeline,
        graph.node_of,
        graph.nodes,
        lambda: compiled.get_graph().draw_mermaid(),
        has_tool_node="tools" in graph.nodes,
        inherited=own.middleware if own is not None else (),
    )
    return CompiledAgent.of(compiled, plan, own)


def _run_config(name: str | None, ledger: Ledger | None) -> RunnableConfig:
    """The agent's default run config, as LangChain 1.5's: a recursion limit of 9,999 (an agent loop is bounded by
    its middleware, not by LangGraph's 25 steps), LangSmith's integration tag, and ``lc_agent_name`` (the agent's
    name in every streamed chunk's metadata, so a UI tells a subagent's tokens from its parent's). With the ledger
    off, the key that turns off the recording of middleware model calls too (only ever set to turn it off, so a
    sub-agent's own ``ledger=False`` is not overridden by its caller)."""
    metadata: dict[str, Any] = {"ls_integration": "langchain_create_agent"}
    if name:
        metadata["lc_agent_name"] = name
    config: RunnableConfig = {"recursion_limit": 9_999, "metadata": metadata}
    if ledger is None:
        from middleware_kit.ledger.model_calls import LEDGER_OFF

        config["configurable"] = {LEDGER_OFF: True}
    return config


def _run_control(given: object, checkpointer: Checkpointer) -> RunControl | None:
    """The agent's run control: ``RunControl()`` by default when it has a checkpointer of its own (a subgraph that
    uses its parent's, ``checkpointer=True``/``None``, runs under the parent's lease); None when off."""
    from middleware_kit.run_control import RunControl, RunControlConfigError

    if given is False:
        return None
    if isinstance(given, RunControl):
        return given
    if given is None or given is True:
        return RunControl() if given or isinstance(checkpointer, BaseCheckpointSaver) else None
    raise RunControlConfigError(
        f"create_agent(run_control={given!r}): pass a RunControl(...) to tune run control, or False to turn it off "
        f"(it is on by default for an agent with a checkpointer).",
        parameter="run_control",
    )


def _ledger(given: object) -> Ledger | None:
    """The agent's call ledger: ``Ledger()`` by default (active in runs with a checkpointer, its own or a parent's);
    None when off."""
    from middleware_kit.ledger import Ledger, LedgerConfigError

    if given is False:
        return None
    if given is None or given is True:
        return Ledger()
    if isinstance(given, Ledger):
        return given
    raise LedgerConfigError.bad_option(given)


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
    cache: BaseCache[Any] | None = None,
    transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None = None,
    run_control: RunControl | bool | None = None,
    ledger: Ledger | bool | None = None,
) -> CompiledAgent[ContextT]:
    """Build an agent: a compiled LangGraph graph running ``model`` and ``tools`` through ``middleware``.

    The first middleware in the list is the outermost layer of the onion. Everything is validated and composed
    here, once; the result has ``invoke``/``ainvoke``/``stream``/``astream`` like any compiled graph, plus
    ``middleware_plan`` (print it to see the order of every hook).

    Args:
        model: A ``BaseChatModel`` instance, or a model string (``"openai:gpt-4o"``, ``"gpt-4o"``) resolved through
            its provider package by :func:`middleware_kit.models.resolve_model` (no ``langchain`` dependency).
        tools: Tools the model may call (``BaseTool`` instances, functions, or provider tool dicts).
        system_prompt: Sent first on every model call, never stored in state.
        middleware: ``AgentMiddleware`` instances, outermost first.
        response_format: Structured output: ``ToolStrategy(schema)`` (the model is offered a structured tool; when
            it calls it, the parsed object lands in ``result["structured_response"]`` and the run ends, after any
            regular tools called in the same message), ``ProviderStrategy(schema)`` (the provider's native JSON
            mode: the model's final text is parsed), or a bare schema (pydantic model, dataclass, TypedDict, JSON
            schema dict; an ``AutoStrategy``: provider strategy for models known to support it, else tool
            strategy, decided per model call). On every ``ModelRequest`` as ``response_format`` (a wrapper may
            override it).
        state_schema: A TypedDict extending ``AgentState`` with extra state keys.
        context_schema: The type of ``invoke(..., context=...)`` (dataclass, pydantic model or TypedDict).
        checkpointer, store, interrupt_before, interrupt_after, debug, name: passed to LangGraph's ``compile``.
        cache: A LangGraph ``BaseCache`` for node caching (``compile(cache=...)``), as in LangChain 1.5.
        run_control: On by default for an agent with a checkpointer: one run per thread (a second run on a busy
            thread raises ``ThreadBusyError``), resumes applied exactly once, a clear error for a resume that
            answers nothing pending (see docs/production.md). A :class:`middleware_kit.run_control.RunControl`
            tunes it (and adds deadlines and cancellation to an agent without a checkpointer); ``False`` turns it
            off. A controlled agent is a ``ControlledAgent`` whose middleware gets ``RunControlMiddleware`` first
            and ``RunControlGuard`` last.
        ledger: The call ledger, on by default in runs with a checkpointer: each tool call is recorded in the
            checkpointer's database before the tool runs and with its result right after, so a run continued after
            a crash never runs a finished call again, and a call that was in flight pauses the run for a decision
            (see docs/exactly_once.md). A :class:`middleware_kit.ledger.Ledger` tunes it; ``False`` turns it off.
        transformers: Stream transformer factories (LangGraph's ``StreamTransformer`` classes) for
            ``stream_events(version="v3")``, registered after ``ToolCallTransformer`` and every middleware's
            ``transformers``, as in LangChain 1.5.
    """
    control = _run_control(run_control, checkpointer)
    if control is not None:
        from middleware_kit.run_control.middleware import controlled_stack

        middleware = controlled_stack(middleware, control)
    model = _chat_model(model)
    client_tools, provider_tools = _split_tools(tools)
    system_message = _system_message(system_prompt)
    strategy = declared_format(response_format)
    setup = setup_strategy(strategy)
    pipeline = build_pipeline(middleware, client_tools=client_tools,
                              structured_tools=sorted(setup.tool_names) if setup is not None else ())
    if control is not None:
        from middleware_kit.run_control.middleware import without_adjacent_guard

        pipeline = without_adjacent_guard(pipeline)
    own = own_frame(pipeline.middleware, name)  # what runs inside this agent's runs apply (docs/subagents.md)

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
        agent_name=name,
        inherited=own,  # a nested run applies its callers' inherited policies around its chains (the graph's own
        # frame is left out of its callers)
    )
    _check_interrupt_nodes(graph.nodes, interrupt_before, interrupt_after)
    the_ledger = _ledger(ledger)
    install_ledger(graph.builder, the_ledger)
    compiled = graph.builder.compile(
        checkpointer=checkpointer,
        store=store,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        debug=debug,
        name=name,
        cache=cache,
        transformers=_stream_transformers(pipeline, transformers or ()),
    ).with_config(_run_config(name, the_ledger))
    agent = _equip(compiled, pipeline, graph, name, own)
    if control is not None:
        from middleware_kit.run_control.agent import attach_run_control

        return attach_run_control(agent, control)
    return agent

