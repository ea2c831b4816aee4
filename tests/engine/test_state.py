"""``StateSemantics.apply``: the state a node's later hooks see is what LangGraph's reducers make of the updates, also
where it appends a model's answer without the channel machinery (``add_messages`` would only append)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langgraph.graph import StateGraph
from langgraph.graph.message import add_messages

from middleware_kit._engine.state import StateSemantics
from middleware_kit.types import AgentState

_CHANNELS = StateGraph(AgentState).channels
SEMANTICS = StateSemantics(frozenset(AgentState.__annotations__), _CHANNELS)

_IDS = st.sampled_from(["a", "b", "c", "d", "e", None])


@st.composite
def _message(draw: Any) -> Any:
    kind = draw(st.sampled_from(["ai", "human", "tool", "system", "chunk", "remove"]))
    id_ = draw(_IDS)
    text = draw(st.text(max_size=3))
    if kind == "remove":
        return RemoveMessage(id=id_ or "a")
    if kind == "tool":
        return ToolMessage(text, tool_call_id="c1", id=id_)
    cls = {"ai": AIMessage, "human": HumanMessage, "system": SystemMessage, "chunk": AIMessageChunk}[kind]
    return cls(text, id=id_)


def _history(messages: list[Any]) -> list[Any]:
    """A state's messages: what ``add_messages`` made of them (ids set, chunks converted, removals applied)."""
    return list(add_messages([], [m for m in messages if not isinstance(m, RemoveMessage)]))


def _reduced(history: list[Any], update: list[Any]) -> list[Any] | Exception:
    try:
        return list(add_messages(list(history), [m.model_copy() for m in update]))
    except Exception as exc:  # what the reducer raises is what apply must raise too
        return exc


@settings(max_examples=300, deadline=None)
@given(st.lists(_message(), max_size=5), st.lists(_message(), min_size=1, max_size=4))
def test_apply_gives_what_add_messages_gives(existing: list[Any], update: list[Any]) -> None:
    history = _history(existing)
    expected = _reduced(history, update)
    try:
        got = SEMANTICS.apply({"messages": history}, {"messages": [m.model_copy() for m in update]})["messages"]
    except Exception as exc:
        assert isinstance(expected, Exception) and type(exc) is type(expected)
        return
    assert not isinstance(expected, Exception)
    assert [(type(m), m.content) for m in got] == [(type(m), m.content) for m in expected]
    if all(m.id is not None for m in update):  # else the reducer draws ids itself (uuid4), different in each run
        assert [m.id for m in got] == [m.id for m in expected]


def test_a_new_answer_is_appended_and_the_history_is_left_as_it_was() -> None:
    history = _history([HumanMessage("hi", id="h")])
    answer = AIMessage("hello", id="a1")
    view = {"messages": history}
    got = SEMANTICS.apply(view, {"messages": [answer]})["messages"]
    assert got == [*history, answer] and got[-1] is answer
    assert view["messages"] == history and len(history) == 1


def test_an_answer_with_an_existing_id_replaces_the_message_as_the_reducer_does() -> None:
    history = _history([HumanMessage("hi", id="h"), AIMessage("draft", id="a1")])
    got = SEMANTICS.apply({"messages": history}, {"messages": [AIMessage("final", id="a1")]})["messages"]
    assert [(m.id, m.content) for m in got] == [("h", "hi"), ("a1", "final")]
