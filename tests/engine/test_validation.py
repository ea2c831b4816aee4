"""Hook return values validated to the element (unit level; wired into the engine, see tests/integration/
test_fail_fast.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.types import Command, Overwrite

from middleware_kit._engine.validation import (
    check_model_request,
    check_model_response,
    check_state_update,
    check_tool_result,
)
from middleware_kit.errors import HookReturnError, HookValueError
from middleware_kit.testing import ScriptedChatModel, make_request, tool_call
from middleware_kit.types import ExtendedModelResponse, ModelResponse, ToolCallRequest


def test_valid_message_updates_pass() -> None:
    for value in (
        [HumanMessage("a"), AIMessage("b")],
        AIMessage("b"),
        "hello",
        ("user", "hi"),
        {"role": "user", "content": "hi"},
        [("assistant", "x"), RemoveMessage(id="1")],
        Overwrite([HumanMessage("a")]),
        [],
    ):
        check_state_update({"messages": value}, "M", "before_model")
    check_state_update({"other": 0}, "M", "before_model")


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (0, "{'messages': ...}"),
        ([0], "{'messages': ...}[0]"),
        ([HumanMessage("a"), None], "{'messages': ...}[1]"),
        ([{"x": 1}], "{'messages': ...}[0]"),
        ([("a", "b", "c")], "{'messages': ...}[0]"),
        ([["nested"]], "{'messages': ...}[0]"),
        (Overwrite([1]), "{'messages': ...}[0]"),
    ],
)
def test_junk_in_messages_names_middleware_hook_and_element(value: Any, where: str) -> None:
    with pytest.raises(HookValueError) as info:
        check_state_update({"messages": value}, "Audit", "after_model")
    err = info.value
    assert (err.middleware, err.hook) == ("Audit", "after_model")
    assert str(err).startswith(f"Audit.after_model returned {where} = ")
    assert isinstance(err, HookReturnError) and isinstance(err, TypeError)


def test_model_response_result_must_be_a_list_of_messages() -> None:
    check_model_response(ModelResponse(result=[AIMessage("ok")]), "W")
    with pytest.raises(HookValueError) as info:
        check_model_response(ModelResponse(result="hello"), "W")  # type: ignore[arg-type]
    assert str(info.value) == (
        "W.wrap_model_call returned ModelResponse(result=a str ('hello')) (a str would be read as one message per "
        "character); result must be a list of messages. Return ModelResponse(result=[AIMessage(...)]) or the "
        "AIMessage itself."
    )
    with pytest.raises(HookValueError, match=r"ModelResponse.result\[0\] = a int \(0\)"):
        check_model_response(ModelResponse(result=[0]), "W")  # type: ignore[list-item]
    with pytest.raises(HookValueError, match=r"ModelResponse.result\[1\]"):
        check_model_response(ModelResponse(result=[AIMessage("a"), ("ai", "b")]), "W")  # type: ignore[list-item]


def test_extended_model_response_command_and_update() -> None:
    ok = ModelResponse(result=[AIMessage("ok")])
    check_model_response(ExtendedModelResponse(ok, Command(update={"messages": [HumanMessage("x")]})), "W")
    check_model_response(ExtendedModelResponse(ok, None), "W")
    with pytest.raises(HookValueError, match=r"ExtendedModelResponse\(command=a str \('x'\)\)"):
        check_model_response(ExtendedModelResponse(ok, "x"), "W")  # type: ignore[arg-type]
    with pytest.raises(HookValueError, match=r"Command\(update=a int \(1\)\)"):
        check_model_response(ExtendedModelResponse(ok, Command(update=1)), "W")
    with pytest.raises(HookValueError, match=r"\{'messages': ...\}\[0\]"):
        check_model_response(ExtendedModelResponse(ok, Command(update={"messages": [0]})), "W")
    with pytest.raises(HookValueError, match="result must be a list"):
        check_model_response(ExtendedModelResponse(ModelResponse(result="x"), None), "W")  # type: ignore[arg-type]


def test_model_request_messages_are_checked_only_when_replaced() -> None:
    before = make_request([HumanMessage("q")], model=ScriptedChatModel(["ok"]))
    check_model_request(before, before, "R", "modify_model_request")
    check_model_request(before.override(messages=[AIMessage("x")]), before, "R", "modify_model_request")
    with pytest.raises(HookValueError) as info:
        check_model_request(before.override(messages=[0]), before, "R", "modify_model_request")  # type: ignore[list-item]
    assert str(info.value).startswith("R.modify_model_request returned request.messages[0] = a int (0)")
    with pytest.raises(HookValueError):
        check_model_request(before.override(messages="hi"), before, "R", "modify_model_request")  # type: ignore[arg-type]


def _tool_request() -> ToolCallRequest:
    return ToolCallRequest(tool_call_({"a": 1}), None, {"messages": []}, None)


def tool_call_(args: dict[str, Any]) -> Any:
    return tool_call("add", args, id="call_1")


def test_tool_results() -> None:
    request = _tool_request()
    check_tool_result(ToolMessage("3", tool_call_id="call_1"), request, "T", "wrap_tool_call")
    check_tool_result(Command(update={"messages": [ToolMessage("3", tool_call_id="call_1")]}), request, "T", "x")
    with pytest.raises(HookValueError) as info:
        check_tool_result(ToolMessage("3", tool_call_id="call_9"), request, "T", "wrap_tool_call")
    assert str(info.value) == (
        "T.wrap_tool_call returned a ToolMessage with tool_call_id='call_9' for the call 'call_1' of tool 'add': the "
        "model would see an answer to a call it never made and no answer to its own. Build the message with "
        "tool_call_id=request.tool_call['id']."
    )
    with pytest.raises(HookValueError, match=r"Command\(update=a int \(1\)\)"):
        check_tool_result(Command(update=1), request, "T", "wrap_tool_call")
    with pytest.raises(HookValueError):
        check_tool_result(Command(update={1: "x"}), request, "T", "wrap_tool_call")
    check_tool_result(Command(update=[("messages", [ToolMessage("3", tool_call_id="call_1")])]), request, "T", "x")


_junk = st.recursive(
    st.none() | st.integers() | st.text(max_size=4) | st.builds(AIMessage, st.text(max_size=4)),
    lambda inner: st.lists(inner, max_size=3)
    | st.tuples(inner, inner)
    | st.dictionaries(st.sampled_from(["role", "content", "type", "x"]), inner, max_size=3),
    max_leaves=6,
)


@given(_junk)
def test_any_messages_value_is_accepted_by_add_messages_or_refused(value: Any) -> None:
    """What passes the check, add_messages takes; what it refuses is a HookValueError."""
    from langgraph.graph.message import add_messages

    try:
        check_state_update({"messages": value}, "M", "before_model")
    except HookValueError:
        return
    add_messages([], value)


def test_tool_failure_note_is_added_once_and_keeps_the_type() -> None:
    from langgraph.errors import GraphInterrupt

    from middleware_kit._engine.validation import note_tool_failure

    exc = RuntimeError("database is down")
    call = tool_call("db", {}, id="call_7")
    note_tool_failure(exc, call)
    note_tool_failure(exc, call)
    assert exc.__notes__ == [
        "While running the tool 'db' (tool call id 'call_7'). To answer the model with the error instead, add "
        "ToolErrorMiddleware(on_error) to middleware=[...]; to retry the call, ToolRetryMiddleware(...)."
    ]
    for untouched in (GraphInterrupt(), HookValueError("x", middleware="m", hook="h"), KeyboardInterrupt()):
        note_tool_failure(untouched, call)
        assert not hasattr(untouched, "__notes__")
