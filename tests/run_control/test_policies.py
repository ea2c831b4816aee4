"""Policies and the public surface: new input while an approval is pending (reject / abandon / queue),
``RunControl`` validation, the controlled agent as a drop-in for the compiled graph, the deprecated helpers."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.run_control import (
    ControlledAgent,
    InterruptAlreadyResolvedError,
    NothingToResumeError,
    RunControl,
    RunControlConfigError,
    RunControlGuard,
    RunControlMiddleware,
    controlled_middleware,
    with_run_control,
)
from middleware_kit.run_control.admission import next_input, queued
from middleware_kit.run_control.control import RunHandle
from middleware_kit.run_control.lease import backend_for
from middleware_kit.testing import ScriptedChatModel
from tests.run_control.helpers import (
    APPROVE,
    Ledger,
    SlowModel,
    assert_paired,
    build,
    call,
    cfg,
    pay_tool,
    reply,
    run_control_layers,
    saver_for,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def custom_events(agent: Any, mode: str, inp: Any, config: Any) -> list[Any]:
    if mode == "invoke":
        import asyncio

        return await asyncio.to_thread(lambda: list(agent.stream(inp, config, stream_mode="custom")))
    return [c async for c in agent.astream(inp, config, stream_mode="custom")]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_queue_holds_new_input_until_the_review_resolves(kind: str, mode: str, tmp_path: Path) -> None:
    ledger = Ledger()
    async with saver_for(kind, mode, tmp_path) as saver:
        agent = build(saver, RunControl(on_pending_input="queue"), tools=[pay_tool(ledger)],
                      model=SlowModel(default=reply))
        first = await call(agent, mode, {"messages": [HumanMessage("x")]}, cfg("t"))
        [review] = first["__interrupt__"]
        held = await call(agent, mode, {"messages": [HumanMessage("y")]}, cfg("t"))
        assert [i.id for i in held["__interrupt__"]] == [review.id]  # still paused on the same review
        assert [m.content for m in held["messages"]] == [m.content for m in first["messages"]]  # nothing ran
        events = await custom_events(agent, mode, {"messages": [HumanMessage("z")]}, cfg("t"))
        assert events == [{"event": "input_queued", "middleware": "RunControl", "thread_id": "t",
                           "waiting_for": [review.id]}]
        # resolving the review runs x's tool, then the held "y" as a new turn, which pauses for its own review
        out = await call(agent, mode, Command(resume=APPROVE), cfg("t"))
        assert out["__interrupt__"][0].value["action_requests"][0]["args"] == {"ref": "y"}
        assert ledger.items == ["x"]
        out = await call(agent, mode, Command(resume=APPROVE), cfg("t"))  # y's tool, then held "z" pauses
        assert out["__interrupt__"][0].value["action_requests"][0]["args"] == {"ref": "z"}
        out = await call(agent, mode, Command(resume=APPROVE), cfg("t"))
        assert "__interrupt__" not in out and out["messages"][-1].content == "done: paid z"
    assert ledger.items == ["x", "y", "z"]
    assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)] == ["x", "y", "z"]
    assert_paired(out["messages"])


async def _driven(mode: str, body: Any) -> Any:
    """An engine body run by the driver of ``mode``."""
    return run_sync(body) if mode == "invoke" else await run_async(body)


def _backend_op(backend: Any, name: str, *args: Any) -> Steps[Any]:
    """The backend's operation ``name`` as a body (``a`` + name under ``ainvoke``): a SQLite backend of one mode
    refuses the other's."""
    result = yield Step(getattr(backend, name), getattr(backend, "a" + name), *args)
    return result


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_queueing_run_reads_its_thread_and_its_queue_in_either_mode(kind: str, mode: str,
                                                                           tmp_path: Path) -> None:
    async with saver_for(kind, mode, tmp_path) as saver:
        agent = build(saver, RunControl(on_pending_input="queue"), tools=[pay_tool(Ledger())],
                      model=SlowModel(default=reply))
        await call(agent, mode, {"messages": [HumanMessage("x")]}, cfg("paused"))  # a review pends on "paused"
        backend = backend_for(saver)
        handle = RunHandle("paused", "r1", RunControl(on_pending_input="queue"), backend)
        # new input on a thread with a pending review is queued behind it; on a free thread it runs
        assert await _driven(mode, queued("y", handle, backend, saver, cfg("paused"))) is True
        free = RunHandle("free", "r2", RunControl(on_pending_input="queue"), backend)
        assert await _driven(mode, queued("z", free, backend, saver, cfg("free"))) is False
        # between slices: nothing is taken while the review still pends
        assert await _driven(mode, next_input(handle, backend, saver, cfg("paused"))) == (False, None)
        # a free thread's queued input is taken, once; a stopped run takes none, and it stays for the next run
        await _driven(mode, _backend_op(backend, "push_input", "free", "w"))
        free.stop("cancelled", "by the test")
        assert await _driven(mode, next_input(free, backend, saver, cfg("free"))) == (False, None)
        other = RunHandle("free", "r3", RunControl(on_pending_input="queue"), backend)
        assert await _driven(mode, next_input(other, backend, saver, cfg("free"))) == (True, "w")
        assert await _driven(mode, next_input(other, backend, saver, cfg("free"))) == (False, None)
        assert await _driven(mode, _backend_op(backend, "pop_input", "paused")) == (True, "y")  # behind the review


async def test_abandon_makes_a_late_resume_of_the_dropped_review_an_error(mode: str, tmp_path: Path) -> None:
    ledger = Ledger()
    async with saver_for("memory", mode, tmp_path) as saver:
        agent = build(saver, RunControl(on_pending_input="abandon"), tools=[pay_tool(ledger)],
                      model=SlowModel(default=reply))
        old = (await call(agent, mode, {"messages": [HumanMessage("x")]}, cfg("t")))["__interrupt__"][0].id
        await call(agent, mode, {"messages": [HumanMessage("y")]}, cfg("t"))
        with pytest.raises(InterruptAlreadyResolvedError) as info:
            await call(agent, mode, Command(resume={old: APPROVE}), cfg("t"))
        assert info.value.interrupt_id == old
    assert ledger.items == []


@pytest.mark.parametrize(
    ("changes", "parameter"),
    [
        ({"on_conflict": "queue"}, "on_conflict"),
        ({"ttl": 0}, "ttl"),
        ({"ttl": float("nan")}, "ttl"),
        ({"wait_timeout": -1}, "wait_timeout"),
        ({"deadline": True}, "deadline"),
        ({"on_deadline": "stop"}, "on_deadline"),
        ({"on_cancel": None}, "on_cancel"),
        ({"on_pending_input": "drop"}, "on_pending_input"),
        ({"poll_interval": "1"}, "poll_interval"),
    ],
)
def test_run_control_rejects_bad_values_naming_the_parameter(changes: dict[str, Any], parameter: str) -> None:
    with pytest.raises(RunControlConfigError) as info:
        RunControl(**changes)
    assert isinstance(info.value, MiddlewareConfigError) and isinstance(info.value, ValueError)
    assert info.value.hook == parameter and f"RunControl({parameter}=" in str(info.value)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["ttl", "deadline", "wait_timeout", "poll_interval", "on_conflict"]),
                       st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.integers(-5, 5),
                                 st.text(max_size=5), st.sampled_from(["wait", "reject"]))))
def test_any_run_control_value_is_either_valid_or_a_config_error(changes: dict[str, Any]) -> None:
    try:
        control = RunControl(**changes)
    except RunControlConfigError:
        return
    assert control.ttl > 0 and control.heartbeat > 0


def test_run_control_and_its_middleware_are_frozen_values() -> None:
    control = RunControl(ttl=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        control.ttl = 1  # type: ignore[misc]
    assert control.override(ttl=9).ttl == 9 and control.ttl == 5
    with pytest.raises(RunControlConfigError):
        control.override(ttl=-1)
    with pytest.raises(RunControlConfigError, match=r"RunControl\(cross_process='yes'\)"):
        control.override(cross_process="yes")
    mw = RunControlMiddleware()
    create_agent(ScriptedChatModel(["hi"]), middleware=[mw])
    with pytest.raises(FrozenMiddlewareError):  # read-only once an agent adopts it
        mw.tools = ()
    assert isinstance(mw.replace(), RunControlMiddleware) and isinstance(RunControlGuard().replace(), RunControlGuard)


def test_the_deprecated_helpers_still_work_and_warn(mode: str) -> None:
    import asyncio

    with pytest.warns(DeprecationWarning, match=r"controlled_middleware\(\[...\]\) is no longer needed"):
        stack = controlled_middleware([])
    assert [type(m).__name__ for m in stack] == ["RunControlMiddleware", "RunControlGuard"]
    base = create_agent(ScriptedChatModel(["hi"], cycle=True), middleware=stack, checkpointer=InMemorySaver(),
                        run_control=False)
    assert not isinstance(base, ControlledAgent)
    with pytest.warns(DeprecationWarning, match=r"with_run_control\(agent, control\) is no longer needed"):
        agent = with_run_control(base, RunControl(ttl=7))
    assert isinstance(agent, ControlledAgent) and agent.run_control.ttl == 7
    with pytest.raises(RunControlConfigError, match="must be a RunControl"), \
            pytest.warns(DeprecationWarning):
        with_run_control(base, {"ttl": 3})  # type: ignore[arg-type]
    plain = create_agent(ScriptedChatModel(["hi"]), checkpointer=InMemorySaver(), run_control=False)
    with pytest.raises(RunControlConfigError, match=r"RunControlMiddleware first and RunControlGuard last"), \
            pytest.warns(DeprecationWarning):
        with_run_control(plain)
    with pytest.raises(RunControlConfigError, match="takes a compiled agent"), pytest.warns(DeprecationWarning):
        with_run_control("agent")  # type: ignore[arg-type]
    # an agent built the old way runs controlled as before: a second resume of one review is refused
    if mode == "invoke":
        agent.invoke({"messages": [HumanMessage("a")]}, cfg("old"))
        with pytest.raises(NothingToResumeError):
            agent.invoke(Command(resume=APPROVE), cfg("old"))
    else:
        async def go() -> None:
            await agent.ainvoke({"messages": [HumanMessage("a")]}, cfg("old"))
            with pytest.raises(NothingToResumeError):
                await agent.ainvoke(Command(resume=APPROVE), cfg("old"))

        asyncio.run(go())
    # a list built with the deprecated helper is kept as it is by create_agent (no second pair)
    with pytest.warns(DeprecationWarning):
        again = create_agent(ScriptedChatModel(["hi"]), middleware=controlled_middleware(),
                             checkpointer=InMemorySaver())
    assert run_control_layers(again) == ["RunControlMiddleware", "RunControlGuard"]


def test_the_controlled_agent_is_a_drop_in_for_the_compiled_graph(mode: str) -> None:
    import asyncio

    model = ScriptedChatModel(["one", "two", "three", "four"], cycle=True)
    base = create_agent(model, checkpointer=InMemorySaver(), run_control=False)
    agent = create_agent(model, checkpointer=InMemorySaver(), run_control=RunControl(ttl=7))
    assert isinstance(agent, ControlledAgent) and not isinstance(base, ControlledAgent)
    assert run_control_layers(agent) == ["RunControlMiddleware", "RunControlGuard"]
    assert "model" in agent.get_graph().nodes  # the graph's own methods work
    stateless = create_agent(ScriptedChatModel(["three"]), run_control=RunControl())  # no checkpointer: no lease
    configured = agent.with_config(recursion_limit=11)
    assert isinstance(configured, ControlledAgent) and configured.run_control.ttl == 7
    if mode == "invoke":
        out = agent.invoke({"messages": [HumanMessage("a")]}, cfg("d"))
        updates = list(agent.stream({"messages": [HumanMessage("b")]}, cfg("d"), stream_mode="updates"))
        no_thread = stateless.invoke({"messages": [HumanMessage("c")]})  # no checkpointer: nothing to lease
    else:
        async def go() -> tuple[Any, list[Any], Any]:
            out = await agent.ainvoke({"messages": [HumanMessage("a")]}, cfg("d"))
            updates = [u async for u in agent.astream({"messages": [HumanMessage("b")]}, cfg("d"),
                                                      stream_mode="updates")]
            return out, updates, await stateless.ainvoke({"messages": [HumanMessage("c")]})

        out, updates, no_thread = asyncio.run(go())
    assert out["messages"][-1].content == "one" and updates and no_thread["messages"][-1].content == "three"
    assert [m.content for m in agent.get_state(cfg("d")).values["messages"]] == ["a", "one", "b", "two"]
    assert "run_control_elapsed" not in out  # private state stays private


def test_run_control_is_on_by_default_with_a_checkpointer_and_one_argument_tunes_it() -> None:
    from middleware_kit import CompiledAgent

    model = ScriptedChatModel(["hi"], cycle=True)
    assert isinstance(create_agent(model, checkpointer=InMemorySaver()), ControlledAgent)  # the safe default
    assert not isinstance(create_agent(model), ControlledAgent)  # no thread to lease
    assert not isinstance(create_agent(model, checkpointer=True), ControlledAgent)  # a subgraph: the parent's lease
    off = create_agent(model, checkpointer=InMemorySaver(), run_control=False)
    assert isinstance(off, CompiledAgent) and not isinstance(off, ControlledAgent)
    tuned = create_agent(model, checkpointer=InMemorySaver(), run_control=RunControl(on_conflict="wait"))
    assert tuned.run_control.on_conflict == "wait"  # type: ignore[attr-defined]
    with pytest.raises(RunControlConfigError, match=r"create_agent\(run_control='yes'\).*False to turn it off"):
        create_agent(model, checkpointer=InMemorySaver(), run_control="yes")  # type: ignore[arg-type]


def test_a_check_with_the_runs_state_counts_the_time_it_consumed_before_once() -> None:
    """``RunHandle.check(state)``: the slice's first check that has the run's state takes the time saved there (a run
    paused for a human resumes its clock); a check without state takes nothing; later states are not read again."""
    from middleware_kit.run_control.control import RunHandle

    handle = RunHandle("t", "r", RunControl(deadline=5.0), None)
    assert handle.check() is None and handle.base is None  # no state at hand: nothing adopted yet
    assert handle.check({"run_control_elapsed": 4.0}) is None
    assert handle.base == 4.0
    assert handle.check({"run_control_elapsed": 99.0}) is None  # adopted once: a later state does not move the clock
    assert handle.base == 4.0
    stopped = RunHandle("t", "r2", RunControl(deadline=5.0), None)
    assert stopped.check({"run_control_elapsed": 5.5}) == "deadline"  # the saved time alone passes the deadline
    assert "5s" in stopped.stop_reason
