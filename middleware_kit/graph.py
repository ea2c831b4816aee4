"""LangGraph assembly: from a :class:`~middleware_kit.pipeline.Pipeline` to a ``StateGraph``.

Shape (``middleware=[A, B, C]``, every phase present)::

    START -> before_agent -> before_model -> model -> after_model -> tools -> before_model ... -> after_agent -> END

Each phase is one fused node (a may-interrupt hook splits it, keeping a node of its own). Nodes whose hooks may
jump, and the node that decides between tools and the end, route with ``Command(goto=...)``; the others have static
edges. Tool calls are dispatched with one ``Send`` per pending call, so parallel calls are separate tasks: an
interrupt in one does not re-run the others on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.constants import END, START
from langgraph.errors import GraphBubbleUp
from langgraph.graph import StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt.tool_node import ToolCallRequest as LangGraphToolCallRequest
from langgraph.prebuilt.tool_node import ToolNode
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from middleware_kit.chain import _note_bubble, call_async, call_sync, compose
from middleware_kit.errors import UnknownToolError
from middleware_kit.hooks import NODE_PHASES
from middleware_kit.pairing import closing_messages, last_ai_index, pending_tool_calls, repair_dangling
from middleware_kit.phases import PhaseRunner, StateSemantics, strip_private
from middleware_kit.pipeline import Pipeline
from middleware_kit.schema import MergedSchema
from middleware_kit.types import ModelRequest, ModelResponse, ToolCallRequest

__all__ = ["AgentGraph", "build_graph"]

MODEL_NODE = "model"
TOOLS_NODE = "tools"

_EXECUTE: ContextVar[Callable[[LangGraphToolCallRequest], Any] | None] = ContextVar(
    "middleware_kit_tool_execute", default=None
)


@dataclass
class AgentGraph:
    """The uncompiled graph and what the plan needs to describe it."""

    builder: StateGraph[Any, Any, Any, Any]
    node_of: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(middleware name, phase) -> node name`` for every node hook."""
    nodes: list[str] = field(default_factory=list)
    """Node names in the order a run meets them."""


def _group_name(phase: str, steps: Sequence[Any], multi_index: int) -> str:
    if len(steps) == 1:
        return f"{steps[0].owner}.{phase}"
    return phase if multi_index == 1 else f"{phase}_{multi_index}"


def build_graph(
    *,
    model: BaseChatModel,
    client_tools: Sequence[BaseTool],
    provider_tools: Sequence[dict[str, Any]],
    pipeline: Pipeline,
    schema: MergedSchema,
    system_message: SystemMessage | None,
    response_format: Any,
    context_schema: type[Any] | None,
) -> AgentGraph:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        schema.state,
        context_schema=context_schema,
        input_schema=schema.input,
        output_schema=schema.output,
    )
    semantics = StateSemantics(schema.keys, builder.channels)
    graph = AgentGraph(builder)

    executable: dict[str, BaseTool] = {}
    for tool in (*client_tools, *pipeline.tools):
        executable.setdefault(tool.name, tool)
    has_tool_node = bool(executable) or pipeline.has_wrap_tool_call
    return_direct = frozenset(name for name, tool in executable.items() if tool.return_direct)

    # -- node names, in run order ------------------------------------------------------------------------------
    names: dict[str, list[str]] = {}
    for phase in NODE_PHASES:
        multi = 0
        phase_names = []
        for steps in pipeline.phases[phase]:
            if len(steps) > 1:
                multi += 1
            node = _group_name(phase, steps, multi)
            phase_names.append(node)
            for step in steps:
                graph.node_of[(step.owner, phase)] = node
        names[phase] = phase_names

    loop_entry = names["before_model"][0] if names["before_model"] else MODEL_NODE
    end_entry = names["after_agent"][0] if names["after_agent"] else END
    agent_entry = names["before_agent"][0] if names["before_agent"] else loop_entry
    graph.nodes = [*names["before_agent"], *names["before_model"], MODEL_NODE, *names["after_model"]]
    if has_tool_node:
        graph.nodes.append(TOOLS_NODE)
    graph.nodes.extend(names["after_agent"])

    def route_model_output(messages: Sequence[Any]) -> tuple[Any, list[ToolMessage]]:
        """After the model (and after_model hooks): run pending tool calls, loop, or end (closing open calls)."""
        i = last_ai_index(messages)
        if i < 0 or not messages[i].tool_calls:
            return end_entry, []
        pending = pending_tool_calls(messages)
        if pending and has_tool_node:
            return [Send(TOOLS_NODE, [call]) for call in pending], []
        if pending:
            # The model called tools although the agent has none to run: end, closing the calls.
            return end_entry, closing_messages(pending, "this agent has no tools to run.")
        return loop_entry, []  # every call was answered by a middleware: let the model see the answers

    def resolve_jump(jump: str, view: Any) -> tuple[Any, list[ToolMessage]]:
        if jump == "model":
            return loop_entry, []
        if jump == "tools":
            pending = pending_tool_calls(view.get("messages", ()))
            return ([Send(TOOLS_NODE, [c]) for c in pending] or loop_entry), []
        closing = closing_messages(pending_tool_calls(view.get("messages", ())), "the run ended before it ran.")
        return end_entry, closing

    def with_goto(output: Any, goto: Any) -> Any:
        if output is None:
            return Command(goto=goto)
        if isinstance(output, dict):
            return Command(update=output, goto=goto)
        return [*output, Command(goto=goto)]

    # -- phase nodes -------------------------------------------------------------------------------------------
    def add_phase_node(node: str, runner: PhaseRunner, default: str | None, routes: bool) -> None:
        """``default``: the static next node; None when this node decides between tools and the end."""
        jumps = frozenset(j for step in runner.steps for j in step.can_jump_to)
        command_mode = bool(jumps) or default is None
        output = semantics.output

        def finish(writes: list[dict[str, Any]], jump: str | None, view: Any) -> Any:
            if not command_mode:
                return output(writes)
            closing: list[ToolMessage] = []
            if jump is None and default is not None:
                goto: Any = default
            elif jump is None:
                goto, closing = route_model_output(view["messages"])
            else:
                goto, closing = resolve_jump(jump, view)
            if closing:
                writes = [*writes, {"messages": closing}]
            return with_goto(output(writes), goto)

        def run_node(state: Any, runtime: Runtime[Any]) -> Any:
            return finish(*runner.run(state, runtime))

        async def arun_node(state: Any, runtime: Runtime[Any]) -> Any:
            return finish(*await runner.arun(state, runtime))

        if command_mode:
            dests: set[str] = set()
            if default is not None:
                dests.add(default)
            if default is None or routes:
                dests.update({loop_entry, end_entry})
                if has_tool_node:
                    dests.add(TOOLS_NODE)
            if "end" in jumps:
                dests.add(end_entry)
            if "model" in jumps:
                dests.add(loop_entry)
            if "tools" in jumps:
                dests.update({TOOLS_NODE, loop_entry})
            builder.add_node(node, _runnable(run_node, arun_node, node), destinations=tuple(sorted(dests)))
        else:
            builder.add_node(node, _runnable(run_node, arun_node, node))
            builder.add_edge(node, default or END)

    def chain_nodes(phase: str, after: str | None) -> None:
        phase_names = names[phase]
        for k, steps in enumerate(pipeline.phases[phase]):
            nxt = phase_names[k + 1] if k + 1 < len(phase_names) else after
            add_phase_node(phase_names[k], PhaseRunner(steps, semantics), nxt, routes=nxt is None)

    chain_nodes("before_agent", loop_entry)
    chain_nodes("before_model", MODEL_NODE)
    chain_nodes("after_model", None)
    chain_nodes("after_agent", END)

    # -- model node --------------------------------------------------------------------------------------------
    default_tools: tuple[BaseTool | dict[str, Any], ...] = (*client_tools, *pipeline.tools, *provider_tools)
    bound_default = model.bind_tools(list(default_tools)) if default_tools else model

    def bound_model(request: ModelRequest[Any]) -> Any:
        if (
            request.model is model
            and request.tools is default_tools
            and request.tool_choice is None
            and not request.model_settings
        ):
            return bound_default
        if request.tools is not default_tools and not pipeline.has_wrap_tool_call:
            unknown = [
                t.name for t in request.tools if isinstance(t, BaseTool) and t.name not in executable
            ]
            if unknown:
                raise UnknownToolError(
                    f"Middleware added tools the agent cannot execute. Unknown tools: {unknown}. Register them "
                    f"with create_agent(tools=[...]) or a middleware's `tools`, or implement wrap_tool_call to "
                    f"execute them (request.tool is None there; call handler(request.override(tool=...))).",
                    middleware="create_agent",
                    hook="wrap_model_call",
                )
        chat = request.model
        if request.tools:
            kwargs: dict[str, Any] = dict(request.model_settings)
            if request.tool_choice is not None:
                kwargs["tool_choice"] = request.tool_choice
            return chat.bind_tools(list(request.tools), **kwargs)
        if request.model_settings:
            return chat.bind(**request.model_settings)
        return chat

    def model_input(request: ModelRequest[Any]) -> list[AnyMessage]:
        if request.system_message is None:
            return list(request.messages)
        return [request.system_message, *request.messages]

    def base_sync(request: ModelRequest[Any]) -> ModelResponse[Any]:
        try:
            message = bound_model(request).invoke(model_input(request))
        except GraphBubbleUp as exc:
            _note_bubble(exc)
            raise
        return ModelResponse(result=[message])

    async def base_async(request: ModelRequest[Any]) -> ModelResponse[Any]:
        try:
            message = await bound_model(request).ainvoke(model_input(request))
        except GraphBubbleUp as exc:
            _note_bubble(exc)
            raise
        return ModelResponse(result=[message])

    model_chain, amodel_chain = compose(pipeline.model_layers, base_sync, base_async)
    after_model_entry = names["after_model"][0] if names["after_model"] else None

    def prepare(state: Any, runtime: Runtime[Any]) -> tuple[ModelRequest[Any], list[AnyMessage] | None]:
        view = strip_private(state)
        messages = view["messages"]
        repaired = repair_dangling(messages)
        request: ModelRequest[Any] = ModelRequest(
            model=model,
            messages=repaired if repaired is not None else messages,
            system_message=system_message,
            tools=default_tools,
            response_format=response_format,
            state=view,
            runtime=runtime,
        )
        return request, repaired

    def model_output(response: ModelResponse[Any], commands: dict[int, Command[Any]], repaired: Any) -> Any:
        new_messages = list(response.result)
        update: dict[str, Any] = {
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *repaired, *new_messages]
            if repaired is not None
            else new_messages
        }
        if response.structured_response is not None:
            update["structured_response"] = response.structured_response
        out: Any = update
        tail: list[Any] = new_messages
        if commands:
            extra = [commands[d] for d in sorted(commands, reverse=True)]  # inner commands before outer ones
            out = [Command(update=update), *extra]
            for cmd in extra:
                for key, value in cmd._update_as_tuples():
                    if key == "messages":
                        tail.extend(value if isinstance(value, list) else [value])
        if after_model_entry is not None:
            return out
        goto, closing = route_model_output(tail)
        if closing:
            out = [*out, Command(update={"messages": closing})] if isinstance(out, list) else [
                Command(update=out), Command(update={"messages": closing})]
        return with_goto(out, goto)

    def model_node(state: Any, runtime: Runtime[Any]) -> Any:
        request, repaired = prepare(state, runtime)
        response, call = call_sync(model_chain, request)
        return model_output(response, call.commands, repaired)

    async def amodel_node(state: Any, runtime: Runtime[Any]) -> Any:
        request, repaired = prepare(state, runtime)
        response, call = await call_async(amodel_chain, request)
        return model_output(response, call.commands, repaired)

    if after_model_entry is not None:
        builder.add_node(MODEL_NODE, _runnable(model_node, amodel_node, MODEL_NODE))
        builder.add_edge(MODEL_NODE, after_model_entry)
    else:
        dests = {loop_entry, end_entry, *((TOOLS_NODE,) if has_tool_node else ())}
        builder.add_node(
            MODEL_NODE, _runnable(model_node, amodel_node, MODEL_NODE), destinations=tuple(sorted(dests))
        )

    # -- tool node ---------------------------------------------------------------------------------------------
    if has_tool_node:
        wrap: Any = None
        awrap: Any = None
        if pipeline.tool_layers:

            def tool_base_sync(request: ToolCallRequest) -> Any:
                execute = _EXECUTE.get()
                if execute is None:
                    raise RuntimeError("middleware_kit: tool handler called outside a tool call")
                try:
                    return execute(_to_langgraph(request))
                except GraphBubbleUp as exc:
                    _note_bubble(exc)
                    raise

            async def tool_base_async(request: ToolCallRequest) -> Any:
                execute = _EXECUTE.get()
                if execute is None:
                    raise RuntimeError("middleware_kit: tool handler called outside a tool call")
                try:
                    return await execute(_to_langgraph(request))
                except GraphBubbleUp as exc:
                    _note_bubble(exc)
                    raise

            tool_chain, atool_chain = compose(pipeline.tool_layers, tool_base_sync, tool_base_async)

            def wrap(lg_request: LangGraphToolCallRequest, execute: Callable[..., Any]) -> Any:
                token = _EXECUTE.set(execute)
                try:
                    return call_sync(tool_chain, _from_langgraph(lg_request))[0]
                finally:
                    _EXECUTE.reset(token)

            async def awrap(lg_request: LangGraphToolCallRequest, execute: Callable[..., Any]) -> Any:
                token = _EXECUTE.set(execute)
                try:
                    return (await call_async(atool_chain, _from_langgraph(lg_request)))[0]
                finally:
                    _EXECUTE.reset(token)

        tool_node = ToolNode(list(executable.values()), wrap_tool_call=wrap, awrap_tool_call=awrap)
        builder.add_node(TOOLS_NODE, tool_node)

        def route_after_tools(state: Any) -> str:
            messages = state["messages"]
            i = last_ai_index(messages)
            if i >= 0 and return_direct:
                ran = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolMessage)}
                if any(c["name"] in return_direct and c["id"] in ran for c in messages[i].tool_calls):
                    return end_entry
            return loop_entry

        builder.add_conditional_edges(TOOLS_NODE, route_after_tools, sorted({loop_entry, end_entry}))

    builder.add_edge(START, agent_entry)
    return graph


def _runnable(func: Callable[..., Any], afunc: Callable[..., Any], name: str) -> Any:
    from langgraph._internal._runnable import RunnableCallable

    return RunnableCallable(func, afunc, name=name, trace=False)


def _from_langgraph(request: LangGraphToolCallRequest) -> ToolCallRequest:
    return ToolCallRequest(request.tool_call, request.tool, request.state, request.runtime)


def _to_langgraph(request: ToolCallRequest) -> LangGraphToolCallRequest:
    runtime = request.runtime
    if runtime is not None and request.state is not runtime.state:
        from dataclasses import replace

        runtime = replace(runtime, state=request.state)
    return LangGraphToolCallRequest(
        tool_call=request.tool_call, tool=request.tool, state=request.state, runtime=runtime  # type: ignore[arg-type]
    )
