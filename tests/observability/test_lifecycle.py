"""Lifecycle events sent by the engine (``run_started``, ``run_finished`` with counts and durations, ``run_failed``,
``run_cancelled``) for the runs that ask for them, and ``discarded`` markers for the streamed tokens of a model
attempt that failed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.decorators import hook_config
from middleware_kit.events import LIFECYCLE_CONFIG_KEY, Event
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call

MODES = ["invoke", "ainvoke"]
ON: Any = {"configurable": {LIFECYCLE_CONFIG_KEY: True}}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def collect(
    agent: Any, mode: str, inp: Any, config: dict[str, Any], stream_mode: Any = "custom", subgraphs: bool = False
) -> list[Any]:
    if mode == "invoke":
        return list(agent.stream(inp, config, stream_mode=stream_mode, subgraphs=subgraphs))

    async def main() -> list[Any]:
        return [chunk async for chunk in agent.astream(inp, config, stream_mode=stream_mode, subgraphs=subgraphs)]

    return asyncio.run(main())


def lifecycle(events: list[Any]) -> list[str]:
    return [e["event"] for e in events if e["event"].startswith("run_")]


def tool_agent(*middleware: Any, calls: int = 1) -> Any:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("add", {"a": i, "b": 1}, id=f"c{i}") for i in range(calls)]), "done",
    ])
    return create_agent(model, [add], middleware=list(middleware), name="calc")


def test_off_by_default_so_custom_streams_keep_their_shape() -> None:
    assert collect(tool_agent(), "invoke", {"messages": [HumanMessage("go")]}, {}) == []


@pytest.mark.parametrize("calls", [1, 3])
@pytest.mark.parametrize("mode", MODES)
def test_started_then_finished_with_counts_and_durations(mode: str, calls: int) -> None:
    events = collect(tool_agent(calls=calls), mode, {"messages": [HumanMessage("go")]}, ON)
    assert lifecycle(events) == ["run_started", "run_finished"]
    started, finished = events[0], events[-1]
    assert isinstance(finished, Event) and finished.middleware is None and finished.hook is None
    assert started.seq == 0 and finished.seq == len(events) - 1 and started.run_id == finished.run_id
    assert finished["model_calls"] == 2 and finished["tool_calls"] == calls
    assert 0 < finished["model_s"] <= finished["duration_s"] and finished["tool_s"] > 0  # tools may overlap


class Closing(AgentMiddleware):
    """after_agent hooks: the run ends after the last one, or when one jumps to the end."""

    def __init__(self, name: str, jump: bool = False) -> None:
        self.name = name
        self.jump = jump

    @hook_config(can_jump_to=["end"])
    def after_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {"jump_to": "end"} if self.jump else None


@pytest.mark.parametrize("jump", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_finished_once_after_the_after_agent_hooks(mode: str, jump: bool) -> None:
    agent = tool_agent(Closing("first"), Closing("second", jump=jump))
    events = collect(agent, mode, {"messages": [HumanMessage("go")]}, ON)
    assert lifecycle(events) == ["run_started", "run_finished"]


@pytest.mark.parametrize("mode", MODES)
def test_a_return_direct_tool_ends_the_run(mode: str) -> None:
    @tool(return_direct=True)
    def lookup(key: str) -> str:
        """Look a key up."""
        return key.upper()

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("lookup", {"key": "x"})])])
    events = collect(create_agent(model, [lookup]), mode, {"messages": [HumanMessage("go")]}, ON)
    assert lifecycle(events) == ["run_started", "run_finished"]
    assert events[-1]["tool_calls"] == 1 and events[-1]["model_calls"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_failed_names_the_error_and_the_run_still_raises(mode: str) -> None:
    agent = create_agent(ScriptedChatModel([ConnectionError("provider down")]), [], name="calc")
    events: list[Any] = []

    async def main() -> None:
        async for chunk in agent.astream({"messages": [HumanMessage("go")]}, ON, stream_mode="custom"):
            events.append(chunk)

    with pytest.raises(ConnectionError, match="provider down"):
        if mode == "invoke":
            for chunk in agent.stream({"messages": [HumanMessage("go")]}, ON, stream_mode="custom"):
                events.append(chunk)
        else:
            asyncio.run(main())
    assert lifecycle(events) == ["run_started", "run_failed"]
    assert events[-1]["error"] == "ConnectionError" and events[-1]["message"] == "provider down"
    assert events[-1]["model_calls"] == 1


class PassThrough(AgentMiddleware):
    def wrap_tool_call(self, request: Any) -> Any:
        return (yield request)


@pytest.mark.parametrize("wrapped", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_a_tool_error_that_ends_the_run_is_run_failed(mode: str, wrapped: bool) -> None:
    @tool
    def explode(x: int) -> int:
        """Always fails."""
        raise RuntimeError("disk full")

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("explode", {"x": 1})]), "unreachable"])
    agent = create_agent(model, [explode], middleware=[PassThrough()] if wrapped else [])
    events: list[Any] = []

    async def main() -> None:
        async for chunk in agent.astream({"messages": [HumanMessage("go")]}, ON, stream_mode="custom"):
            events.append(chunk)

    with pytest.raises(RuntimeError, match="disk full"):
        if mode == "invoke":
            events.extend(agent.stream({"messages": [HumanMessage("go")]}, ON, stream_mode="custom"))
        else:
            asyncio.run(main())
    assert lifecycle(events) == ["run_started", "run_failed"]
    assert (events[-1]["error"], events[-1]["tool_calls"], events[-1]["model_calls"]) == ("RuntimeError", 1, 1)


class Approve(AgentMiddleware):
    @hook_config(may_interrupt=True)
    def before_model(self, state: Any, runtime: Runtime[Any]) -> None:
        if len(state["messages"]) == 1:
            interrupt("approve?")


@pytest.mark.parametrize("mode", MODES)
def test_an_interrupt_is_no_failure_and_the_resume_is_a_run_of_its_own(mode: str) -> None:
    agent = create_agent(ScriptedChatModel(["ok"]), [], middleware=[Approve()], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{mode}", LIFECYCLE_CONFIG_KEY: True}}
    first = collect(agent, mode, {"messages": [HumanMessage("go")]}, config, stream_mode=["custom", "updates"])
    assert lifecycle([c for m, c in first if m == "custom"]) == ["run_started"]  # paused: not finished, not failed
    resumed = collect(agent, mode, Command(resume="yes"), config)
    assert lifecycle(resumed) == ["run_started", "run_finished"]
    assert resumed[-1]["model_calls"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_used_as_a_subgraph_has_a_lifecycle_of_its_own(mode: str) -> None:
    inner = create_agent(ScriptedChatModel(["inner answer"], cycle=True), [], name="inner")
    outer_model = ScriptedChatModel(["outer answer"], cycle=True)
    outer = create_agent(outer_model, [], name="outer")
    graph = StateGraph(MessagesState)
    graph.add_node("first", inner)
    graph.add_node("second", outer)
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    chunks = collect(graph.compile(), mode, {"messages": [HumanMessage("go")]}, ON, stream_mode="custom")
    assert chunks == []  # a subgraph's events reach the parent's stream with subgraphs=True only
    items = collect(graph.compile(), mode, {"messages": [HumanMessage("go")]}, ON, subgraphs=True)
    events = [e for _namespace, e in items]
    assert lifecycle(events) == ["run_started", "run_finished"] * 2
    assert [e.seq for e in events] == [0, 1, 2, 3]  # one sequence: the run's
    assert events[1]["model_calls"] == events[3]["model_calls"] == 1  # counted per agent


@pytest.mark.parametrize("mode", MODES)
def test_run_control_cancel_is_one_run_cancelled_event(mode: str) -> None:
    from middleware_kit.run_control import RunControl

    holder: dict[str, Any] = {}

    def answer(messages: list[BaseMessage]) -> AIMessage:
        holder["agent"].cancel("t-cancel")  # the Stop button, pressed while the model answers
        return AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})])

    agent = create_agent(ScriptedChatModel(default=answer), [add], run_control=RunControl(),
                         checkpointer=InMemorySaver())
    holder["agent"] = agent
    config = {"configurable": {"thread_id": "t-cancel", LIFECYCLE_CONFIG_KEY: True}}
    events = collect(agent, mode, {"messages": [HumanMessage("go")]}, config)
    assert lifecycle(events) == ["run_started", "run_cancelled"]
    cancelled = events[-1]
    assert cancelled.middleware is None and cancelled["thread_id"] == "t-cancel" and "elapsed" in cancelled
    # under ainvoke run control may abandon the call in flight (then it is not counted)
    assert cancelled["model_calls"] in ((1,) if mode == "invoke" else (0, 1)) and cancelled["tool_calls"] == 0
    # without lifecycle events, run control sends its own (one event either way)
    agent2 = create_agent(ScriptedChatModel(default=answer), [add], run_control=RunControl(),
                          checkpointer=InMemorySaver())
    holder["agent"] = agent2
    events = collect(agent2, mode, {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t-cancel"}})
    assert [(e["event"], e["middleware"]) for e in events] == [("run_cancelled", "RunControlMiddleware")]


class Streaming(BaseChatModel):
    """Streams its answer token by token; the first ``failures`` calls fail after two tokens."""

    failures: int = 1
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "streaming"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        chunks = list(self._stream(messages, stop, run_manager, **kwargs))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("".join(str(c.text) for c in chunks)))])

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        self.calls += 1
        failing = self.calls <= self.failures
        for token in (["Hel", "lo"] if failing else ["Fine", "."]):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager is not None:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
        if failing:
            raise ConnectionError("stream broke")


@pytest.mark.parametrize("recovery", ["retry", "fallback"])
@pytest.mark.parametrize("mode", MODES)
def test_tokens_of_a_failed_attempt_are_followed_by_a_discarded_marker(mode: str, recovery: str) -> None:
    if recovery == "retry":
        middleware: Any = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
        model: Any = Streaming()
    else:
        model = Streaming(failures=1)
        middleware = ModelFallbackMiddleware(Streaming(failures=0))
    agent = create_agent(model, [], middleware=[middleware])
    items = collect(agent, mode, {"messages": [HumanMessage("hi")]}, {}, stream_mode=["messages", "custom"])
    tokens = [(c.id, c.content) for m, (c, _meta) in ((m, x) for m, x in items if m == "messages")
              if isinstance(c, AIMessageChunk)]
    [discarded] = [c for m, c in items if m == "custom" and c["event"] == "discarded"]
    assert discarded.middleware is None and discarded["error"] == "ConnectionError"
    void = [content for mid, content in tokens if mid == discarded["message_id"]]
    assert void == ["Hel", "lo"]  # exactly the failed attempt's tokens
    kept = "".join(str(content) for mid, content in tokens if mid != discarded["message_id"])
    assert kept == "Fine."
    # the marker comes after the void tokens and before the recovery's tokens
    order = [("token", x[0].id) if m == "messages" else ("event", x["event"]) for m, x in items]
    marker = order.index(("event", "discarded"))
    assert all(i < marker for i, o in enumerate(order) if o == ("token", discarded["message_id"]))


def test_no_marker_without_a_stream_reader() -> None:
    """Without callback handlers nothing is streamed token by token, so nothing needs discarding."""
    agent = create_agent(Streaming(), [], middleware=[ModelRetryMiddleware(max_retries=1, initial_delay=0)])
    events = collect(agent, "invoke", {"messages": [HumanMessage("hi")]}, {})
    assert [e["event"] for e in events] == ["retry"]
