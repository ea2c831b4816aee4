"""HumanInTheLoopMiddleware: every decision in both modes, runtime policies, resumes that lose nothing, durability."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from unittest.mock import patch

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import is_invalid_resume
from langgraph.types import Command
from pydantic import BaseModel, Field, ValidationError

from middleware_kit import (
    MiddlewareConfigError,
    MiddlewareError,
    after_model,
    create_agent,
    wrap_model_call,
    wrap_tool_call,
)
from middleware_kit.middlewares import human_in_the_loop as hitl_module
from middleware_kit.middlewares.human_in_the_loop import (
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
    InvalidResumeError,
)
from middleware_kit.testing import ScriptedChatModel, make_runtime, tool_call
from tests.conftest import Runner

ROOT = Path(__file__).resolve().parents[2]
Mode = Literal["batched", "per_call"]
MODES: list[Mode] = ["batched", "per_call"]


# -- building blocks ---------------------------------------------------------------------------------------------
@dataclass
class Kit:
    """Tools that record every execution, and the agent's model."""

    ran: list[tuple[str, dict[str, Any]]]
    tools: list[BaseTool]


@pytest.fixture
def kit() -> Kit:
    ran: list[tuple[str, dict[str, Any]]] = []

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        ran.append(("send_email", {"to": to, "body": body}))
        return f"sent to {to}"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append(("add", {"a": a, "b": b}))
        return a + b

    return Kit(ran, [send_email, delete_file, add])


EMAIL = tool_call("send_email", {"to": "ann@example.com", "body": "hi"}, id="c_email")
DELETE = tool_call("delete_file", {"path": "/tmp/x"}, id="c_delete")
ADD = tool_call("add", {"a": 1, "b": 2}, id="c_add")


def turn(*calls: Any, answer: str = "done") -> ScriptedChatModel:
    return ScriptedChatModel([AIMessage("", tool_calls=list(calls)), answer])


def config(thread: str = "t") -> Any:
    return {"configurable": {"thread_id": thread}}


def pending(agent: Any, thread: str = "t") -> list[Any]:
    return [i.value for i in agent.get_state(config(thread)).interrupts]


def resume_all(run: Runner, agent: Any, decision_for: Any, thread: str = "t") -> Any:
    """Answer every pending interrupt (per_call mode: one after the other) with ``decision_for(action_request)``."""
    out = None
    for _ in range(10):
        waiting = agent.get_state(config(thread)).interrupts
        if not waiting:
            return out
        (only,) = waiting
        decisions = [decision_for(r) for r in requests_of(only.value)]
        out = run(agent, Command(resume={"decisions": decisions}), config=config(thread))
    raise AssertionError("never finished")


def requests_of(value: Any) -> list[Any]:
    """The action requests of an interrupt value in either mode (``tool_approval`` in per-call mode)."""
    if value.get("type") == "tool_approval":
        return [{"name": value["name"], "args": value["args"], "description": value["description"],
                 "id": value["tool_call_id"]}]
    return list(value["action_requests"])


def assert_paired(messages: list[Any]) -> None:
    """Every tool call has exactly one ToolMessage, right after its AIMessage (and vice versa)."""
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            answers = []
            j = i + 1
            while j < len(messages) and isinstance(messages[j], ToolMessage):
                answers.append(messages[j].tool_call_id)
                j += 1
            assert sorted(answers) == sorted(str(c["id"]) for c in message.tool_calls), messages


# -- the payload ---------------------------------------------------------------------------------------------------
def test_payload_lists_gated_calls_only_in_the_langchain_shape(run: Runner, kit: Kit) -> None:
    def describe(call: Any, state: Any, runtime: Any) -> str:
        return f"Delete {call['args']['path']}? ({len(state['messages'])} messages so far)"

    hitl = HumanInTheLoopMiddleware(
        {
            "send_email": True,
            "delete_file": {"allowed_decisions": ["approve", "reject"], "description": describe},
            "add": False,
        }
    )
    agent = create_agent(turn(EMAIL, ADD, DELETE), kit.tools, middleware=[hitl], checkpointer=InMemorySaver())
    out = run(agent, {"messages": [HumanMessage("go")]}, config=config())
    (request,) = out["__interrupt__"]
    assert request.value == {
        "action_requests": [
            {
                "name": "send_email",
                "args": {"to": "ann@example.com", "body": "hi"},
                "description": "Tool execution requires approval\n\nTool: send_email\n"
                "Args: {'to': 'ann@example.com', 'body': 'hi'}",
                "id": "c_email",
            },
            {"name": "delete_file", "args": {"path": "/tmp/x"}, "description": "Delete /tmp/x? (2 messages so far)",
             "id": "c_delete"},
        ],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject", "respond"]},
            {"action_name": "delete_file", "allowed_decisions": ["approve", "reject"]},
        ],
    }
    schema = json.dumps(request.response_schema)  # surfaced to clients for forms, from the validating adapter
    assert '"decisions"' in schema and '"respond"' in schema and '"edited_action"' in schema
    assert kit.ran == []  # nothing of the turn runs before the decisions, not even the ungated call


def test_description_prefix_and_static_description(run: Runner, kit: Kit) -> None:
    hitl = HumanInTheLoopMiddleware(
        {"send_email": {"allowed_decisions": ["approve"], "description": "Check the recipient"}, "delete_file": True},
        description_prefix="Please review",
    )
    agent = create_agent(turn(EMAIL, DELETE), kit.tools, middleware=[hitl], checkpointer=InMemorySaver())
    requests = run(agent, {"messages": [HumanMessage("go")]}, config=config())["__interrupt__"][0].value
    descriptions = [r["description"] for r in requests["action_requests"]]
    assert descriptions == ["Check the recipient", "Please review\n\nTool: delete_file\nArgs: {'path': '/tmp/x'}"]


# -- every decision, both modes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode_", MODES)
def test_approve_runs_the_call_once(run: Runner, kit: Kit, mode_: Mode) -> None:
    model = turn(EMAIL)
    agent = create_agent(model, kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True},
                         interrupt_mode=mode_)], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    out = resume_all(run, agent, lambda r: {"type": "approve"})
    assert kit.ran == [("send_email", {"to": "ann@example.com", "body": "hi"})]
    assert [m.content for m in out["messages"][2:]] == ["sent to ann@example.com", "done"]
    assert out["messages"][1].tool_calls == [EMAIL]
    assert "human_review" not in out["messages"][1].response_metadata  # the AIMessage is returned unchanged
    assert agent.get_state(config()).values["human_review"] == {  # an audit trail in the thread: approvals too
        "c_email": {"decision": "approve", "middleware": "HumanInTheLoopMiddleware"}
    }
    assert model.call_count == 2  # the model never re-runs on resume


@pytest.mark.parametrize("mode_", MODES)
def test_edit_runs_the_reviewers_call_and_the_model_is_told(run: Runner, kit: Kit, mode_: Mode) -> None:
    model = turn(EMAIL)
    agent = create_agent(model, kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True},
                         interrupt_mode=mode_)], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    edited = {"name": "send_email", "args": {"to": "bob@example.com", "body": "hello"}}
    out = resume_all(run, agent, lambda r: {"type": "edit", "edited_action": edited})
    assert kit.ran == [("send_email", {"to": "bob@example.com", "body": "hello"})]
    ai, result = out["messages"][1], out["messages"][2]
    assert ai.tool_calls == [EMAIL]  # as LangChain 1.5: the history keeps what the model asked for
    assert agent.get_state(config()).values["human_review"]["c_email"] == {
        "decision": "edit", "middleware": "HumanInTheLoopMiddleware",
        "requested": {"name": "send_email", "args": {"to": "ann@example.com", "body": "hi"}},
        "executed": edited,
    }
    assert result.tool_call_id == "c_email" and result.status == "success"
    assert result.content.startswith("Note: a human reviewer replaced this tool call before it ran.")  # LangChain's
    assert 'Executed instead: send_email with arguments {"to": "bob@example.com", "body": "hello"}.' in result.content
    assert "Do not re-issue your original call." in result.content
    assert result.content.endswith("\n\nTool response:\nsent to bob@example.com")
    assert model.calls[1].messages[2].content == result.content  # the model sees the note


def test_per_call_edit_runs_the_reviewed_tool(run: Runner, kit: Kit) -> None:
    # As LangChain 1.5: per call, the edit's tool is pinned (the response schema says so: a const name).
    agent = create_agent(turn(DELETE), kit.tools, middleware=[HumanInTheLoopMiddleware({"delete_file": True},
                         interrupt_mode="per_call")], checkpointer=InMemorySaver())
    (pending_,) = run(agent, {"messages": [HumanMessage("go")]}, config=config())["__interrupt__"]
    edited = pending_.response_schema["$defs"]["EditedAction"]["properties"]
    assert edited["name"]["const"] == "delete_file" and edited["args"] == {"$ref": "#/$defs/delete_file"}
    switch = {"type": "edit", "edited_action": {"name": "add", "args": {"a": 2, "b": 3}}}
    with pytest.raises(ValidationError, match=r"edit\.edited_action\.name\n  Input should be 'delete_file'") as err:
        run(agent, Command(resume=switch), config=config())
    assert isinstance(err.value, InvalidResumeError) and err.value.tool_name == "delete_file"
    run(agent, Command(resume={"type": "edit", "edited_action": {"args": {"path": "/tmp/y"}}}), config=config())
    assert kit.ran == [("delete_file", {"path": "/tmp/y"})]


def test_edit_may_switch_to_another_offered_tool(run: Runner, kit: Kit) -> None:
    agent = create_agent(turn(DELETE), kit.tools, middleware=[HumanInTheLoopMiddleware({"delete_file": True})],
                         checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    out = resume_all(run, agent, lambda r: {"type": "edit", "edited_action": {"name": "add", "args": {"a": 2, "b": 3}}})
    assert kit.ran == [("add", {"a": 2, "b": 3})]
    assert out["messages"][2].name == "add"
    assert 'Executed instead: add with arguments {"a": 2, "b": 3}.' in out["messages"][2].content
    assert out["messages"][1].tool_calls == [DELETE]  # the model's call stays in the history
    assert agent.get_state(config()).values["human_review"]["c_delete"]["requested"]["name"] == "delete_file"


def test_return_direct_is_decided_by_the_tool_that_ran(run: Runner) -> None:
    @tool(return_direct=True)
    def finish(answer: str) -> str:
        """Finish with an answer."""
        return f"final: {answer}"

    @tool
    def draft(text: str) -> str:
        """Draft a text."""
        return f"draft: {text}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("draft", {"text": "x"}, id="c_d")]), "more"])
    agent = create_agent(model, [finish, draft], middleware=[HumanInTheLoopMiddleware({"draft": True})],
                         checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    edit = {"type": "edit", "edited_action": {"name": "finish", "args": {"answer": "y"}}}
    out = run(agent, Command(resume={"decisions": [edit]}), config=config())
    assert out["messages"][1].tool_calls[0]["name"] == "draft"  # the model's call stays in the history
    assert out["messages"][-1].name == "finish" and str(out["messages"][-1].content).endswith("final: y")
    assert model.call_count == 1  # the tool that ran returns directly


def test_a_reused_call_id_does_not_replay_an_earlier_edit(run: Runner, kit: Kit) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("delete_file", {"path": "/a"}, id="c_1")]),
                               AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="c_1")]), "done"])
    agent = create_agent(model, kit.tools, middleware=[HumanInTheLoopMiddleware({"delete_file": True})],
                         checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/b"}}}
    out = run(agent, Command(resume={"decisions": [edit]}), config=config())
    assert kit.ran == [("delete_file", {"path": "/b"}), ("add", {"a": 1, "b": 2})]
    assert "Executed instead" not in str(out["messages"][-2].content)
    assert agent.get_state(config()).values.get("hitl_edits") == {}


@pytest.mark.parametrize("mode_", MODES)
@pytest.mark.parametrize("message", [None, "Wrong recipient."])
def test_reject_answers_the_call_with_an_error_and_nothing_dangles(
    run: Runner, kit: Kit, mode_: Mode, message: str | None
) -> None:
    model = turn(EMAIL, ADD)
    agent = create_agent(model, kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True},
                         interrupt_mode=mode_)], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    decision: dict[str, Any] = {"type": "reject"} if message is None else {"type": "reject", "message": message}
    out = resume_all(run, agent, lambda r: decision)
    assert kit.ran == [("add", {"a": 1, "b": 2})]  # the ungated call of the turn still runs
    messages = out["messages"]
    assert messages[1].tool_calls == [EMAIL, ADD]  # the AIMessage keeps the rejected call
    rejection = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "c_email")
    assert rejection.status == "error" and rejection.name == "send_email"
    if message:  # LangChain 1.5's texts
        assert rejection.content == f"User rejected the tool call for `send_email` with reason: {message}"
    else:
        assert str(rejection.content).startswith("User rejected the tool call for `send_email` with id c_email.")
        assert "Do not retry this tool call unless the user explicitly requests it." in rejection.content
    assert_paired(messages)
    assert_paired(list(model.calls[1].messages))  # what the model was sent
    assert not any("was not executed: the run" in str(m.content) for m in messages)  # no framework closing needed


@pytest.mark.parametrize("mode_", MODES)
def test_respond_is_the_tools_result(run: Runner, kit: Kit, mode_: Mode) -> None:
    agent = create_agent(turn(DELETE), kit.tools, middleware=[HumanInTheLoopMiddleware({"delete_file": True},
                         interrupt_mode=mode_)], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    out = resume_all(run, agent, lambda r: {"type": "respond", "message": "Already deleted yesterday."})
    assert kit.ran == []
    answer = out["messages"][2]
    assert (answer.content, answer.status, answer.tool_call_id) == ("Already deleted yesterday.", "success", "c_delete")
    assert out["messages"][-1].content == "done"


def test_every_call_rejected_goes_back_to_the_model(run: Runner, kit: Kit) -> None:
    model = turn(EMAIL, DELETE, answer="ok, I will not")
    agent = create_agent(model, kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True,
                         "delete_file": True})], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    out = run(agent, Command(resume={"decisions": [{"type": "reject"}, {"type": "reject"}]}), config=config())
    assert kit.ran == []
    assert [type(m).__name__ for m in out["messages"]] == [
        "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "AIMessage"
    ]
    assert out["messages"][-1].content == "ok, I will not"


def test_mixed_decisions_keep_call_order(run: Runner, kit: Kit) -> None:
    agent = create_agent(turn(EMAIL, ADD, DELETE), kit.tools, middleware=[HumanInTheLoopMiddleware(
        {"send_email": True, "delete_file": True})], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "x@y.z", "body": "b"}}}
    out = run(agent, Command(resume={"decisions": [edit, {"type": "reject"}]}), config=config())
    ai = out["messages"][1]
    assert [c["id"] for c in ai.tool_calls] == ["c_email", "c_add", "c_delete"]
    assert sorted(name for name, _ in kit.ran) == ["add", "send_email"]
    assert_paired(out["messages"])


# -- resume by id; per-call mode ------------------------------------------------------------------------------------
def test_batched_resume_by_tool_call_id(run: Runner, kit: Kit) -> None:
    agent = create_agent(turn(EMAIL, DELETE), kit.tools, middleware=[HumanInTheLoopMiddleware(
        {"send_email": True, "delete_file": True})], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    out = run(agent, Command(resume={"decisions": {"c_delete": {"type": "approve"},
                                                   "c_email": {"type": "respond", "message": "skip"}}}),
              config=config())
    assert kit.ran == [("delete_file", {"path": "/tmp/x"})]
    by_id = {m.tool_call_id: m.content for m in out["messages"] if isinstance(m, ToolMessage)}
    assert by_id == {"c_email": "skip", "c_delete": "deleted /tmp/x"}


def test_per_call_mode_interrupts_once_per_gated_call(run: Runner, kit: Kit) -> None:
    model = turn(EMAIL, ADD, DELETE)
    agent = create_agent(model, kit.tools, middleware=[HumanInTheLoopMiddleware(
        {"send_email": True, "delete_file": True}, interrupt_mode="per_call")], checkpointer=InMemorySaver())
    first = run(agent, {"messages": [HumanMessage("go")]}, config=config())
    (one,) = first["__interrupt__"]
    assert one.value["type"] == "tool_approval"  # LangChain 1.5's ToolApprovalRequest
    assert (one.value["name"], one.value["tool_call_id"]) == ("send_email", "c_email")
    assert all(f'"{kind}"' in json.dumps(one.response_schema) for kind in ("approve", "edit", "reject", "respond"))
    # LangGraph's resume map, keyed by interrupt id, with one decision as the value.
    second = run(agent, Command(resume={one.id: {"type": "approve"}}), config=config())
    (two,) = second["__interrupt__"]
    assert two.value["name"] == "delete_file"
    assert kit.ran == []  # nothing runs until every call of the turn is decided
    out = run(agent, Command(resume={"type": "reject"}), config=config())
    assert sorted(name for name, _ in kit.ran) == ["add", "send_email"]
    assert out["messages"][-1].content == "done"
    assert model.call_count == 2


# -- malformed resumes lose nothing ---------------------------------------------------------------------------------
EDIT_BAD_ARGS = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": 5}}}
BAD_RESUMES: list[tuple[str, Any, list[str]]] = [
    ("not a dict", "yes", ["must be a dict", "{'type': 'approve'}", "got a str ('yes')"]),
    ("decisions not a list", {"decisions": "approve"}, ["'decisions' must be a list"]),
    ("wrong count", {"decisions": [{"type": "approve"}, {"type": "approve"}]},
     ["Number of human decisions (2) does not match number of hanging tool calls (1).",
      "got 2 decision(s) for 1 reviewed call(s)", "'send_email' (call id 'c_email')"]),
    ("unknown type", {"decisions": [{"type": "aprove"}]},
     ["Unexpected human decision: {'type': 'aprove'}. Decision type 'aprove' is not allowed for tool 'send_email'. "
      "Expected one of ['approve', 'edit', 'reject'] based on the tool's configuration.", "not a decision type"]),
    ("legacy type", {"decisions": [{"type": "accept"}]}, ["'accept' is called 'approve' now"]),
    ("disallowed type", {"decisions": [{"type": "respond", "message": "no"}]},
     ["Decision type 'respond' is not allowed for tool 'send_email'",
      "allowed for 'send_email' (call id 'c_email'): 'approve', 'edit', 'reject'"]),
    ("unhashable type", {"decisions": [{"type": ["approve"]}]}, ["must be a dict with a 'type'"]),
    ("edit args with a non-string key", {"decisions": [{"type": "edit", "edited_action": {"args": {
        1: "x", "to": "a@b.c", "body": "b"}}}]}, ["invalid at 'edited_action.args.1.[key]'", "valid string"]),
    ("decision not a dict", {"decisions": ["approve"]}, ["must be a dict with a 'type', such as {'type': 'approve'}"]),
    ("edit args fail the schema", {"decisions": [EDIT_BAD_ARGS]},
     ["do not match the arguments of 'send_email'", "args.to: Input should be a valid string",
      "args.body: Field required"]),
    ("edit of an unknown tool", {"decisions": [{"type": "edit", "edited_action": {"name": "rm_rf", "args": {}}}]},
     ["calls the tool 'rm_rf', which the model was not offered", "send_email"]),
    ("edit without edited_action", {"decisions": [{"type": "edit"}]}, ["needs 'edited_action'"]),
    ("edit with LangChain's old key", {"decisions": [{"type": "edit", "edited_action": {"name": "send_email",
     "arguments": {}}}]}, ["renamed 'arguments' to 'args'"]),
    ("unexpected key", {"decisions": [{"type": "approve", "mesage": "x"}]}, ["unexpected key(s) ['mesage']"]),
    ("reject message not a str", {"decisions": [{"type": "reject", "message": 3}]},
     ["invalid at 'message': Input should be a valid string"]),
    ("unknown call id", {"decisions": {"nope": {"type": "approve"}}},
     ["unknown tool call id(s) ['nope']", "'send_email' (call id 'c_email')"]),
    ("missing call id", {"decisions": {}}, ["no decision for 'send_email' (call id 'c_email')"]),
    ("extra top-level key", {"decisions": [{"type": "approve"}], "comment": "x"}, ["unknown key(s) ['comment']"]),
]


@pytest.mark.parametrize("mode_", MODES)
@pytest.mark.parametrize(("case", "bad", "expected"), BAD_RESUMES, ids=[c for c, _, _ in BAD_RESUMES])
def test_a_malformed_resume_raises_keeps_the_interrupt_and_a_correct_one_completes(
    run: Runner, kit: Kit, mode_: Mode, case: str, bad: Any, expected: list[str]
) -> None:
    model = turn(EMAIL, ADD)
    hitl = HumanInTheLoopMiddleware(
        {"send_email": {"allowed_decisions": ["approve", "edit", "reject"]}}, interrupt_mode=mode_
    )
    agent = create_agent(model, kit.tools, middleware=[hitl], checkpointer=InMemorySaver())
    first = run(agent, {"messages": [HumanMessage("go")]}, config=config())
    before = pending(agent)
    assert before == [i.value for i in first["__interrupt__"]]
    if mode_ == "per_call" and case == "edit of an unknown tool":  # per call, as LangChain 1.5, the tool is pinned
        expected = ["in per-call mode an edit runs the reviewed tool", "must be 'send_email' (or left out)", "rm_rf"]
    for _ in range(2):  # twice: a bad value is never recorded, so it can never be replayed
        with pytest.raises(InvalidResumeError) as err:
            run(agent, Command(resume=bad), config=config())
        for fragment in expected:
            assert fragment in str(err.value)
        assert str(err.value).endswith("The interrupt is still pending: resume the thread again with a corrected "
                                       "value.")
        assert isinstance(err.value, MiddlewareError) and isinstance(err.value, ValueError)
        assert (err.value.middleware, err.value.hook) == ("HumanInTheLoopMiddleware", "after_model")
        assert is_invalid_resume(err.value)
        assert pending(agent) == before
        assert kit.ran == []
    out = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=config())
    assert sorted(name for name, _ in kit.ran) == ["add", "send_email"]  # each once
    assert out["messages"][-1].content == "done"
    assert model.call_count == 2
    assert pending(agent) == []


def test_error_attributes_name_the_tool_and_what_is_allowed(kit: Kit) -> None:
    agent = create_agent(turn(EMAIL), kit.tools, middleware=[HumanInTheLoopMiddleware(
        {"send_email": {"allowed_decisions": ["approve", "reject"]}})], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("go")]}, config())
    with pytest.raises(InvalidResumeError) as err:
        agent.invoke(Command(resume={"decisions": [{"type": "edit", "edited_action": {"args": {}}}]}), config())
    assert (err.value.tool_name, err.value.tool_call_id, err.value.allowed_decisions) == (
        "send_email", "c_email", ("approve", "reject")
    )
    import pickle

    assert str(pickle.loads(pickle.dumps(err.value))) == str(err.value)


def test_per_call_bad_resume_of_the_second_call_keeps_the_first_decision(run: Runner, kit: Kit) -> None:
    agent = create_agent(turn(EMAIL, DELETE), kit.tools, middleware=[HumanInTheLoopMiddleware(
        {"send_email": True, "delete_file": {"allowed_decisions": ["approve", "reject"]}},
        interrupt_mode="per_call")], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "z@z.z", "body": "b"}}}
    run(agent, Command(resume=edit), config=config())
    # one decision, as LangChain 1.5 takes it: pydantic's error (also an InvalidResumeError naming the call)
    with pytest.raises(ValidationError, match="expected tags: 'approve', 'reject'") as err:
        run(agent, Command(resume={"type": "edit", "edited_action": {"args": {"path": "/"}}}), config=config())
    assert isinstance(err.value, InvalidResumeError) and is_invalid_resume(err.value)
    assert (err.value.middleware, err.value.hook, err.value.tool_name) == (
        "HumanInTheLoopMiddleware", "after_model", "delete_file")
    assert "HumanInTheLoopMiddleware.after_model: the answer for 'delete_file' (call id 'c_delete')" in str(err.value)
    assert pending(agent)[0]["name"] == "delete_file"
    with pytest.raises(InvalidResumeError, match="Decision type 'edit' is not allowed for tool 'delete_file'"):
        run(agent, Command(resume={"decisions": [{"type": "edit", "edited_action": {"args": {"path": "/"}}}]}),
            config=config())
    assert pending(agent)[0]["name"] == "delete_file"
    run(agent, Command(resume={"type": "approve"}), config=config())
    assert sorted(kit.ran) == [("delete_file", {"path": "/tmp/x"}), ("send_email", {"to": "z@z.z", "body": "b"})]


def test_malformed_then_correct_resume_with_a_sqlite_file(tmp_path: Path, kit: Kit) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(tmp_path / "hitl.sqlite", check_same_thread=False)
    agent = create_agent(turn(EMAIL), kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True})],
                         checkpointer=SqliteSaver(conn))
    agent.invoke({"messages": [HumanMessage("go")]}, config())
    with pytest.raises(InvalidResumeError):
        agent.invoke(Command(resume={"decisions": [EDIT_BAD_ARGS]}), config())
    with pytest.raises(InvalidResumeError):
        agent.invoke(Command(resume={"decisions": []}), config())
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config())
    assert kit.ran == [("send_email", {"to": "ann@example.com", "body": "hi"})]
    assert out["messages"][-1].content == "done"
    conn.close()


def test_edit_is_checked_against_a_configured_args_schema(run: Runner, kit: Kit) -> None:
    class EmailArgs(BaseModel):
        to: str = Field(pattern=r"@example\.com$")
        body: str

    json_schema = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/tmp/"}},
                   "required": ["path"], "additionalProperties": False}
    hitl = HumanInTheLoopMiddleware({
        "send_email": {"allowed_decisions": ["approve", "edit"], "args_schema": EmailArgs},
        "delete_file": {"allowed_decisions": ["edit"], "args_schema": json_schema},
    })
    agent = create_agent(turn(EMAIL, DELETE), kit.tools, middleware=[hitl], checkpointer=InMemorySaver())
    out = run(agent, {"messages": [HumanMessage("go")]}, config=config())
    configs = out["__interrupt__"][0].value["review_configs"]
    assert configs[0]["args_schema"]["properties"]["to"]["pattern"] == r"@example\.com$"
    assert configs[1]["args_schema"] == json_schema
    outside = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "evil@other.org", "body": "x"}}}
    fine = {"type": "edit", "edited_action": {"args": {"path": "/tmp/y"}}}
    with pytest.raises(InvalidResumeError, match=r"args\.to: String should match pattern"):
        run(agent, Command(resume={"decisions": [outside, fine]}), config=config())
    escape = {"type": "edit", "edited_action": {"args": {"path": "/etc/passwd"}}}
    with pytest.raises(InvalidResumeError, match=r"args\.path: String should match pattern '\^/tmp/'"):
        run(agent, Command(resume={"decisions": [{"type": "approve"}, escape]}), config=config())
    run(agent, Command(resume={"decisions": [{"type": "approve"}, {"type": "edit", "edited_action": {
        "args": {"path": "/tmp/y"}}}]}), config=config())
    assert sorted(kit.ran) == [  # parallel tasks: either order
        ("delete_file", {"path": "/tmp/y"}), ("send_email", {"to": "ann@example.com", "body": "hi"})
    ]



def test_edit_of_a_tool_added_by_an_inner_wrapper_is_left_to_the_tool_node(run: Runner, kit: Kit) -> None:
    @tool
    def secret(code: int) -> str:
        """A tool only an inner wrapper offers."""
        return f"code {code}"

    @wrap_model_call
    def offer_secret(request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[*request.tools, secret]))

    @wrap_tool_call
    def run_secret(request: Any, handler: Any) -> Any:
        return handler(request.override(tool=secret) if request.tool is None else request)

    model = turn(tool_call("secret", {"code": 1}, id="c_s"))
    review = HumanInTheLoopMiddleware({"secret": True}, dynamic_tools=["secret"])  # "secret" is added per call
    agent = create_agent(model, kit.tools, middleware=[review, offer_secret, run_secret], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    with pytest.raises(InvalidResumeError, match="calls the tool 'nope', which the model was not offered"):
        run(agent, Command(resume={"decisions": [{"type": "edit", "edited_action": {"name": "nope", "args": {}}}]}),
            config=config())
    out = run(agent, Command(resume={"decisions": [{"type": "edit", "edited_action": {"args": {"code": 7}}}]}),
              config=config())
    assert out["messages"][2].content.endswith("code 7")

# -- policies from the runtime ----------------------------------------------------------------------------------------
@dataclass
class Tenant:
    role: str = "clerk"
    approval_limit: int = 100


@tool
def pay(amount: int, to: str) -> str:
    """Pay someone."""
    return f"paid {amount} to {to}"


def pay_call(amount: int, id: str = "c_pay") -> Any:
    return tool_call("pay", {"amount": amount, "to": "bob"}, id=id)


def test_when_with_tool_call_state_and_runtime(run: Runner) -> None:
    def when(call: Any, state: Any, runtime: Any) -> bool:
        return bool(runtime.context.role != "admin" and call["args"]["amount"] > runtime.context.approval_limit)

    hitl = HumanInTheLoopMiddleware({"pay": {"allowed_decisions": ["approve", "reject"], "when": when}})

    def ask(tenant: Tenant, amount: int, thread: str) -> bool:
        agent = create_agent(turn(pay_call(amount)), [pay], middleware=[hitl], checkpointer=InMemorySaver(),
                             context_schema=Tenant)
        out = run(agent, {"messages": [HumanMessage("pay")]}, config=config(thread), context=tenant)
        return "__interrupt__" in out

    assert ask(Tenant("clerk"), 500, "a") is True
    assert ask(Tenant("clerk"), 50, "b") is False  # only above the limit
    assert ask(Tenant("clerk", approval_limit=1000), 500, "c") is False  # per-tenant limit from the context
    assert ask(Tenant("admin"), 500, "d") is False  # admins auto-approve


def test_when_in_the_langchain_form_receives_a_tool_call_request(run: Runner) -> None:
    seen: list[Any] = []

    def when(request: Any) -> bool:
        seen.append((request.tool_call["id"], request.runtime.context, len(request.state["messages"])))
        return True

    agent = create_agent(turn(pay_call(5)), [pay], middleware=[HumanInTheLoopMiddleware(
        {"pay": InterruptOnConfig(allowed_decisions=["approve"], when=when)})], checkpointer=InMemorySaver(),
        context_schema=Tenant)
    out = run(agent, {"messages": [HumanMessage("pay")]}, config=config(), context=Tenant("clerk"))
    assert "__interrupt__" in out
    assert seen == [("c_pay", Tenant("clerk"), 2)]


def test_callable_interrupt_on_decides_per_call_from_the_context(run: Runner, kit: Kit) -> None:
    def policy(call: Any, state: Any, runtime: Any) -> bool | InterruptOnConfig | None:
        if runtime.context.role == "admin":
            return None
        if call["name"] == "add":
            return False
        return InterruptOnConfig(allowed_decisions=["approve", "reject"], description=f"{runtime.context.role} asks")

    hitl = HumanInTheLoopMiddleware(policy)
    agent = create_agent(turn(EMAIL, ADD), kit.tools, middleware=[hitl], checkpointer=InMemorySaver(),
                         context_schema=Tenant)
    out = run(agent, {"messages": [HumanMessage("go")]}, config=config("clerk"), context=Tenant("clerk"))
    (request,) = out["__interrupt__"]
    assert [(r["name"], r["description"]) for r in request.value["action_requests"]] == [("send_email", "clerk asks")]
    admin = create_agent(turn(EMAIL, ADD), kit.tools, middleware=[hitl], checkpointer=InMemorySaver(),
                         context_schema=Tenant)
    assert "__interrupt__" not in run(admin, {"messages": [HumanMessage("go")]}, config=config("admin"),
                                      context=Tenant("admin"))


def test_the_review_decided_when_the_model_answered_survives_a_resume_with_another_context(run: Runner) -> None:
    evaluated: list[str] = []

    def when(call: Any, state: Any, runtime: Any) -> bool:
        evaluated.append(runtime.context.role)  # fails on resume if re-evaluated without a context
        return bool(runtime.context.role != "admin")

    hitl = HumanInTheLoopMiddleware({"pay": {"allowed_decisions": ["approve", "reject"], "when": when}})
    agent = create_agent(turn(pay_call(500)), [pay], middleware=[hitl], checkpointer=InMemorySaver(),
                         context_schema=Tenant)
    run(agent, {"messages": [HumanMessage("pay")]}, config=config(), context=Tenant("clerk"))
    # The reviewer is an admin: their context would auto-approve, and no context would crash the policy.
    out = run(agent, Command(resume={"decisions": [{"type": "reject", "message": "too much"}]}), config=config(),
              context=Tenant("admin"))
    assert evaluated == ["clerk"]
    assert "too much" in out["messages"][2].content
    assert out["messages"][2].status == "error"


def test_a_call_changed_by_an_outer_wrapper_is_reviewed_as_it_will_run(run: Runner) -> None:
    @wrap_model_call
    def inflate(request: Any, handler: Any) -> Any:
        response = handler(request)
        message = response.result[0]
        calls = [{**c, "args": {**c["args"], "amount": 5000}} for c in message.tool_calls]
        return AIMessage("", tool_calls=calls, id=message.id)

    hitl = HumanInTheLoopMiddleware({"pay": {"allowed_decisions": ["approve"],
                                             "when": lambda c, s, r: c["args"]["amount"] > 100}})
    agent = create_agent(turn(pay_call(5)), [pay], middleware=[inflate, hitl], checkpointer=InMemorySaver())
    out = run(agent, {"messages": [HumanMessage("pay")]}, config=config())
    assert out["__interrupt__"][0].value["action_requests"][0]["args"]["amount"] == 5000


# -- durability ------------------------------------------------------------------------------------------------------
def test_interrupt_in_one_process_resume_in_another_with_sqlite(tmp_path: Path) -> None:
    db, log = tmp_path / "agent.sqlite", tmp_path / "tool_runs.jsonl"
    worker = Path(__file__).with_name("hitl_sqlite_worker.py")

    def step(name: str) -> Any:
        done = subprocess.run([sys.executable, str(worker), str(db), str(log), name], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    (request,) = step("start")
    assert request["action_requests"][0]["args"] == {"amount": 500, "to": "bob"}
    assert not log.exists()
    bad = step("bad")
    assert bad["error"] == "InvalidResumeError"
    assert "Decision type 'respond' is not allowed for tool 'transfer'" in bad["message"]
    messages = step("resume")
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[2]["content"].endswith("transferred 50 to bob") and messages[-1]["content"] == "done"
    assert [json.loads(line) for line in log.read_text().splitlines()] == [{"amount": 50, "to": "bob"}]


def test_without_a_checkpointer_the_first_interrupt_says_one_is_needed(run: Runner, kit: Kit) -> None:
    agent = create_agent(turn(EMAIL), kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True})])
    with pytest.raises(MiddlewareConfigError, match="needs a checkpointer to pause for approval") as err:
        run(agent, {"messages": [HumanMessage("go")]})
    assert (err.value.middleware, err.value.hook) == ("HumanInTheLoopMiddleware", "after_model")
    assert kit.ran == []
    # Runs that need no review work without one.
    fine = create_agent(turn(ADD), kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True})])
    assert run(fine, {"messages": [HumanMessage("go")]})["messages"][-1].content == "done"


# -- progress on the custom stream -------------------------------------------------------------------------------------
def test_awaiting_approval_event_on_the_custom_stream(mode: str, kit: Kit) -> None:
    agent = create_agent(turn(EMAIL, ADD), kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True})],
                         checkpointer=InMemorySaver())

    def custom(inp: Any) -> list[Any]:
        if mode == "invoke":
            return list(agent.stream(inp, config(), stream_mode="custom"))

        async def collect() -> list[Any]:
            return [chunk async for chunk in agent.astream(inp, config(), stream_mode="custom")]

        return asyncio.run(collect())

    (waiting,) = custom({"messages": [HumanMessage("go")]})
    assert waiting["event"] == "awaiting_approval"
    assert waiting["middleware"] == "HumanInTheLoopMiddleware"
    assert [r["name"] for r in waiting["action_requests"]] == ["send_email"]
    assert waiting["review_configs"][0]["action_name"] == "send_email"
    (received,) = custom(Command(resume={"decisions": [{"type": "approve"}]}))
    assert received == {"middleware": "HumanInTheLoopMiddleware", "event": "decisions_received",
                        "interrupt_mode": "batched", "decisions": [{"id": "c_email", "name": "send_email",
                                                                    "type": "approve"}]}


# -- composition -----------------------------------------------------------------------------------------------------
def test_retries_listed_after_it_are_not_reviewed_again(run: Runner) -> None:
    attempts: list[int] = []

    @tool
    def flaky(x: int) -> str:
        """Fails once."""
        attempts.append(x)
        if len(attempts) == 1:
            raise ConnectionError("blip")
        return f"ok {x}"

    @wrap_tool_call
    def retry(request: Any, handler: Any) -> Any:
        for attempt in range(3):
            try:
                return handler(request)
            except ConnectionError:
                if attempt == 2:
                    raise
        raise AssertionError

    @wrap_tool_call
    def to_error_message(request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except Exception as exc:  # a careless error handler: catches everything
            return ToolMessage(f"failed: {exc}", tool_call_id=request.tool_call["id"], status="error")

    model = turn(tool_call("flaky", {"x": 1}, id="c_f"))
    hitl = HumanInTheLoopMiddleware({"flaky": True})
    agent = create_agent(model, [flaky], middleware=[to_error_message, hitl, retry], checkpointer=InMemorySaver())
    out = run(agent, {"messages": [HumanMessage("go")]}, config=config())
    assert len(out["__interrupt__"]) == 1
    edit = {"type": "edit", "edited_action": {"name": "flaky", "args": {"x": 7}}}
    done = run(agent, Command(resume={"decisions": [edit]}), config=config())
    assert attempts == [7, 7]  # retried inside, reviewed once
    assert done["messages"][2].content.endswith("ok 7") and "Executed instead: flaky" in done["messages"][2].content
    assert done["messages"][-1].content == "done"


def test_no_wrapper_can_swallow_the_interrupt(run: Runner, kit: Kit) -> None:
    @wrap_model_call
    def careless(request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except BaseException:
            return AIMessage("swallowed")

    ran_after: list[str] = []

    @after_model
    def outer(state: Any, runtime: Any) -> None:
        ran_after.append("outer")

    model = turn(EMAIL)
    agent = create_agent(model, kit.tools, middleware=[outer, careless, HumanInTheLoopMiddleware({"send_email": True})],
                         checkpointer=InMemorySaver())
    out = run(agent, {"messages": [HumanMessage("go")]}, config=config())
    assert "__interrupt__" in out and ran_after == []
    run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=config())
    assert ran_after == ["outer", "outer"]  # once per model call, never re-run by the resume
    assert model.call_count == 2


def test_two_instances_review_their_own_tools(run: Runner, kit: Kit) -> None:
    mail = HumanInTheLoopMiddleware({"send_email": True}, name="mail_review")
    files = HumanInTheLoopMiddleware({"delete_file": True}, name="file_review")
    agent = create_agent(turn(EMAIL, DELETE), kit.tools, middleware=[mail, files], checkpointer=InMemorySaver())
    first = run(agent, {"messages": [HumanMessage("go")]}, config=config())
    assert [r["name"] for r in first["__interrupt__"][0].value["action_requests"]] == ["delete_file"]
    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/tmp/y"}}}
    second = run(agent, Command(resume={"decisions": [edit]}), config=config())
    assert [r["name"] for r in second["__interrupt__"][0].value["action_requests"]] == ["send_email"]
    out = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=config())
    # the two approved calls run as parallel tasks: in either order
    assert sorted(kit.ran) == [
        ("delete_file", {"path": "/tmp/y"}), ("send_email", {"to": "ann@example.com", "body": "hi"})
    ]
    review = agent.get_state(config()).values["human_review"]
    assert (review["c_email"]["middleware"], review["c_delete"]["middleware"]) == ("mail_review", "file_review")
    notes = [m.content.count("Executed instead:") for m in out["messages"] if isinstance(m, ToolMessage)]
    assert sorted(notes) == [0, 1]  # annotated once, by the instance that edited it
    assert agent.get_state(config()).values.get("human_in_the_loop_pending") == {}


def test_edit_leaves_provider_content_blocks_alone(run: Runner, kit: Kit) -> None:
    blocks: list[str | dict[Any, Any]] = [{"type": "text", "text": "Sending."},
              {"type": "tool_use", "id": "c_email", "name": "send_email", "input": {"to": "ann@example.com",
                                                                                       "body": "hi"}}]
    model = ScriptedChatModel([AIMessage(blocks, tool_calls=[EMAIL]), "done"])
    agent = create_agent(model, kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True})],
                         checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("go")]}, config=config())
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b@example.com", "body": "x"}}}
    out = run(agent, Command(resume={"decisions": [edit]}), config=config())
    assert out["messages"][1].content == blocks  # the model's message is not rewritten: its blocks stay as they were
    assert out["messages"][1].tool_calls == [EMAIL]


# -- unit level, LangChain style (patched interrupt, hooks called directly) ------------------------------------
def ai_state(*calls: Any) -> Any:
    return {"messages": [HumanMessage("go"), AIMessage("", tool_calls=list(calls), id="ai1")]}


def test_patched_interrupt_is_called_with_the_payload_and_validated() -> None:
    hitl = HumanInTheLoopMiddleware({"send_email": True})
    seen: list[Any] = []

    def fake(request: Any) -> Any:  # one positional parameter, as in LangChain's tests
        seen.append(request)
        return {"decisions": [{"type": "reject", "message": "no"}]}

    with patch.object(hitl_module, "interrupt", side_effect=fake):
        result = hitl.after_model(ai_state(EMAIL, ADD), None)
    assert seen[0]["action_requests"][0]["name"] == "send_email"
    assert result is not None
    ai, rejection = result["messages"]
    assert ai.id == "ai1" and ai.tool_calls == [EMAIL, ADD]
    assert rejection.tool_call_id == "c_email" and rejection.status == "error"
    with (patch.object(hitl_module, "interrupt", return_value={"decisions": []}),
          pytest.raises(InvalidResumeError, match="got 0 decision")):
        hitl.after_model(ai_state(EMAIL), None)
    with patch.object(hitl_module, "interrupt") as never:
        assert hitl.after_model(ai_state(ADD), make_runtime()) is None
    never.assert_not_called()


async def test_async_hook_with_patched_interrupt() -> None:
    hitl = HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode="per_call")
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b@b.b", "body": "x"}}}
    with patch.object(hitl_module, "interrupt", return_value=edit):
        result = await hitl.aafter_model(ai_state(EMAIL), make_runtime())
    assert result is not None
    assert result["messages"][0].tool_calls == [EMAIL]  # the model's call stays; the reviewer's is kept privately
    assert result["hitl_edits"]["c_email"] == {"name": "send_email", "args": {"to": "b@b.b", "body": "x"},
                                               "middleware": "HumanInTheLoopMiddleware"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"interrupt_on": {"x": {"allowed_decisions": []}}}, "must be a non-empty list"),
        ({"interrupt_on": {"x": {"allowed_decisions": ["accept"]}}}, "must be a non-empty list of 'approve'"),
        ({"interrupt_on": {"x": {"allowed_decisions": ["approve"], "desc": "?"}}}, "unknown key(s) ['desc']"),
        ({"interrupt_on": {"x": {"allowed_decisions": ["approve"], "when": "yes"}}}, "['when'] must be a callable"),
        ({"interrupt_on": {"x": {"allowed_decisions": ["approve"], "when": lambda a, b: True}}},
         "['when'] must be a callable"),
        ({"interrupt_on": {"x": {"allowed_decisions": ["approve"], "description": 3}}}, "must be a str or a callable"),
        ({"interrupt_on": {"x": {"allowed_decisions": ["approve"], "args_schema": "s"}}}, "JSON schema dict"),
        ({"interrupt_on": {"x": "yes"}}, "use True, False or an InterruptOnConfig"),
        ({"interrupt_on": ["x"]}, "interrupt_on must be a dict"),
        ({"interrupt_on": {}, "interrupt_mode": "each"},
         "`interrupt_mode` must be 'batched' or 'per_call', got 'each'"),
    ],
)
def test_configuration_is_validated_when_built(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(MiddlewareConfigError) as err:
        HumanInTheLoopMiddleware(**kwargs)
    assert message in str(err.value)


def test_a_policy_returning_a_bad_config_is_named() -> None:
    def policy(call: Any, state: Any, runtime: Any) -> Any:
        return {"allowed_decisions": "approve"}

    hitl = HumanInTheLoopMiddleware(policy)
    with pytest.raises(MiddlewareConfigError, match=r"interrupt_on\('send_email' call\)\['allowed_decisions'\]"):
        hitl.after_model(ai_state(EMAIL), None)


def test_resolved_configuration_matches_langchain() -> None:
    hitl = HumanInTheLoopMiddleware({"a": True, "b": False, "c": {"allowed_decisions": ["approve", "approve"]}})
    assert hitl.interrupt_on == {
        "a": {"allowed_decisions": ["approve", "edit", "reject", "respond"]},
        "c": {"allowed_decisions": ["approve"]},
    }
    assert hitl.name == "HumanInTheLoopMiddleware" and hitl.interrupt_mode == "batched"


def test_the_plan_shows_its_own_node_and_the_model_is_not_fused_with_it(kit: Kit) -> None:
    agent = create_agent(turn(EMAIL), kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True})],
                         checkpointer=InMemorySaver())
    plan: Any = agent.middleware_plan  # type: ignore[attr-defined]
    assert plan.nodes == ("model", "HumanInTheLoopMiddleware.after_model", "tools")


def test_the_state_key_stays_out_of_input_and_output(run: Runner, kit: Kit) -> None:
    agent = create_agent(turn(EMAIL), kit.tools, middleware=[HumanInTheLoopMiddleware({"send_email": True})],
                         checkpointer=InMemorySaver())
    out = run(agent, {"messages": [HumanMessage("go")]}, config=config())
    assert set(out) == {"messages", "__interrupt__"}
    assert set(agent.get_state(config()).values["human_in_the_loop_pending"]["HumanInTheLoopMiddleware"]) == {
        "calls", "tools", "deadline", "at", "tenant"
    }
    done = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=config())
    assert set(done) == {"messages"}

