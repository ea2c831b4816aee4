"""LangGraph assembly: from a :class:`~middleware_kit._engine.pipeline.Pipeline` to a ``StateGraph``. A short loop over
parts
that each do one job:

- :mod:`middleware_kit._engine.layout`: which hooks share a node, names, order, successors (pure, no LangGraph);
- :mod:`middleware_kit._engine.model_call`: binding the model and the base handler of the model chain;
- :mod:`middleware_kit._engine.phases`: running the items of one node (hooks, the model call) and what the node writes;
- :mod:`middleware_kit._engine.routing`: where a run goes after a node, a jump, or the tools;
- :mod:`middleware_kit._engine.tool_node`: the tool node and the tool chain around each call;
- :mod:`middleware_kit._engine.guards`: message guards on every node's output.

Shape (``middleware=[A, B, C]``, every hook present, none interrupting)::

    START -> before_agent -> model -> tools -> model ... -> after_agent -> END
                             (A.before_model, B.before_model, C.before_model, the model call through the
                              wrap chain, C.after_model, B.after_model, A.after_model)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import BaseTool
from langgraph.constants import END, START
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from middleware_kit._engine.chain import ChainCall, Layer, compose
from middleware_kit._engine.compat import node_runnable
from middleware_kit._engine.drive import Step, Steps
from middleware_kit._engine.guards import Guards
from middleware_kit._engine.holdback import Holdback, held
from middleware_kit._engine.inheritance import Frame, callers, inherited_model_chain
from middleware_kit._engine.layout import TOOLS_NODE, NodeSpec, lay_out
from middleware_kit._engine.model_call import ModelCall, model_writes, prepared
from middleware_kit._engine.phases import Item, ModelStep, NodeResult, NodeRunner, NodeStep
from middleware_kit._engine.pipeline import Pipeline
from middleware_kit._engine.private_state import with_private
from middleware_kit._engine.routing import LifecycleRouter, Router, with_goto
from middleware_kit._engine.schema import MergedSchema
from middleware_kit._engine.state import StateSemantics
from middleware_kit._engine.tool_node import tool_node
from middleware_kit._engine.tracing import HookTracing, Once, variant
from middleware_kit.agent_defaults import AgentDefaults
from middleware_kit.structured_output import AutoStrategy, ProviderStrategy, ToolStrategy

__all__ = ["AgentGraph", "build_graph"]


@dataclass
class AgentGraph:
    """The uncompiled graph and what the plan needs to describe it."""

    builder: StateGraph[Any, Any, Any, Any]
    node_of: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(middleware name, phase) -> node name`` for every node hook."""
    nodes: list[str] = field(default_factory=list)
    """Node names in the order a run meets them."""


def build_graph(
    *,
    model: BaseChatModel,
    client_tools: Sequence[BaseTool],
    provider_tools: Sequence[dict[str, Any]],
    pipeline: Pipeline,
    schema: MergedSchema,
    system_message: SystemMessage | None,
    response_format: ToolStrategy[Any] | ProviderStrategy[Any] | AutoStrategy[Any] | None,
    context_schema: type[Any] | None,
    agent_name: str | None = None,
    inherited: Frame | None = None,
) -> AgentGraph:
    """The agent's graph. ``inherited``: the agent's own frame of inherited middleware (None: it has none); run
    inside other agents' runs, it applies theirs (:mod:`~middleware_kit._engine.inheritance`), its own left out."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        schema.state, context_schema=context_schema, input_schema=schema.input, output_schema=schema.output
    )
    semantics = StateSemantics(schema.keys, builder.channels)
    executable: dict[str, BaseTool] = {}
    for tool in (*client_tools, *pipeline.tools):
        executable.setdefault(tool.name, tool)
    holdback = Holdback.for_agent(pipeline.middleware, response_format, pipeline.guards)
    call = ModelCall.build(
        model,
        (*client_tools, *pipeline.tools, *provider_tools),
        response_format,
        system_message,
        executable=frozenset(executable),
        tools_wrapped=pipeline.has_wrap_tool_call,
        nostream=bool(pipeline.guards) and holdback is None,
        guards=pipeline.guards,
        agent_name=agent_name,
        holdback=holdback,
    )
    # Every node and chain in two variants: plain, composed now, and traced (each hook a callback run), composed on
    # the first run with callback handlers (middleware_kit._engine.tracing).
    private = schema.keys - frozenset(builder.schemas[builder.output_schema])  # never in a trace either
    hooks = HookTracing(pipeline.middleware, pipeline.hooks, private)
    owners = tuple(layer.owner for layer in pipeline.model_layers)
    model_step = _model_step(call, hooks.plain_layers(pipeline.model_layers), owners, semantics, inherited,
                             traced=False)
    traced_model_step = Once(
        lambda: _model_step(call, hooks.traced_layers(pipeline.model_layers), owners, semantics, inherited,
                            traced=True)
    )
    callers_of = functools.partial(callers, inherited)
    layout = lay_out(pipeline.phases, model_step, has_tool_node=bool(executable) or pipeline.has_wrap_tool_call)
    router = LifecycleRouter(layout, frozenset(name for name, tool in executable.items() if tool.return_direct))
    defaults = AgentDefaults(call.model, call.system_message, call.default_tools, call.response_format)
    for node in layout.nodes:
        past_loop = any(isinstance(i, NodeStep) and i.hook == "after_agent" for i in node.items)
        ends_run = ("always" if node.next == END else "on_jump") if past_loop else None
        runner = NodeRunner(hooks.plain_items(node.items), semantics, defaults=defaults, ends_run=ends_run)
        traced = Once(functools.partial(_traced_runner, hooks, node.items, model_step, traced_model_step, runner,
                                        ends_run))
        _add_node(builder, node, runner, traced, router, pipeline.guards, holdback, callers_of)
    if layout.has_tool_node:
        tools = tool_node(list(executable.values()), hooks.plain_layers(pipeline.tool_layers), pipeline.guards,
                          traced_layers=hooks.traced_chain(pipeline.tool_layers), inherited=inherited,
                          route=router.after_tools_in_run)
        builder.add_node(TOOLS_NODE, tools, destinations=tuple(sorted({layout.loop_entry, layout.end_entry})))
    builder.add_edge(START, layout.agent_entry)
    return AgentGraph(builder, layout.node_of, list(layout.order))


def _model_step(
    call: ModelCall, layers: Sequence[Layer[Any, Any]], owners: tuple[str, ...], semantics: StateSemantics,
    inherited: Frame | None, *, traced: bool,
) -> ModelStep:
    """The model call as an item of the ``model`` node: the request, the chain of ``layers`` (inside its callers'
    inherited policies when the run is nested in other agents' runs), the writes."""
    chain, achain = compose(layers, *call.handlers(traced))
    nested = inherited_model_chain(inherited, chain, achain)

    def flow(view: Any, runtime: Runtime[Any]) -> Steps[tuple[list[dict[str, Any]], list[Any] | None]]:
        __tracebackhide__ = True
        request, fix = prepared(call, view, runtime)
        chains = nested.chains()
        if chains is None and not layers:  # no chain to run: the model call itself, in this node's driver
            return model_writes((yield from call.flow(request, traced)), {}, fix, owners, semantics)
        sync_h, async_h = chains or (chain, achain)
        with ChainCall() as state:
            response = yield Step(sync_h, async_h, request)
        return model_writes(response, state.commands, fix, owners, semantics)

    return ModelStep(flow)


def _traced_runner(
    hooks: HookTracing, items: Sequence[Item], model: ModelStep, traced_model: Once[ModelStep], plain: NodeRunner,
    ends_run: str | None,
) -> NodeRunner:
    """The traced variant of a node's runner (made on the node's first run with callback handlers)."""
    traced = hooks.traced_items(items, model, traced_model)
    return NodeRunner(traced, plain.semantics, defaults=plain.defaults, ends_run=ends_run)


def _add_node(
    builder: StateGraph[Any, Any, Any, Any], node: NodeSpec, runner: NodeRunner, traced: Once[NodeRunner],
    router: Router, guards: Guards, holdback: Holdback | None = None,
    callers_of: Callable[[], Sequence[Any]] = tuple,
) -> None:
    """One node of hooks: run its items (``traced()`` when the run has callback handlers), route, guard what it
    writes."""
    jumps = frozenset(j for step in runner.steps for j in step.can_jump_to)
    command_mode = bool(jumps) or node.next is None
    output = runner.semantics.output
    # An after_agent hook may only jump to "end": past the loop that is END itself (the rest of the after_agent hooks
    # are skipped, as in LangChain), not the layout's end entry, which is the first after_agent node.
    past_loop = any(isinstance(step, NodeStep) and step.hook == "after_agent" for step in runner.steps)

    def finish(result: NodeResult, runtime: Runtime[Any]) -> Any:
        __tracebackhide__ = True
        if not command_mode:
            return guards.update(output(result.writes), runtime)
        writes, closing = result.writes, list[Any]()
        goto: Any = node.next
        if result.jump is not None:
            goto, closing = (END, []) if past_loop else router.jump(result.jump, result.view)
        elif goto is None:
            goto, closing = router.after_model(result.tail if result.tail is not None else result.view["messages"])
        if closing:
            writes = [*writes, {"messages": closing}]
        return guards.update(with_goto(output(writes), goto), runtime)

    def run(state: Any, runtime: Runtime[Any]) -> Any:
        __tracebackhide__ = True
        return finish(variant(runner, traced).run(with_private(state), runtime), runtime)

    async def arun(state: Any, runtime: Runtime[Any]) -> Any:
        __tracebackhide__ = True
        return finish(await variant(runner, traced).arun(with_private(state), runtime), runtime)

    # The model node: its streamed answer waits for this node's verdict when the agent, or a caller whose run it is
    # nested in, holds it back (docs/streaming.md).
    holds = any(isinstance(item, ModelStep) for item in node.items)
    func, afunc = held(holdback, callers_of, run, arun) if holds else (run, arun)
    if not command_mode:
        builder.add_node(node.name, node_runnable(func, afunc, node.name))
        builder.add_edge(node.name, node.next or END)
        return
    destinations = tuple(sorted({node.next or END, END})) if past_loop else router.destinations(node.next, jumps)
    builder.add_node(node.name, node_runnable(func, afunc, node.name), destinations=destinations)


