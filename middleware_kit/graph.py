"""LangGraph assembly: from a :class:`~middleware_kit.pipeline.Pipeline` to a ``StateGraph``.

Shape (``middleware=[A, B, C]``, every hook present, none interrupting)::

    START -> before_agent -> model -> tools -> model ... -> after_agent -> END
                             (A.before_model, B.before_model, C.before_model, the model call through the
                              wrap chain, C.after_model, B.after_model, A.after_model)

The ``before_model`` hooks, the model call and the ``after_model`` hooks share the ``model`` node, so a model call is
one graph step whatever the number of middlewares, as in a hand-built graph. A hook declared ``may_interrupt`` gets
a node of its own (``"{name}.{hook}"``), splitting its phase, so resuming it never re-runs the model or its
neighbours. Nodes whose hooks may jump, and the node that decides between tools, model and the end, route with
``Command(goto=...)``; the others have static edges. Tool calls are dispatched with one ``Send`` per pending call,
so parallel calls are separate tasks: an interrupt in one does not re-run the others on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.constants import END, START
from langgraph.errors import GraphBubbleUp
from langgraph.graph import StateGraph
from langgraph.prebuilt.tool_node import ToolCallRequest as LangGraphToolCallRequest
from langgraph.prebuilt.tool_node import ToolNode
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from middleware_kit.chain import _note_bubble, call_async, call_sync, compose
from middleware_kit.errors import (
    ConflictingUpdateError,
    MiddlewareConfigError,
    UnknownStateKeyError,
    UnknownToolError,
)
from middleware_kit.pairing import PairingFix, close_pending, closing_messages, last_ai_index, pending_tool_calls
from middleware_kit.phases import Item, ModelStep, NodeResult, NodeRunner, NodeStep, StateSemantics
from middleware_kit.pipeline import Pipeline
from middleware_kit.schema import MergedSchema
from middleware_kit.structured_output import ToolStrategy, is_structured_answer, parse_model_output, to_strategy
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


def build_graph(
    *,
    model: BaseChatModel,
    client_tools: Sequence[BaseTool],
    provider_tools: Sequence[dict[str, Any]],
    pipeline: Pipeline,
    schema: MergedSchema,
    system_message: SystemMessage | None,
    response_format: ToolStrategy[Any] | None,
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

    # -- the model call: a step of the fused model node ------------------------------------------------------------
    default_tools: tuple[BaseTool | dict[str, Any], ...] = (*client_tools, *pipeline.tools, *provider_tools)
    if response_format is not None:
        taken = sorted(response_format.tool_names & {getattr(t, "name", None) for t in default_tools})
        if taken:
            raise MiddlewareConfigError(
                f"response_format's structured tool(s) {taken} have the name of a tool of the agent. Rename the "
                f"schema (its class name, or the JSON schema's 'title') or the tool.",
                middleware="create_agent",
                hook="response_format",
            )
    bound_default = _bind(model, default_tools, response_format, None, {})

    def bound_model(request: ModelRequest[Any]) -> tuple[Any, ToolStrategy[Any] | None]:
        """The model to call (tools bound) and the structured-output strategy of this call, if any."""
        if (
            request.model is model
            and request.tools is default_tools
            and request.response_format is response_format
            and request.tool_choice is None
            and not request.model_settings
        ):
            return bound_default, response_format
        if request.tools is not default_tools and not pipeline.has_wrap_tool_call:
            unknown = [t.name for t in request.tools if isinstance(t, BaseTool) and t.name not in executable]
            if unknown:
                raise UnknownToolError(
                    f"Middleware added tools the agent cannot execute. Unknown tools: {unknown}. Register them "
                    f"with create_agent(tools=[...]) or a middleware's `tools`, or implement wrap_tool_call to "
                    f"execute them (request.tool is None there; call handler(request.override(tool=...))).",
                    middleware="create_agent",
                    hook="wrap_model_call",
                )
        strategy = to_strategy(request.response_format)
        return (
            _bind(request.model, request.tools, strategy, request.tool_choice, request.model_settings),
            strategy,
        )

    def model_input(request: ModelRequest[Any]) -> list[AnyMessage]:
        if request.system_message is None:
            return list(request.messages)
        return [request.system_message, *request.messages]

    def base_sync(request: ModelRequest[Any]) -> ModelResponse[Any]:
        chat, strategy = bound_model(request)
        try:
            message = chat.invoke(model_input(request))
        except GraphBubbleUp as exc:
            _note_bubble(exc)
            raise
        if strategy is None:
            return ModelResponse(result=[message])
        return parse_model_output(message, strategy)

    async def base_async(request: ModelRequest[Any]) -> ModelResponse[Any]:
        chat, strategy = bound_model(request)
        try:
            message = await chat.ainvoke(model_input(request))
        except GraphBubbleUp as exc:
            _note_bubble(exc)
            raise
        if strategy is None:
            return ModelResponse(result=[message])
        return parse_model_output(message, strategy)

    model_chain, amodel_chain = compose(pipeline.model_layers, base_sync, base_async)
    layer_owners = tuple(layer.owner for layer in pipeline.model_layers)

    def prepare(view: Any, runtime: Runtime[Any]) -> tuple[ModelRequest[Any], PairingFix | None]:
        messages = view["messages"]
        fix = close_pending(messages, "the run moved on before it ran (it was interrupted or skipped).")
        request: ModelRequest[Any] = ModelRequest(
            model=model,
            messages=fix.history if fix is not None else messages,
            system_message=system_message,
            tools=default_tools,
            response_format=response_format,
            state=view,
            runtime=runtime,
        )
        return request, fix

    def model_writes(
        response: ModelResponse[Any], commands: dict[int, Command[Any]], fix: PairingFix | None
    ) -> tuple[list[dict[str, Any]], list[Any] | None]:
        """The model's messages (after the answers that close dangling calls, if any), then ExtendedModelResponse
        updates, inner commands first; and, when the model added exactly one message and nothing else, that message
        (routing needs no more, and the node then skips re-applying the writes to its view of state)."""
        new_messages = list(response.result)
        base: dict[str, Any] = {"messages": [*fix.update, *new_messages] if fix is not None else new_messages}
        if response.structured_response is not None:
            base["structured_response"] = response.structured_response
        writes = [base]
        if not commands:
            return writes, new_messages if len(new_messages) == 1 else None
        written = {key for key in base if semantics.is_last_value(key)}
        for depth in sorted(commands, reverse=True):
            owner = layer_owners[depth]
            for key, value in commands[depth]._update_as_tuples():
                if key not in semantics.keys:
                    raise UnknownStateKeyError(owner, "wrap_model_call", [key], semantics.keys)
                if semantics.is_last_value(key):
                    if key in written:
                        raise ConflictingUpdateError(
                            f"{owner}.wrap_model_call: state key {key!r} is written twice by one model call (by "
                            f"the response and an ExtendedModelResponse, or by two of them), and it has no reducer "
                            f"to combine the values. Write it once, or give it a reducer in the state schema.",
                            middleware=owner,
                            hook="wrap_model_call",
                        )
                    written.add(key)
                writes.append({key: value})
        return writes, None

    def call_model(view: Any, runtime: Runtime[Any]) -> tuple[list[dict[str, Any]], list[Any] | None]:
        request, fix = prepare(view, runtime)
        response, call = call_sync(model_chain, request)
        return model_writes(response, call.commands, fix)

    async def acall_model(view: Any, runtime: Runtime[Any]) -> tuple[list[dict[str, Any]], list[Any] | None]:
        request, fix = prepare(view, runtime)
        response, call = await call_async(amodel_chain, request)
        return model_writes(response, call.commands, fix)

    model_step = ModelStep(call_model, acall_model)

    # -- which items share a node, and the nodes' names, in run order ---------------------------------------------
    def split(items: Sequence[Item]) -> list[tuple[Item, ...]]:
        """Consecutive items share a node; a may-interrupt hook gets a node of its own."""
        segments: list[list[Item]] = []
        for item in items:
            alone = isinstance(item, NodeStep) and item.may_interrupt
            previous_alone = bool(segments) and isinstance(segments[-1][0], NodeStep) and segments[-1][0].may_interrupt
            if alone or not segments or previous_alone:
                segments.append([item])
            else:
                segments[-1].append(item)
        return [tuple(seg) for seg in segments]

    counts: dict[str, int] = {}

    def name_of(segment: tuple[Item, ...]) -> str:
        if any(isinstance(item, ModelStep) for item in segment):
            return MODEL_NODE
        first = segment[0]
        assert isinstance(first, NodeStep)
        if len(segment) == 1:
            return f"{first.owner}.{first.hook}"
        counts[first.hook] = counts.get(first.hook, 0) + 1
        return first.hook if counts[first.hook] == 1 else f"{first.hook}_{counts[first.hook]}"

    agent_segments = split(pipeline.phases["before_agent"])
    loop_segments = split([*pipeline.phases["before_model"], model_step, *pipeline.phases["after_model"]])
    end_segments = split(pipeline.phases["after_agent"])
    agent_names = [name_of(seg) for seg in agent_segments]
    loop_names = [name_of(seg) for seg in loop_segments]
    end_names = [name_of(seg) for seg in end_segments]
    for names, segments in ((agent_names, agent_segments), (loop_names, loop_segments), (end_names, end_segments)):
        for node, segment in zip(names, segments, strict=True):
            for item in segment:
                if isinstance(item, NodeStep):
                    graph.node_of[(item.owner, item.hook)] = node

    loop_entry = loop_names[0]
    end_entry = end_names[0] if end_names else END
    agent_entry = agent_names[0] if agent_names else loop_entry
    graph.nodes = [*agent_names, *loop_names, *((TOOLS_NODE,) if has_tool_node else ()), *end_names]

    # -- routing ----------------------------------------------------------------------------------------------------
    def route_model_output(messages: Sequence[Any]) -> tuple[Any, list[Any]]:
        """After the model (and after_model hooks): run pending tool calls, loop back, or end.

        Returns the destination and a ``messages`` write closing calls that will never run (empty if none).
        ``messages`` is the whole history, or just the model's one new message (then nothing can need a rewrite).
        """
        newest = last_ai_index(messages)
        if newest < 0:
            return end_entry, []
        if messages[newest].tool_calls:
            pending = pending_tool_calls(messages)
            if pending and has_tool_node:
                return [Send(TOOLS_NODE, [call]) for call in pending], []
            if pending:  # the model called tools although the agent has none to run
                return end_entry, closing_messages(pending, "this agent has no tools to run.")
            if _structured_answered(messages, newest):  # the model answered through its structured tool
                return end_entry, []
            return loop_entry, []  # every call was answered by a middleware: let the model see the answers
        # The newest AIMessage answers without calls (a hook may have added it after a tool-calling one).
        fix = close_pending(messages, "the run ended before it ran.")
        return end_entry, fix.update if fix is not None else []

    def resolve_jump(jump: str, view: Any) -> tuple[Any, list[Any]]:
        if jump == "model":
            return loop_entry, []
        if jump == "tools":
            pending = pending_tool_calls(view.get("messages", ()))
            return ([Send(TOOLS_NODE, [c]) for c in pending] or loop_entry), []
        fix = close_pending(view.get("messages", ()), "the run ended before it ran.")
        return end_entry, fix.update if fix is not None else []

    def with_goto(output: Any, goto: Any) -> Any:
        if output is None:
            return Command(goto=goto)
        if isinstance(output, dict):
            return Command(update=output, goto=goto)
        return [*output, Command(goto=goto)]

    # -- nodes --------------------------------------------------------------------------------------------------
    def add_node(node: str, segment: tuple[Item, ...], default: str | None) -> None:
        """``default``: the static next node; None for the node that decides between tools, model and end."""
        runner = NodeRunner(segment, semantics)
        jumps = frozenset(j for step in runner.steps for j in step.can_jump_to)
        command_mode = bool(jumps) or default is None
        output = semantics.output

        def finish(result: NodeResult) -> Any:
            if not command_mode:
                return output(result.writes)
            writes = result.writes
            closing: list[Any] = []
            goto: Any
            if result.jump is None and default is not None:
                goto = default
            elif result.jump is None:
                goto, closing = route_model_output(
                    result.tail if result.tail is not None else result.view["messages"]
                )
            else:
                goto, closing = resolve_jump(result.jump, result.view)
            if closing:
                writes = [*writes, {"messages": closing}]
            return with_goto(output(writes), goto)

        def run_node(state: Any, runtime: Runtime[Any]) -> Any:
            return finish(runner.run(state, runtime))

        async def arun_node(state: Any, runtime: Runtime[Any]) -> Any:
            return finish(await runner.arun(state, runtime))

        if not command_mode:
            builder.add_node(node, _runnable(run_node, arun_node, node))
            builder.add_edge(node, default or END)
            return
        dests: set[str] = set()
        if default is not None:
            dests.add(default)
        else:
            dests.update({loop_entry, end_entry, *((TOOLS_NODE,) if has_tool_node else ())})
        if "end" in jumps:
            dests.add(end_entry)
        if "model" in jumps:
            dests.add(loop_entry)
        if "tools" in jumps:
            dests.update({TOOLS_NODE, loop_entry})
        builder.add_node(node, _runnable(run_node, arun_node, node), destinations=tuple(sorted(dests)))

    for names, segments, after in (
        (agent_names, agent_segments, loop_entry),
        (loop_names, loop_segments, None),
        (end_names, end_segments, END),
    ):
        for k, segment in enumerate(segments):
            add_node(names[k], segment, names[k + 1] if k + 1 < len(names) else after)

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
            if i >= 0 and _structured_answered(messages, i):  # the structured answer came with regular calls
                return end_entry
            if i >= 0 and return_direct:
                ran = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolMessage)}
                if any(c["name"] in return_direct and c["id"] in ran for c in messages[i].tool_calls):
                    return end_entry
            return loop_entry

        builder.add_conditional_edges(TOOLS_NODE, route_after_tools, sorted({loop_entry, end_entry}))

    builder.add_edge(START, agent_entry)
    return graph


def _bind(
    chat: BaseChatModel,
    tools: Sequence[BaseTool | dict[str, Any]],
    strategy: ToolStrategy[Any] | None,
    tool_choice: Any,
    settings: Any,
) -> Any:
    """``chat`` with the regular tools and the structured tools bound (never ``bind_tools([])``).

    With a strategy and no explicit ``tool_choice``, tool use is forced (``"any"``), as in LangChain v1: the model
    answers by calling the structured tool rather than in free text.
    """
    all_tools = [*tools, *strategy.tools] if strategy is not None else list(tools)
    if all_tools:
        kwargs: dict[str, Any] = dict(settings)
        if tool_choice is None and strategy is not None:
            tool_choice = "any"
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return chat.bind_tools(all_tools, **kwargs)
    if settings:
        return chat.bind(**settings)
    return chat


def _structured_answered(messages: Sequence[Any], ai_index: int) -> bool:
    """Whether the ``AIMessage`` at ``ai_index`` was answered by a successful structured-output call (its answer
    stands among the ``ToolMessage``s right after it). O(answers of that message)."""
    for j in range(ai_index + 1, len(messages)):
        message = messages[j]
        if not isinstance(message, ToolMessage):
            return False
        if is_structured_answer(message):
            return True
    return False


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
