"""ContextEditingMiddleware: clears old tool results for the model call only."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit.middlewares import context_editing
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.context_editing import ClearToolUsesEdit, ContextEditingMiddleware
from middleware_kit.testing import ScriptedChatModel, make_request, tool_call
from tests.conftest import Runner


@tool
def fetch(page: int) -> str:
    """Fetch a long page."""
    return f"page {page}: " + "lorem ipsum " * 50


@tool
def note(text: str) -> str:
    """Keep a note."""
    return f"noted {text}"


def fetching_model(pages: int) -> ScriptedChatModel:
    steps: list[Any] = [AIMessage("", tool_calls=[tool_call("fetch", {"page": p}, id=f"f{p}")]) for p in range(pages)]
    return ScriptedChatModel([*steps, "summary"])


def tool_contents(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.content)[:6] for m in messages if isinstance(m, ToolMessage)]


def test_clears_old_results_for_the_model_only(run: Runner) -> None:
    model = fetching_model(5)
    saver = InMemorySaver()
    mw = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=100, keep=2)])
    agent = create_agent(model, [fetch], middleware=[mw], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    result = run(agent, {"messages": [HumanMessage("read it all")]}, config=config)

    last = list(model.calls[-1].messages)
    assert tool_contents(last) == ["[clear", "[clear", "[clear", "page 3", "page 4"]
    cleared = [m for m in last if isinstance(m, ToolMessage) and m.content == "[cleared]"]
    # Pairing holds: each cleared result keeps its call id, and the calls are still on their AIMessages.
    assert [m.tool_call_id for m in cleared] == ["f0", "f1", "f2"]
    assert cleared[0].response_metadata["context_editing"] == {"cleared": True, "strategy": "clear_tool_uses"}
    # The stored history (result and checkpoint) keeps every original.
    assert tool_contents(result["messages"]) == ["page 0", "page 1", "page 2", "page 3", "page 4"]
    stored = agent.get_state(config).values["messages"]
    assert tool_contents(stored) == ["page 0", "page 1", "page 2", "page 3", "page 4"]
    assert all("context_editing" not in m.response_metadata for m in stored)


def test_below_the_trigger_nothing_changes(run: Runner) -> None:
    model = fetching_model(2)
    run(create_agent(model, [fetch], middleware=[ContextEditingMiddleware()]), {"messages": [HumanMessage("q")]})
    assert tool_contents(model.calls[-1].messages) == ["page 0", "page 1"]


def test_clear_inputs_exclude_tools_placeholder(run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("fetch", {"page": 0}, id="f0"), tool_call("note", {"text": "x"}, id="n0")]),
        AIMessage("", tool_calls=[tool_call("fetch", {"page": 1}, id="f1")]),
        "done",
    ])
    edit = ClearToolUsesEdit(trigger=10, keep=1, clear_tool_inputs=True, exclude_tools=["note"], placeholder="gone")
    run(create_agent(model, [fetch, note], middleware=[ContextEditingMiddleware(edits=[edit])]),
        {"messages": [HumanMessage("q")]})
    sent = list(model.calls[-1].messages)
    assert [m.content[:6] for m in sent if isinstance(m, ToolMessage)] == ["gone", "noted ", "page 1"]
    first_ai = sent[1]
    assert isinstance(first_ai, AIMessage)
    assert [c["args"] for c in first_ai.tool_calls] == [{}, {"text": "x"}]
    assert first_ai.response_metadata["context_editing"]["cleared_tool_inputs"] == ["f0"]


def test_clear_at_least_stops_early(run: Runner) -> None:
    model = fetching_model(4)
    edit = ClearToolUsesEdit(trigger=10, keep=0, clear_at_least=50)
    run(create_agent(model, [fetch], middleware=[ContextEditingMiddleware(edits=[edit])]),
        {"messages": [HumanMessage("q")]})
    assert tool_contents(model.calls[-1].messages) == ["[clear", "page 1", "page 2", "page 3"]


def test_custom_token_counter_and_patched_approximation(run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[int] = []

    def by_messages(messages: Sequence[BaseMessage]) -> int:
        counted.append(len(messages))
        return len(messages) * 1000

    model = fetching_model(3)
    mw = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=5000, keep=1)], token_counter=by_messages)
    run(create_agent(model, [fetch], middleware=[mw]), {"messages": [HumanMessage("q")]})
    assert counted and tool_contents(model.calls[-1].messages) == ["[clear", "[clear", "page 2"]

    monkeypatch.setattr(context_editing, "count_tokens_approximately", lambda messages: 10**6)
    model = fetching_model(2)
    run(create_agent(model, [fetch], middleware=[ContextEditingMiddleware()]), {"messages": [HumanMessage("q")]})
    assert tool_contents(model.calls[-1].messages) == ["page 0", "page 1"]  # keep=3: nothing old enough


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_model_counting_falls_back_when_the_model_cannot_count() -> None:
    class Counting(ScriptedChatModel):
        def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
            return 10**6

    history: list[Any] = [HumanMessage("q")]
    for p in range(4):
        history += [AIMessage("", tool_calls=[tool_call("fetch", {"page": p}, id=f"c{p}")]),
                    ToolMessage(f"page {p}", tool_call_id=f"c{p}")]
    mw = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=1000, keep=1)], token_count_method="model")
    edited = mw.modify_model_request(make_request(history, model=Counting()), {})
    assert tool_contents(edited.messages) == ["[clear", "[clear", "[clear", "page 3"]
    # ScriptedChatModel's own counter needs a tokenizer package; either way the edit works.
    edited = mw.modify_model_request(make_request(history, model=ScriptedChatModel()), {})
    assert len(edited.messages) == len(history)


def test_unchanged_request_is_returned_as_is() -> None:
    request = make_request(["hi"])
    assert ContextEditingMiddleware().modify_model_request(request, {}) is request


def test_invalid_settings() -> None:
    with pytest.raises(MiddlewareConfigError, match="keep"):
        ClearToolUsesEdit(keep=-1)
    with pytest.raises(MiddlewareConfigError, match="list of tool names"):
        ClearToolUsesEdit(exclude_tools="fetch")
    with pytest.raises(MiddlewareConfigError, match="token_count_method"):
        ContextEditingMiddleware(token_count_method="exact")  # type: ignore[arg-type]
    with pytest.raises(MiddlewareConfigError, match="apply"):
        ContextEditingMiddleware(edits=[object()])  # type: ignore[list-item]


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    edits = [ClearToolUsesEdit(trigger=10**9)]
    mw = ContextEditingMiddleware(edits=edits)
    edits.append(ClearToolUsesEdit(trigger=0, keep=0))  # changing the caller's list afterwards changes nothing
    assert len(mw.edits) == 1
    create_agent(fetching_model(1), [fetch], middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'edits'"):
        mw.edits = ()
    changed = mw.replace(edits=[ClearToolUsesEdit(trigger=100, keep=2)])
    model = fetching_model(5)
    run(create_agent(model, [fetch], middleware=[changed]), {"messages": [HumanMessage("q")]})
    assert tool_contents(model.calls[-1].messages) == ["[clear", "[clear", "[clear", "page 3", "page 4"]
    model = fetching_model(5)
    run(create_agent(model, [fetch], middleware=[mw]), {"messages": [HumanMessage("q")]})
    assert tool_contents(model.calls[-1].messages)[0] == "page 0"  # the original is unchanged


def test_clear_tool_uses_edit_copies_exclude_tools() -> None:
    names = ["note"]
    edit = ClearToolUsesEdit(exclude_tools=names)
    names.append("fetch")
    assert edit.exclude_tools == ("note",)


def _history() -> list[Any]:
    messages: list[Any] = [HumanMessage("q")]
    for i in range(3):
        messages += [AIMessage("", tool_calls=[tool_call("fetch", {"page": i}, id=f"f{i}")]),
                     ToolMessage("x" * 400, tool_call_id=f"f{i}")]
    return messages


def test_wrap_model_call_called_directly_edits_like_langchain() -> None:
    mw = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=50, keep=1, clear_tool_inputs=True)])
    request = make_request(_history())
    seen: list[Any] = []

    def handler(req: Any) -> Any:
        seen.append(req)
        return AIMessage("ok")

    async def ahandler(req: Any) -> Any:
        return handler(req)

    direct: Any = mw  # called as LangChain's tests call it: wrap_model_call(request, handler)
    direct.wrap_model_call(request, handler)
    asyncio.run(direct.awrap_model_call(request, ahandler))
    for edited in seen:
        assert tool_contents(edited.messages) == ["[clear", "[clear", "xxxxxx"]
        assert edited.messages[1].tool_calls[0]["args"] == {}
    assert tool_contents(request.messages) == ["xxxxxx"] * 3  # the caller's request is untouched


def test_inside_an_agent_the_wrap_hook_does_not_edit_again() -> None:
    calls: list[int] = []

    def counter(messages: Sequence[BaseMessage]) -> int:
        calls.append(len(messages))
        return 10**9

    model = fetching_model(2)
    mw = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=1, keep=0)], token_counter=counter)
    agent: Any = create_agent(model, [fetch], middleware=[mw])
    assert "wrap_model_call" not in str(agent.middleware_plan)  # LangChain's hook is for direct calls only
    agent.invoke({"messages": [HumanMessage("q")]})
    assert len(calls) == len(model.calls)  # one count per model call: modify_model_request edits, the wrap passes
