"""The typed event model: metadata, the dict view bundled middlewares' readers rely on, sequence numbers per run."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, ModelRequest, ToolCallRequest, create_agent
from middleware_kit.events import (
    DISCARDED,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    Event,
    EventError,
    RunLifecycle,
    emit,
    emit_discarded,
    hook_scope,
)
from middleware_kit.hooks import ModelHandler, ToolHandler, ToolResult
from middleware_kit.middlewares._stream import emit as bundled_emit
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call

Q = {"messages": [HumanMessage("hi")]}


def stream_custom(agent: Any, inp: Any, mode: str, **kwargs: Any) -> list[Any]:
    if mode == "invoke":
        return list(agent.stream(inp, stream_mode="custom", **kwargs))

    async def collect() -> list[Any]:
        return [chunk async for chunk in agent.astream(inp, stream_mode="custom", **kwargs)]

    return asyncio.run(collect())


class Reporter(AgentMiddleware):
    """Emits through the public ``emit`` from a node hook, the model chain and the tool chain."""

    def before_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        emit("looked", {"n": len(state["messages"])}, middleware=self.name, hook=None, runtime=runtime)

    async def abefore_model(self, state: Any, runtime: Runtime[Any] | None) -> None:
        emit("looked", {"n": len(state["messages"])}, middleware=self.name, hook=None, runtime=runtime)

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        emit("calling", middleware=self.name, hook="wrap_model_call", runtime=request.runtime)
        return handler(request)

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        for step in ("in", "mid", "out"):
            emit("tool_step", {"step": step, "call": request.tool_call["id"]}, middleware=self.name,
                 hook=None, runtime=request.runtime)
        return handler(request)


@tool
def slow(x: int) -> str:
    """A tool run in parallel with itself."""
    return str(x)


def parallel_model(calls: int) -> ScriptedChatModel:
    """``calls`` parallel tool calls, then an answer; decided from the messages, so concurrent runs can share it."""

    def reply(messages: list[Any]) -> AIMessage | str:
        if isinstance(messages[-1], HumanMessage):
            return AIMessage("", tool_calls=[tool_call("slow", {"x": i}) for i in range(calls)])
        return "done"

    return ScriptedChatModel([reply], cycle=True)


def test_bundled_events_are_typed_and_still_read_like_dicts(mode: str) -> None:
    model = ScriptedChatModel([ConnectionError(), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(jitter=False, sleep=lambda s: None)],
                         checkpointer=InMemorySaver())
    run_id = uuid.uuid4()
    events = stream_custom(agent, Q, mode, config={"configurable": {"thread_id": "t-7"}, "run_id": run_id})
    assert events == [{"event": "retry", "middleware": "ModelRetryMiddleware", "attempt": 1, "delay": 1.0,
                       "error": "ConnectionError"}]
    (ev,) = events
    assert isinstance(ev, dict)  # what readers of the custom stream check today
    assert isinstance(ev, Event)
    assert (ev.event, ev.middleware, ev.hook) == ("retry", "ModelRetryMiddleware", "wrap_model_call")
    assert (ev.run_id, ev.thread_id, ev.seq) == (str(run_id), "t-7", 0)
    assert dict(ev.payload) == {"attempt": 1, "delay": 1.0, "error": "ConnectionError"}
    assert ev["attempt"] == 1 and ev.get("missing") is None and "delay" in ev
    assert json.loads(json.dumps(ev)) == dict(ev)


def test_events_are_frozen() -> None:
    ev = Event({"event": "x", "middleware": "M", "k": [1]}, seq=3, run_id="r")
    with pytest.raises(TypeError, match="frozen"):
        ev["k"] = 2
    mutators: list[Callable[[], Any]] = [lambda: ev.update(k=2), lambda: ev.pop("k"), ev.clear,
                                         lambda: ev.setdefault("z", 1), ev.popitem, lambda: ev.__delitem__("k")]
    for mutate in mutators:
        with pytest.raises(TypeError, match="frozen"):
            mutate()
    with pytest.raises(AttributeError, match="frozen"):
        ev.seq = 4
    with pytest.raises(TypeError):
        ev |= {"k": 2}
    assert ev == {"event": "x", "middleware": "M", "k": [1]} and ev.seq == 3


@given(st.dictionaries(st.text(min_size=1).filter(lambda k: k not in ("event", "middleware")),
                       st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3),
                                    max_leaves=8), max_size=6),
       st.text(min_size=1), st.integers(min_value=0))
def test_any_payload_survives_copies_pickle_and_json(payload: dict[str, Any], name: str, seq: int) -> None:
    ev = Event({"event": name, "middleware": "M", **payload}, hook="before_model", run_id="r", thread_id="t", seq=seq)
    for clone in (pickle.loads(pickle.dumps(ev)), copy.deepcopy(ev), copy.copy(ev)):
        assert isinstance(clone, Event) and clone == ev and clone.meta() == ev.meta()
    assert json.loads(json.dumps(ev)) == json.loads(json.dumps(dict(ev)))
    assert dict(ev.payload) == payload


@pytest.mark.parametrize("bad", ["", None, 3])
def test_an_event_needs_a_name(bad: Any) -> None:
    with pytest.raises(EventError, match="non-empty string"):
        emit(bad, middleware="M", hook=None)
    with pytest.raises(EventError, match="non-empty string"):
        Event({"event": bad})


@pytest.mark.parametrize("key", ["event", "middleware"])
def test_reserved_payload_keys_are_refused(key: str) -> None:
    with pytest.raises(EventError, match="reserved") as info:
        emit("x", {key: "y"}, middleware="Mine", hook=None)
    assert info.value.middleware == "Mine"


def test_outside_a_run_nothing_is_sent() -> None:
    assert emit("x", {"a": 1}, middleware="M", hook=None) is None
    assert bundled_emit(None, {"event": "x", "middleware": "M"}) is None


def test_public_emit_metadata_and_hook_detection(mode: str) -> None:
    agent = create_agent(parallel_model(2), [slow], middleware=[Reporter()], checkpointer=InMemorySaver())
    events = stream_custom(agent, Q, mode, config={"configurable": {"thread_id": "th"}})
    assert [(e.event, e.hook) for e in events[:2]] == [("looked", "before_model"), ("calling", "wrap_model_call")]
    assert {e.hook for e in events if e.event == "tool_step"} == {"wrap_tool_call"}
    assert [e.seq for e in events] == list(range(len(events)))
    assert len({e.run_id for e in events}) == 1 and events[0].run_id is not None  # minted: no run_id given
    assert {e.thread_id for e in events} == {"th"}
    assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)
    assert all(e.middleware == "Reporter" for e in events)


def test_sequence_numbers_follow_delivery_under_parallel_tools_and_concurrent_runs() -> None:
    """8 runs at once (threads), each with 6 parallel tool calls emitting 3 events each: every run's events are
    numbered 0..n-1 in the order they arrive, under one run id per run, never mixed with another run's."""
    agent = create_agent(parallel_model(6), [slow], middleware=[Reporter()])
    results: dict[int, list[Any]] = {}

    def one(i: int) -> None:
        results[i] = list(agent.stream(Q, stream_mode="custom"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run_ids = set()
    for events in results.values():
        assert [e.seq for e in events] == list(range(len(events)))
        assert len(events) == 2 + 6 * 3 + 2  # (before_model, model call) x 2, 3 per tool call
        (run_id,) = {e.run_id for e in events}
        run_ids.add(run_id)
    assert len(run_ids) == 8


def test_async_concurrent_runs_have_their_own_sequences() -> None:
    agent = create_agent(parallel_model(4), [slow], middleware=[Reporter()])

    async def one() -> list[Any]:
        return [e async for e in agent.astream(Q, stream_mode="custom")]

    async def many() -> list[list[Any]]:
        return await asyncio.gather(*(one() for _ in range(6)))

    for events in asyncio.run(many()):
        assert [e.seq for e in events] == list(range(len(events)))
        assert len({e.run_id for e in events}) == 1


class Lifecycle(AgentMiddleware):
    """Plays the engine's part (until it is wired): one RunLifecycle per run, kept in the run's context."""

    def before_agent(self, state: Any, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        life = RunLifecycle("probe")
        life.started(runtime)
        life.count_model_call(0.25)
        life.count_tool_call(0.5)
        life.count_tool_call(0.25)
        life.finished(runtime)
        assert life.failed(RuntimeError("late"), runtime) is None  # one closing event only
        other = RunLifecycle("probe")
        other.failed(ValueError("boom"), runtime)
        with hook_scope(self.name, "after_agent"):
            emit_discarded(runtime, message_id="lc_run--1", model_run_id="1", error=TimeoutError())
            emit("inside", middleware=self.name, hook=None, runtime=runtime)
        return None


def test_lifecycle_and_discarded_events(mode: str) -> None:
    agent = create_agent(ScriptedChatModel(["ok"], cycle=True), middleware=[Lifecycle()])
    events = stream_custom(agent, Q, mode)
    assert [e.event for e in events] == [RUN_STARTED, RUN_FINISHED, RUN_FAILED, DISCARDED, "inside"]
    started, finished, failed, discarded, inside = events
    assert started == {"event": RUN_STARTED, "middleware": None, "agent": "probe"}
    assert {k: finished[k] for k in ("model_calls", "tool_calls", "model_s", "tool_s")} == {
        "model_calls": 1, "tool_calls": 2, "model_s": 0.25, "tool_s": 0.75}
    assert finished["duration_s"] >= 0
    assert (failed["error"], failed["message"]) == ("ValueError", "boom")
    assert dict(discarded.payload) == {"message_id": "lc_run--1", "model_run_id": "1", "error": "TimeoutError"}
    assert discarded.hook == "wrap_model_call" and inside.hook == "after_agent"


class EngineStandIn(AgentMiddleware):
    """Uses RunLifecycle.of() from several nodes and chains of one run, as the engine will."""

    def before_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        RunLifecycle.of(runtime, "stand_in").started(runtime)

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        response = handler(request)
        RunLifecycle.of(request.runtime, "stand_in").count_model_call(0.5)
        return response

    async def awrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        response = await handler(request)
        RunLifecycle.of(request.runtime, "stand_in").count_model_call(0.5)
        return response

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        result = handler(request)
        RunLifecycle.of(request.runtime, "stand_in").count_tool_call(0.25)
        return result

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Any) -> ToolResult:
        result: ToolResult = await handler(request)
        RunLifecycle.of(request.runtime, "stand_in").count_tool_call(0.25)
        return result

    def after_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        RunLifecycle.of(runtime, "stand_in").finished(runtime)


def test_one_lifecycle_per_run_across_its_nodes(mode: str) -> None:
    agent = create_agent(parallel_model(3), [slow], middleware=[EngineStandIn()])
    for _ in range(2):  # a second run starts from zero: nothing carried over
        events = stream_custom(agent, Q, mode)
        assert [e.event for e in events] == [RUN_STARTED, RUN_FINISHED]
        finished = events[1]
        assert (finished["model_calls"], finished["tool_calls"], finished["model_s"], finished["tool_s"]) == (
            2, 3, 1.0, 0.75)
    assert isinstance(RunLifecycle.of(None, "x"), RunLifecycle)  # outside a run: a fresh one
    assert RunLifecycle.of(None, "x") is not RunLifecycle.of(None, "x")
