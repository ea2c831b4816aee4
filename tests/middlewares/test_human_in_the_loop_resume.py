"""HumanInTheLoopMiddleware resume values are validated completely before anything runs (issue 15.6).

Junk resumes (hypothesis) against a real checkpointer: each either is a valid answer, or raises
``InvalidResumeError`` with nothing recorded, the interrupt still pending; the next good resume completes and the
approved tool runs exactly once.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.errors import is_invalid_resume
from langgraph.types import Command

from middleware_kit import MiddlewareError, create_agent
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware, InvalidResumeError
from middleware_kit.testing import ScriptedChatModel, tool_call

_threads = itertools.count()

# Junk of every shape: JSON-ish and not (tuples, sets, bytes, objects, non-string keys), nested.
_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=8), st.binary(max_size=4),
    st.sampled_from(["approve", "edit", "reject", "respond", "accept", "decisions", "type", "args", "message"]),
    st.builds(object), st.frozensets(st.integers(), max_size=2),
)
_junk = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers(), st.sampled_from(["type", "message"])), inner,
                        max_size=3),
    ),
    max_leaves=8,
)
_bad_type = st.one_of(st.sampled_from(["aprove", "accept", "", "APPROVE"]), st.lists(st.text(max_size=3), max_size=2),
                      st.integers(), st.none(), st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))
# Near misses: a decision with one thing wrong (the shapes reviewers' UIs actually get wrong).
_near_miss = st.one_of(
    st.fixed_dictionaries({"type": _bad_type}),
    st.fixed_dictionaries({"type": st.just("approve"), "message": _junk}),
    st.fixed_dictionaries({"type": st.just("reject"), "message": _junk.filter(lambda v: not isinstance(v, str))}),
    st.fixed_dictionaries({"type": st.just("respond")}),
    st.fixed_dictionaries({"type": st.just("edit"), "edited_action": _junk}),
    st.fixed_dictionaries({"type": st.just("edit"), "edited_action": st.fixed_dictionaries({
        "args": st.dictionaries(st.one_of(st.integers(), st.none(), st.tuples(st.text(max_size=2))), _junk,
                                min_size=1, max_size=2)})}),
    st.fixed_dictionaries({"type": st.just("edit"), "edited_action": st.fixed_dictionaries({
        "args": st.fixed_dictionaries({"to": _junk.filter(lambda v: not isinstance(v, str)), "body": st.just("b")})})}),
)
_resume = st.one_of(
    _junk.filter(lambda v: v is not None),  # Command(resume=None) means "no resume" to LangGraph
    _near_miss,
    st.fixed_dictionaries({"decisions": st.lists(_near_miss, min_size=1, max_size=2)}),
    st.fixed_dictionaries({"decisions": _junk}),
    st.fixed_dictionaries({"decisions": st.dictionaries(st.sampled_from(["c_email", "x"]), _near_miss, max_size=2)}),
    st.fixed_dictionaries({"decisions": st.just([{"type": "approve"}]), "extra": _junk}),
)


class Agent:
    """One agent on a real checkpointer; counts executions of its gated tool."""

    def __init__(self, saver: Any, interrupt_mode: str) -> None:
        self.runs = 0

        @tool
        def send_email(to: str, body: str) -> str:
            """Send an email."""
            self.runs += 1
            return f"sent to {to}"

        def reply(messages: list[Any]) -> AIMessage:
            if isinstance(messages[-1], ToolMessage):
                return AIMessage("done")
            return AIMessage("", tool_calls=[tool_call("send_email", {"to": "a@b.c", "body": "hi"}, id="c_email")])

        middleware = HumanInTheLoopMiddleware(
            {"send_email": {"allowed_decisions": ["approve", "edit", "reject"]}}, interrupt_mode=interrupt_mode)  # type: ignore[arg-type]
        self.graph: Any = create_agent(ScriptedChatModel(default=reply), [send_email], middleware=[middleware],
                                  checkpointer=saver)


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(tmp_path_factory.mktemp("hitl") / "junk.sqlite", check_same_thread=False)
    yield conn
    conn.close()


def _attempt(agent: Agent, mode: str, value: Any, config: Any) -> None:
    if mode == "invoke":
        agent.graph.invoke(Command(resume=value), config)
    else:
        asyncio.run(agent.graph.ainvoke(Command(resume=value), config))


@pytest.mark.parametrize("interrupt_mode", ["batched", "per_call"])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_junk_resumes_never_run_anything_and_the_next_good_resume_runs_the_tool_once(
    sqlite_file: sqlite3.Connection, mode: str, interrupt_mode: str
) -> None:
    # invoke on a SQLite file (sync checkpointer); ainvoke on InMemorySaver (SqliteSaver has no async API).
    agent = Agent(SqliteSaver(sqlite_file) if mode == "invoke" else InMemorySaver(), interrupt_mode)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(junk=st.lists(_resume, min_size=1, max_size=3))
    def check(junk: list[Any]) -> None:
        config: Any = {"configurable": {"thread_id": f"{mode}-{interrupt_mode}-{next(_threads)}"}}
        before = agent.runs
        agent.graph.invoke({"messages": [HumanMessage("go")]}, config)
        pending = agent.graph.get_state(config).interrupts
        assert len(pending) == 1
        for value in junk:
            try:
                _attempt(agent, mode, value, config)
            except TypeError:  # LangGraph itself, reading a top-level dict with a non-str key as a resume map
                assert isinstance(value, dict) and not all(isinstance(k, str) for k in value)
                assert agent.graph.get_state(config).interrupts == pending and agent.runs == before
                continue
            except InvalidResumeError as err:
                assert isinstance(err, MiddlewareError) and is_invalid_resume(err)
                assert err.middleware == "HumanInTheLoopMiddleware" and err.hook == "after_model"
                assert agent.graph.get_state(config).interrupts == pending  # nothing recorded
                assert agent.runs == before
                continue
            if agent.graph.get_state(config).interrupts == pending:  # LangGraph read {} as an empty resume map
                assert value == {} and agent.runs == before
                continue
            # A junk value the format accepts is a real answer: it resolved the review (the tool ran at most once).
            assert agent.graph.get_state(config).interrupts == ()
            assert agent.runs - before <= 1
            return
        _attempt(agent, mode, {"decisions": [{"type": "approve"}]}, config)
        assert agent.runs - before == 1  # exactly once, however many bad values came first
        state = agent.graph.get_state(config)
        assert state.interrupts == () and state.values["messages"][-1].content == "done"

    check()


@pytest.mark.parametrize(
    "value",
    [
        {"decisions": [{"type": ["approve"]}]},  # unhashable decision type
        {"decisions": [{"type": {"approve": 1}}]},
        {"decisions": [{"type": "edit", "edited_action": {"args": {1: "x", "to": "a", "body": "b"}}}]},
        {"decisions": [{"type": "edit", "edited_action": {"args": {("to",): "x"}}}]},
        {"decisions": [{"type": "edit", "edited_action": {"name": 3, "args": {"to": "a", "body": "b"}}}]},
        {"decisions": [{"type": "edit", "edited_action": {"args": {"to": "a", "body": "b"}, "id": "x"}}]},
        {"decisions": [{"type": "reject", "message": b"bytes"}]},
        {"decisions": ({"type": "approve"}, {"type": "approve"})},
        {"decisions": {1: {"type": "approve"}}},
        {"decisions": [{"type": "approve"}], 7: "x"},
        [{"type": "approve"}],
    ],
)
def test_each_known_poison_is_refused_before_anything_runs(value: Any) -> None:
    agent = Agent(InMemorySaver(), "batched")
    config: Any = {"configurable": {"thread_id": "t"}}
    agent.graph.invoke({"messages": [HumanMessage("go")]}, config)
    for _ in range(2):  # never recorded, so never replayed
        with pytest.raises(InvalidResumeError):
            agent.graph.invoke(Command(resume=value), config)
    agent.graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert agent.runs == 1


def test_a_sqlite_thread_survives_junk_across_connections(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    config: Any = {"configurable": {"thread_id": "t"}}
    for value in ({"decisions": [{"type": "edit", "edited_action": {"args": {1: "x"}}}]}, {"decisions": "no"}):
        conn = sqlite3.connect(db, check_same_thread=False)
        agent = Agent(SqliteSaver(conn), "batched")
        if not agent.graph.get_state(config).interrupts:
            agent.graph.invoke({"messages": [HumanMessage("go")]}, config)
        with pytest.raises(InvalidResumeError):
            agent.graph.invoke(Command(resume=value), config)
        conn.close()
    conn = sqlite3.connect(db, check_same_thread=False)
    agent = Agent(SqliteSaver(conn), "batched")
    agent.graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert agent.runs == 1
    conn.close()
