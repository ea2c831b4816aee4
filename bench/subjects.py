"""The three things timed side by side: a middleware_kit agent, a hand-built LangGraph graph, a bare loop.

All three use a fresh :func:`~bench.fixtures.make_model`, the same ``add`` tool bound with
``bind_tools([add])``, and the same :class:`~bench.fixtures.NoopMiddleware` class (the hand-built graph calls
its hook methods inline). A :class:`Subject` is one (kind, N, checkpointer) combination, ready to be invoked
many times.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import END, START
from langgraph.graph import StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.prebuilt.tool_node import ToolCallRequest as LGToolCallRequest
from langgraph.runtime import Runtime

import middleware_kit
from bench.fixtures import (
    AsyncNoopMiddleware,
    BenchSetupError,
    NoopMiddleware,
    add,
    check_messages,
    clear_saver,
    make_input,
    make_model,
    noops,
)

__all__ = [
    "INLINE_NS",
    "Subject",
    "bare_subject",
    "hand_subject",
    "inline_subject",
    "mk_subject",
]

Config = RunnableConfig | None
Result = Sequence[BaseMessage]


@dataclass
class Subject:
    """One measured configuration.

    ``run(input, config)`` (sync subjects) or ``arun(input, config)`` (async subjects) performs one invoke and
    returns the final messages. ``reset()`` runs between timed batches, outside the timing: it drops the
    checkpointer's threads and the scripted model's call log, so neither grows (and costs more GC work) as the
    run goes on.
    """

    kind: str
    """``mk`` (middleware_kit), ``hand`` (hand-built StateGraph) or ``bare`` (plain loop)."""
    n: int
    checkpointer: bool
    variant: str = ""
    """Distinguishes subjects of the same kind and N (the async benchmark's middleware flavours)."""
    run: Callable[[dict[str, Any], Config], Result] | None = None
    arun: Callable[[dict[str, Any], Config], Awaitable[Result]] | None = None
    saver: InMemorySaver | None = None
    reset_model: Callable[[], None] = lambda: None
    graph: Any = None
    """The compiled graph (None for the bare loop)."""
    _threads: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def key(self) -> str:
        kind = f"{self.kind}[{self.variant}]" if self.variant else self.kind
        return f"{kind}/{'ckpt' if self.checkpointer else 'nockpt'}/N={self.n}"

    def reset(self) -> None:
        if self.saver is not None:
            clear_saver(self.saver)
        self.reset_model()

    def args(self, count: int) -> list[tuple[dict[str, Any], Config]]:
        """Inputs and configs for ``count`` invokes, built before the timed loop (a new thread_id each)."""
        out: list[tuple[dict[str, Any], Config]] = []
        for _ in range(count):
            cfg: Config = None
            if self.checkpointer:
                cfg = {"configurable": {"thread_id": f"t{next(self._threads)}"}}
            out.append((make_input(), cfg))
        return out


def _messages(result: Any) -> Result:
    if not isinstance(result, dict) or "messages" not in result:
        raise BenchSetupError(f"unexpected result {result!r}")
    messages: Result = result["messages"]
    return messages


# -- middleware_kit ------------------------------------------------------------------------------------------
def mk_subject(n: int, checkpointer: bool, *, is_async: bool = False, cls: type[Any] = NoopMiddleware) -> Subject:
    model = make_model()
    saver = InMemorySaver() if checkpointer else None
    agent = middleware_kit.create_agent(model, [add], middleware=noops(n, cls), checkpointer=saver)
    subject = Subject("mk", n, checkpointer, saver=saver, reset_model=model.reset, graph=agent)
    if is_async:

        async def arun(inp: dict[str, Any], cfg: Config) -> Result:
            return _messages(await agent.ainvoke(inp, cfg))

        subject.arun = arun
    else:

        def run(inp: dict[str, Any], cfg: Config) -> Result:
            return _messages(agent.invoke(inp, cfg))

        subject.run = run
    return subject


# -- hand-built LangGraph graph ------------------------------------------------------------------------------
class HandState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@dataclass(slots=True)
class HandRequest:
    """What the wrap chain receives: one per model call whatever N is (middleware_kit builds one too)."""

    messages: Sequence[AnyMessage]
    state: Any
    runtime: Any


def _layer(fn: Callable[[Any, Any], Any], nxt: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def handler(request: Any) -> Any:
        return fn(request, nxt)

    return handler


def _alayer(
    fn: Callable[[Any, Any], Awaitable[Any]], nxt: Callable[[Any], Awaitable[Any]]
) -> Callable[[Any], Awaitable[Any]]:
    async def handler(request: Any) -> Any:
        return await fn(request, nxt)

    return handler


def nest_closures(fns: Sequence[Callable[[Any, Any], Any]], base: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fns[0]`` outermost: plain nested closures, composed once."""
    handler = base
    for fn in reversed(fns):
        handler = _layer(fn, handler)
    return handler


def anest_closures(
    fns: Sequence[Callable[[Any, Any], Awaitable[Any]]], base: Callable[[Any], Awaitable[Any]]
) -> Callable[[Any], Awaitable[Any]]:
    handler = base
    for fn in reversed(fns):
        handler = _alayer(fn, handler)
    return handler


def _hook_returned(owner: str, value: object) -> None:
    raise BenchSetupError(f"{owner}: a no-op hook returned {value!r}")


_EXECUTE: ContextVar[Callable[[LGToolCallRequest], Any] | None] = ContextVar("bench_execute", default=None)


def build_hand_graph(
    n: int,
    checkpointer: InMemorySaver | None,
    *,
    is_async: bool = False,
    cls: type[NoopMiddleware] = NoopMiddleware,
) -> tuple[Any, Callable[[], None]]:
    """A minimal ReAct graph: model node (N hooks inline) -> ToolNode -> model -> END (``tools_condition``).

    before_model hooks run in order and after_model hooks in reverse order around the model call, inside the
    model node; ``wrap_model_call``/``wrap_tool_call`` are nested closures composed once (the tool chain is
    given to ``ToolNode(wrap_tool_call=...)``, as middleware_kit does). The hooks are the methods
    middleware_kit calls.
    """
    model = make_model()
    bound = model.bind_tools([add])
    mws = noops(n, cls)
    if is_async and not issubclass(cls, AsyncNoopMiddleware):
        raise TypeError("the async hand-built graph calls the async twins: use AsyncNoopMiddleware")

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(HandState)

    if not is_async:
        befores = tuple(mw.before_model for mw in mws)
        afters = tuple(mw.after_model for mw in reversed(mws))

        def call_model(request: HandRequest) -> Any:
            return bound.invoke(request.messages)

        model_chain = nest_closures([mw.wrap_model_call for mw in mws], call_model)

        def model_node(state: HandState, runtime: Runtime[Any]) -> dict[str, Any]:
            for hook in befores:
                update = hook(state, runtime)
                if update is not None:
                    _hook_returned("before_model", update)
            message = model_chain(HandRequest(state["messages"], state, runtime))
            if afters:
                after_state = {**state, "messages": [*state["messages"], message]}
                for hook in afters:
                    update = hook(after_state, runtime)
                    if update is not None:
                        _hook_returned("after_model", update)
            return {"messages": [message]}

        builder.add_node("model", model_node)
        wrap: Any = None
        if mws:

            def execute_base(request: Any) -> Any:
                execute = _EXECUTE.get()
                assert execute is not None
                return execute(request)

            tool_chain = nest_closures([mw.wrap_tool_call for mw in mws], execute_base)

            def wrap(request: LGToolCallRequest, execute: Callable[[LGToolCallRequest], Any]) -> Any:
                token = _EXECUTE.set(execute)
                try:
                    return tool_chain(request)
                finally:
                    _EXECUTE.reset(token)

        builder.add_node("tools", ToolNode([add], wrap_tool_call=wrap))
    else:
        amws = [mw for mw in mws if isinstance(mw, AsyncNoopMiddleware)]
        abefores = tuple(mw.abefore_model for mw in amws)
        aafters = tuple(mw.aafter_model for mw in reversed(amws))

        async def acall_model(request: HandRequest) -> Any:
            return await bound.ainvoke(request.messages)

        amodel_chain = anest_closures([mw.awrap_model_call for mw in amws], acall_model)

        async def amodel_node(state: HandState, runtime: Runtime[Any]) -> dict[str, Any]:
            for hook in abefores:
                update = await hook(state, runtime)
                if update is not None:
                    _hook_returned("abefore_model", update)
            message = await amodel_chain(HandRequest(state["messages"], state, runtime))
            if aafters:
                after_state = {**state, "messages": [*state["messages"], message]}
                for hook in aafters:
                    update = await hook(after_state, runtime)
                    if update is not None:
                        _hook_returned("aafter_model", update)
            return {"messages": [message]}

        builder.add_node("model", amodel_node)
        awrap: Any = None
        if amws:

            async def aexecute_base(request: Any) -> Any:
                execute = _EXECUTE.get()
                assert execute is not None
                return await execute(request)

            atool_chain = anest_closures([mw.awrap_tool_call for mw in amws], aexecute_base)

            async def awrap(request: LGToolCallRequest, execute: Callable[[LGToolCallRequest], Any]) -> Any:
                token = _EXECUTE.set(execute)
                try:
                    return await atool_chain(request)
                finally:
                    _EXECUTE.reset(token)

        builder.add_node("tools", ToolNode([add], awrap_tool_call=awrap))

    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer), model.reset


def hand_subject(
    n: int, checkpointer: bool, *, is_async: bool = False, cls: type[NoopMiddleware] = NoopMiddleware
) -> Subject:
    saver = InMemorySaver() if checkpointer else None
    graph, reset_model = build_hand_graph(n, saver, is_async=is_async, cls=cls)
    subject = Subject("hand", n, checkpointer, saver=saver, reset_model=reset_model, graph=graph)
    if is_async:

        async def arun(inp: dict[str, Any], cfg: Config) -> Result:
            return _messages(await graph.ainvoke(inp, cfg))

        subject.arun = arun
    else:

        def run(inp: dict[str, Any], cfg: Config) -> Result:
            return _messages(graph.invoke(inp, cfg))

        subject.run = run
    return subject


# -- minimal hand-built graph, tools called inline ------------------------------------------------------------
INLINE_NS = (0, 10)
"""The N of the hand-built graph with tools inline: the baseline of the per-invoke target (0 and 10 middlewares)."""


def _model_node(bound: Any, mws: Sequence[NoopMiddleware]) -> Callable[[HandState, Runtime[Any]], dict[str, Any]]:
    """The model node of the inline graph: N ``before_model`` in order, the model through N nested
    ``wrap_model_call`` closures, N ``after_model`` in reverse (none at N=0: just the model)."""
    befores = tuple(mw.before_model for mw in mws)
    afters = tuple(mw.after_model for mw in reversed(mws))
    chain = nest_closures([mw.wrap_model_call for mw in mws], lambda request: bound.invoke(request.messages))

    def model_node(state: HandState, runtime: Runtime[Any]) -> dict[str, Any]:
        for hook in befores:
            if (update := hook(state, runtime)) is not None:
                _hook_returned("before_model", update)
        message = chain(HandRequest(state["messages"], state, runtime)) if mws else bound.invoke(state["messages"])
        if afters:
            after_state = {**state, "messages": [*state["messages"], message]}
            for hook in afters:
                if (update := hook(after_state, runtime)) is not None:
                    _hook_returned("after_model", update)
        return {"messages": [message]}

    return model_node


def _tool_node(mws: Sequence[NoopMiddleware]) -> Callable[[HandState, Runtime[Any]], dict[str, Any]]:
    """The tool node of the inline graph: each call through N nested ``wrap_tool_call`` closures to the tool,
    called inline (no ``ToolNode``)."""
    tools = {add.name: add}
    chain = nest_closures([mw.wrap_tool_call for mw in mws], lambda request: tools[request.tool_call["name"]].invoke(
        {**request.tool_call, "type": "tool_call"}))

    def tool_node(state: HandState, runtime: Runtime[Any]) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls  # type: ignore[union-attr]
        return {"messages": [chain(HandToolRequest(call, state, runtime)) for call in calls]}

    return tool_node


@dataclass(slots=True)
class HandToolRequest:
    """What the inline graph's tool chain receives: one per tool call."""

    tool_call: Any
    state: Any
    runtime: Any


def build_inline_graph(
    checkpointer: InMemorySaver | None, *, is_async: bool = False, n: int = 0
) -> tuple[Any, Callable[[], None]]:
    """The smallest ReAct graph: a model node, a tool node that calls each tool inline (no ``ToolNode``, so no
    thread pool per invoke), ``tools_condition``; with ``n`` middlewares, their hooks called inline as in
    :func:`build_hand_graph` (sync only). The baseline of the per-invoke target."""
    model = make_model()
    bound = model.bind_tools([add])
    tools = {add.name: add}
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(HandState)

    def answers(state: HandState) -> list[Any]:
        return list(state["messages"][-1].tool_calls)  # type: ignore[union-attr]

    if is_async:
        if n:
            raise TypeError("the async inline graph has no middleware")

        async def amodel_node(state: HandState) -> dict[str, Any]:
            return {"messages": [await bound.ainvoke(state["messages"])]}

        async def atool_node(state: HandState) -> dict[str, Any]:
            return {"messages": [await tools[c["name"]].ainvoke({**c, "type": "tool_call"}) for c in answers(state)]}

        builder.add_node("model", amodel_node)
        builder.add_node("tools", atool_node)
    else:
        mws = noops(n)
        builder.add_node("model", _model_node(bound, mws))
        builder.add_node("tools", _tool_node(mws))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer), model.reset


def inline_subject(checkpointer: bool, *, is_async: bool = False, n: int = 0) -> Subject:
    saver = InMemorySaver() if checkpointer else None
    graph, reset_model = build_inline_graph(saver, is_async=is_async, n=n)
    subject = Subject("inline", n, checkpointer, saver=saver, reset_model=reset_model, graph=graph)
    if is_async:

        async def arun(inp: dict[str, Any], cfg: Config) -> Result:
            return _messages(await graph.ainvoke(inp, cfg))

        subject.arun = arun
    else:

        def run(inp: dict[str, Any], cfg: Config) -> Result:
            return _messages(graph.invoke(inp, cfg))

        subject.run = run
    return subject


# -- bare loop -----------------------------------------------------------------------------------------------
def bare_subject(*, is_async: bool = False) -> Subject:
    """No graph, no hooks: ``bound.invoke(messages)``, ``add.invoke(args)`` until the model stops calling
    tools."""
    model = make_model()
    bound = model.bind_tools([add])
    subject = Subject("bare", 0, False, reset_model=model.reset)

    def tool_message(call: Any, output: Any) -> ToolMessage:
        return ToolMessage(content=str(output), tool_call_id=call["id"], name=call["name"])

    if is_async:

        async def arun(inp: dict[str, Any], cfg: Config) -> Result:
            messages: list[BaseMessage] = list(inp["messages"])
            while True:
                ai = await bound.ainvoke(messages)
                messages.append(ai)
                if not isinstance(ai, AIMessage) or not ai.tool_calls:
                    return messages
                for call in ai.tool_calls:
                    messages.append(tool_message(call, await add.ainvoke(call["args"])))

        subject.arun = arun
    else:

        def run(inp: dict[str, Any], cfg: Config) -> Result:
            messages: list[BaseMessage] = list(inp["messages"])
            while True:
                ai = bound.invoke(messages)
                messages.append(ai)
                if not isinstance(ai, AIMessage) or not ai.tool_calls:
                    return messages
                for call in ai.tool_calls:
                    messages.append(tool_message(call, add.invoke(call["args"])))

        subject.run = run
    return subject


def verify(subject: Subject) -> None:
    """One checked invoke (sync subjects)."""
    assert subject.run is not None
    inp, cfg = subject.args(1)[0]
    check_messages(subject.run(inp, cfg), subject.key)
    subject.reset()
