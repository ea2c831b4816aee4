"""Every hook its own langchain-core run, ``"{middleware}.{hook}"``, nested as the onion runs (issue 18 item 1).

Recorded with real callback handlers (a sync ``BaseCallbackHandler``, an ``AsyncCallbackHandler``, langchain-core's
``RunCollectorCallbackHandler`` tracer), OpenTelemetry's in-memory exporter and the ``TimelineRecorder``, under
``invoke`` and ``ainvoke``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Generator
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from langchain_core.tracers.schemas import Run
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.decorators import before_model, wrap_model_call
from middleware_kit.events import Event, emit
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.types import ModelRequest, ToolCallRequest
from middleware_kit.viz import TimelineRecorder

MODES = ["invoke", "ainvoke"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Outer(AgentMiddleware):
    """Sync hooks of every kind (class methods)."""

    def before_agent(self, state: Any, runtime: Runtime[Any]) -> None:
        return None

    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return None

    def modify_model_request(self, request: ModelRequest[Any], state: Any) -> ModelRequest[Any]:
        return request

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        return handler(request)

    def after_model(self, state: Any, runtime: Runtime[Any]) -> None:
        return None

    def before_tool(self, request: ToolCallRequest) -> None:
        return None

    def after_tool(self, request: ToolCallRequest, result: Any) -> None:
        return None

    def wrap_tool_call(self, request: ToolCallRequest, handler: Any) -> Any:
        return handler(request)

    def after_agent(self, state: Any, runtime: Runtime[Any]) -> None:
        return None


class Inner(AgentMiddleware):
    """Async-only hooks, and a flow wrap hook."""

    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> None:
        return None

    def wrap_model_call(self, request: ModelRequest[Any]) -> Generator[Any, Any, Any]:
        return (yield request)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Any) -> Any:
        return await handler(request)


@before_model
def note(state: Any, runtime: Runtime[Any]) -> None:
    emit("noted", {}, middleware="note", hook=None, runtime=runtime)


def agent_of(*middleware: Any, model: Any = None) -> Any:
    model = model or ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"], cycle=True
    )
    return create_agent(model, [add], middleware=list(middleware), name="calc")


def run_agent(agent: Any, mode: str, config: RunnableConfig, text: str = "1+2?") -> Any:
    inp = {"messages": [HumanMessage(text)]}
    if mode == "invoke":
        return agent.invoke(inp, config)
    return asyncio.run(agent.ainvoke(inp, config))


class Tree(BaseCallbackHandler):
    """Every run start, with its parent, as a sync handler sees it."""

    def __init__(self) -> None:
        self.runs: dict[UUID, tuple[str, UUID | None]] = {}
        self.errors: dict[UUID, BaseException] = {}
        self.inputs: dict[UUID, Any] = {}
        self._lock = threading.Lock()

    def _add(self, name: str, run_id: UUID, parent_run_id: UUID | None) -> None:
        with self._lock:
            self.runs[run_id] = (name, parent_run_id)

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                       **kwargs: Any) -> None:
        self._add(str(kwargs.get("name")), run_id, parent_run_id)
        self.inputs[run_id] = inputs

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._add("chat", run_id, parent_run_id)

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID, parent_run_id: UUID | None = None,
                      **kwargs: Any) -> None:
        self._add(f"tool {serialized['name']}", run_id, parent_run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.errors[run_id] = error

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.errors[run_id] = error

    def path(self, run_id: UUID) -> list[str]:
        """Names from the root to ``run_id``, graph-internal runs (``RunnableSequence``, routing) left out."""
        names = []
        current: UUID | None = run_id
        while current is not None:
            name, current = self.runs[current]
            names.append(name)
        return list(reversed(names))

    def paths(self, leaf: str) -> list[list[str]]:
        return sorted(self.path(rid) for rid, (name, _) in self.runs.items() if name == leaf)

    def named(self, name: str) -> list[UUID]:
        return [rid for rid, (n, _) in self.runs.items() if n == name]


class AsyncTree(AsyncCallbackHandler):
    """The same as an async handler (its methods are awaited under ainvoke, run on a loop under invoke)."""

    def __init__(self) -> None:
        self.tree = Tree()

    async def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.tree.on_chain_start(serialized, inputs, **kwargs)

    async def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.tree.on_chat_model_start(serialized, messages, **kwargs)

    async def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self.tree.on_tool_start(serialized, input_str, **kwargs)


@pytest.mark.parametrize("handler_kind", ["sync", "async"])
@pytest.mark.parametrize("mode", MODES)
def test_every_hook_is_a_run_nested_as_the_onion(mode: str, handler_kind: str) -> None:
    handler: Any = Tree() if handler_kind == "sync" else AsyncTree()
    run_agent(agent_of(Outer(), Inner(), note), mode, {"callbacks": [handler]})
    tree: Tree = handler if handler_kind == "sync" else handler.tree

    # the chat model call sits inside the wrap_model_call runs, outermost middleware outermost, for both calls
    assert tree.paths("chat") == [["calc", "model", "Outer.wrap_model_call", "Inner.wrap_model_call", "chat"]] * 2
    # node hooks are children of their fused node's run, in run order
    for name in ("Outer.before_model", "Inner.before_model", "note.before_model", "Outer.after_model",
                 "Outer.modify_model_request"):
        assert tree.paths(name) == [["calc", "model", name]] * 2, name
    # a node holding one hook is named after it; the hook run inside it is the one tagged as a hook run
    for name in ("Outer.before_agent", "Outer.after_agent"):
        assert tree.paths(name) == [["calc", name], ["calc", name, name]]
    # the tool run sits inside its wrap_tool_call runs; before_tool/after_tool are runs of their own
    assert tree.paths("tool add") == [["calc", "tools", "Outer.wrap_tool_call", "Inner.wrap_tool_call", "tool add"]]
    assert tree.paths("Outer.before_tool") == [["calc", "tools", "Outer.before_tool"]]
    assert tree.paths("Outer.after_tool") == [["calc", "tools", "Outer.after_tool"]]
    assert not tree.errors


@pytest.mark.parametrize("mode", MODES)
def test_parallel_tool_calls_each_nest_under_their_own_tools_task(mode: str) -> None:
    calls = [tool_call("add", {"a": i, "b": 1}, id=f"call-{i}") for i in range(4)]
    model = ScriptedChatModel([AIMessage("", tool_calls=calls), "done"])
    tree = Tree()
    run_agent(agent_of(Outer(), Inner(), model=model), mode, {"callbacks": [tree]})
    tools_runs = tree.named("tools")
    assert len(tools_runs) == 4
    for tool_run in tree.named("tool add"):
        wrap_inner = tree.runs[tool_run][1]
        assert wrap_inner is not None and tree.runs[wrap_inner][0] == "Inner.wrap_tool_call"
        wrap_outer = tree.runs[wrap_inner][1]
        assert wrap_outer is not None and tree.runs[wrap_outer][0] == "Outer.wrap_tool_call"
        assert tree.runs[wrap_outer][1] in tools_runs
    # each tools task has its own wrap runs (none shared)
    assert sorted(tree.runs[w][1] for w in tree.named("Outer.wrap_tool_call")) == sorted(tools_runs)  # type: ignore[type-var]


@pytest.mark.parametrize("mode", MODES)
def test_each_retry_attempt_is_a_child_of_the_retry_hook_run(mode: str) -> None:
    model = ScriptedChatModel([ValueError("flaky 1"), ValueError("flaky 2"), "ok"])
    tree = Tree()
    retry = ModelRetryMiddleware(max_retries=3, initial_delay=0, jitter=False)
    agent = create_agent(model, [], middleware=[retry, Inner()], name="calc")
    run_agent(agent, mode, {"callbacks": [tree]})
    [retry_run] = tree.named("ModelRetryMiddleware.wrap_model_call")
    attempts = tree.named("Inner.wrap_model_call")
    assert len(attempts) == 3 and all(tree.runs[a][1] == retry_run for a in attempts)
    chats = tree.named("chat")
    assert sorted(tree.runs[c][1] for c in chats) == sorted(attempts)  # type: ignore[type-var]
    failed = [a for a in attempts if a in tree.errors]
    assert len(failed) == 2 and {str(tree.errors[a]) for a in failed} == {"flaky 1", "flaky 2"}
    assert retry_run not in tree.errors


class Boom(AgentMiddleware):
    def __init__(self, where: str) -> None:
        self.where = where

    def before_model(self, state: Any, runtime: Runtime[Any]) -> None:
        if self.where == "before_model":
            raise RuntimeError("before_model broke")

    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> None:
        self.before_model(state, runtime)

    def wrap_tool_call(self, request: ToolCallRequest) -> Generator[Any, Any, Any]:
        if self.where == "wrap_tool_call":
            raise RuntimeError("wrap_tool_call broke")
        return (yield request)


@pytest.mark.parametrize("where", ["before_model", "wrap_tool_call"])
@pytest.mark.parametrize("mode", MODES)
def test_a_hook_that_raises_ends_its_run_with_the_error(mode: str, where: str) -> None:
    tree = Tree()
    with pytest.raises(RuntimeError, match=f"{where} broke"):
        run_agent(agent_of(Outer(), Boom(where)), mode, {"callbacks": [tree]})
    [failed] = tree.named(f"Boom.{where}")
    assert str(tree.errors[failed]) == f"{where} broke"
    if where == "wrap_tool_call":  # the outer layer saw the error pass through it: its run failed too
        [outer] = tree.named("Outer.wrap_tool_call")
        assert tree.runs[failed][1] == outer and outer in tree.errors
        assert tree.named("tool add") == []  # the tool never ran


@pytest.mark.parametrize("mode", MODES)
def test_a_tracer_sees_hook_runs_with_their_payloads(mode: str) -> None:
    collector = RunCollectorCallbackHandler()
    run_agent(agent_of(Outer()), mode, {"callbacks": [collector]})
    [root] = collector.traced_runs

    def walk(run: Run) -> list[Run]:
        return [run, *(r for child in run.child_runs for r in walk(child))]

    runs = {r.name: r for r in walk(root)}
    before = runs["Outer.before_model"]
    assert before.run_type == "chain" and before.inputs["messages"][0].content == "1+2?"
    assert before.tags is not None and "middleware_kit:hook" in before.tags
    wrap = runs["Outer.wrap_model_call"]
    assert isinstance(wrap.inputs["input"], ModelRequest) and wrap.outputs is not None
    assert [c.name for c in wrap.child_runs] == ["ScriptedChatModel"]


def test_no_handler_no_hook_runs_and_events_still_name_their_hook() -> None:
    """Without a handler the plain variant runs (hook runs are never opened), and decorator hooks' events still
    carry their hook name (the engine marks the running hook)."""

    seen: list[Any] = []

    @wrap_model_call
    def spy(request: ModelRequest[Any], handler: Any) -> Any:
        from langgraph.config import get_config

        seen.append(get_config().get("callbacks"))
        emit("spied", {}, middleware="spy", hook=None)
        return handler(request)

    agent = agent_of(spy, note)
    events = list(agent.stream({"messages": [HumanMessage("1+2?")]}, stream_mode="custom"))
    assert all(isinstance(e, Event) for e in events)
    assert [(e["event"], e.hook) for e in events] == [("noted", "before_model"), ("spied", "wrap_model_call")] * 2
    assert all(cb is None or not cb.handlers for cb in seen)  # the model node's own (empty) manager: no hook run


@pytest.mark.parametrize("mode", MODES)
def test_events_inside_traced_hooks_carry_the_hook(mode: str) -> None:
    tree = Tree()
    agent = agent_of(note)
    inp = {"messages": [HumanMessage("1+2?")]}

    async def collect() -> list[Any]:
        return [e async for e in agent.astream(inp, {"callbacks": [tree]}, stream_mode="custom")]

    events = (list(agent.stream(inp, {"callbacks": [tree]}, stream_mode="custom")) if mode == "invoke"
              else asyncio.run(collect()))
    assert [(e["event"], e.hook) for e in events] == [("noted", "before_model")] * 2
    assert len(tree.named("note.before_model")) == 2


@pytest.mark.parametrize("mode", MODES)
def test_astream_events_shows_the_hook_runs(mode: str) -> None:
    agent = agent_of(Outer())

    async def names() -> list[str]:
        return [e["name"] async for e in agent.astream_events({"messages": [HumanMessage("1+2?")]}, version="v2")
                if e["event"] == "on_chain_start"]

    started = asyncio.run(names())
    for hook in ("before_agent", "before_model", "wrap_model_call", "wrap_tool_call", "after_agent"):
        assert f"Outer.{hook}" in started


@pytest.mark.parametrize("mode", MODES)
def test_timeline_lanes_per_middleware(mode: str) -> None:
    recorder = TimelineRecorder()
    run_agent(agent_of(Outer(), Inner()), mode, {"callbacks": [recorder]})
    lanes = {item.lane for item in recorder.items}
    assert {"Outer", "Inner", "model", "tools"} <= lanes
    labels = [item.label for item in recorder.items]
    assert labels.count("Inner.wrap_model_call") == 2 and labels.count("Outer.wrap_tool_call") == 1


@pytest.mark.skipif(importlib.util.find_spec("opentelemetry.sdk") is None, reason="the otel extra")
@pytest.mark.parametrize("mode", MODES)
def test_opentelemetry_hook_spans_nest_as_the_onion(mode: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from middleware_kit.otel import OpenTelemetryCallbackHandler

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run_agent(agent_of(Outer(), Inner()), mode, {"callbacks": [OpenTelemetryCallbackHandler(tracer_provider=provider)]})
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}

    def parent(span: Any) -> str | None:
        return by_id[span.parent.span_id].name if span.parent is not None else None

    chats = [s for s in spans if s.name == "chat scripted"]
    assert len(chats) == 2 and all(parent(c) == "Inner.wrap_model_call" for c in chats)
    assert all(parent(s) == "Outer.wrap_model_call" for s in spans if s.name == "Inner.wrap_model_call")
    [tool_span] = [s for s in spans if s.name == "execute_tool add"]
    assert parent(tool_span) == "Inner.wrap_tool_call"
    hook = next(s for s in spans if s.name == "Outer.before_model")
    assert hook.attributes is not None and hook.attributes["middleware_kit.hook"] == "before_model"
    assert parent(hook) == "invoke_agent calc"
    # a one-hook node (named after its hook) is not a second span of the hook
    assert [s.name for s in spans].count("Outer.before_agent") == 1


def test_concurrent_runs_traced_and_untraced_do_not_mix() -> None:
    """The traced/plain choice is per node run: concurrent runs of one agent, some with a handler and some without,
    each get exactly their own hook runs (the handler-less ones none), nested under their own root."""
    def reply(messages: list[Any]) -> AIMessage:  # per conversation, whatever the interleaving of the runs
        if messages[-1].type == "tool":
            return AIMessage("3")
        return AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})])

    agent = agent_of(Outer(), Inner(), model=ScriptedChatModel(default=reply))
    trees = [Tree() if i % 2 == 0 else None for i in range(8)]

    async def one(i: int, tree: Tree | None) -> Any:
        config: RunnableConfig = {"callbacks": [tree]} if tree is not None else {}
        return await agent.ainvoke({"messages": [HumanMessage(f"run {i}")]}, config)

    async def main() -> list[Any]:
        return await asyncio.gather(*(one(i, t) for i, t in enumerate(trees)))

    results = asyncio.run(main())
    assert all(r["messages"][-1].content == "3" for r in results)
    for tree in trees:
        if tree is None:
            continue
        roots = [rid for rid, (_, parent) in tree.runs.items() if parent is None]
        assert len(roots) == 1  # only its own run
        assert tree.paths("chat") == [["calc", "model", "Outer.wrap_model_call", "Inner.wrap_model_call", "chat"]] * 2
        assert len(tree.named("Outer.before_model")) == 2 and len(tree.named("tool add")) == 1
