"""HumanInTheLoopMiddleware against LangChain 1.5.2: per_call payload and schema, when(request), edit_notice, texts,
error sentences; frozen configuration; the injected ``interrupt``. Each deliberate difference is pinned here too."""

from __future__ import annotations

import importlib
import json
from typing import Any, cast
from unittest.mock import patch

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import TypeAdapter, ValidationError

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit.middlewares import human_in_the_loop as hitl_module
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.human_in_the_loop import (
    DEFAULT_EDIT_NOTICE,
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
    InvalidResumeError,
    ToolApprovalRequest,
)
from middleware_kit.middlewares.human_in_the_loop import middleware as hitl_middleware_module
from middleware_kit.testing import ScriptedChatModel, make_runtime, tool_call
from tests.conftest import Runner

ran: list[dict[str, Any]] = []


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    ran.append({"to": to, "body": body})
    return f"sent to {to}"


EMAIL = tool_call("send_email", {"to": "ann@example.com", "body": "hi"}, id="c_email")
CFG: Any = {"configurable": {"thread_id": "t"}}


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def agent_with(middleware: HumanInTheLoopMiddleware, **kwargs: Any) -> Any:
    model = ScriptedChatModel([AIMessage("", tool_calls=[EMAIL]), "done"])
    return create_agent(model, [send_email], middleware=[middleware], checkpointer=InMemorySaver(), **kwargs)


# -- per_call: LangChain 1.5's ToolApprovalRequest and per-decision response schema ------------------------------------
def test_per_call_interrupt_value_and_response_schema(run: Runner) -> None:
    agent = agent_with(HumanInTheLoopMiddleware(
        {"send_email": {"allowed_decisions": ["approve", "edit"]}}, interrupt_mode="per_call"))
    (pending,) = run(agent, {"messages": [HumanMessage("go")]}, config=CFG)["__interrupt__"]
    TypeAdapter(ToolApprovalRequest).validate_python(pending.value)  # the public type describes it
    # LangChain 1.5's fields, exactly (the decisions allowed are in the response schema, not the value)
    assert pending.value == {"type": "tool_approval", "tool_call_id": "c_email", "name": "send_email",
                             "args": {"to": "ann@example.com", "body": "hi"},
                             "description": "Tool execution requires approval\n\nTool: send_email\n"
                                            "Args: {'to': 'ann@example.com', 'body': 'hi'}"}
    schema = json.dumps(pending.response_schema)
    # the decisions allowed for the tool, and for edits the tool's own argument schema
    assert '"approve"' in schema and '"edit"' in schema and '"reject"' not in schema and '"respond"' not in schema
    assert '"to": {"type": "string"}' in schema and '"body": {"type": "string"}' in schema
    # answered with a single decision keyed by the interrupt's id
    run(agent, Command(resume={pending.id: {"type": "approve"}}), config=CFG)
    assert ran == [{"to": "ann@example.com", "body": "hi"}]


def test_ours_per_call_also_takes_the_batched_form(run: Runner) -> None:
    agent = agent_with(HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode="per_call"))
    run(agent, {"messages": [HumanMessage("go")]}, config=CFG)
    run(agent, Command(resume={"decisions": {"c_email": {"type": "approve"}}}), config=CFG)
    assert len(ran) == 1


# -- when(request) receives a ToolCallRequest whose runtime is a ToolRuntime -------------------------------------------
def test_when_request_runtime_is_a_tool_runtime(run: Runner) -> None:
    seen: list[Any] = []

    def when(request: Any) -> bool:
        seen.append(request)
        return bool(request.runtime.context["role"] != "admin")

    agent = agent_with(HumanInTheLoopMiddleware({"send_email": InterruptOnConfig(allowed_decisions=["approve"],
                                                                                  when=when)}))
    out = run(agent, {"messages": [HumanMessage("go")]}, config=CFG, context={"role": "clerk"})
    assert "__interrupt__" in out
    (request,) = seen
    assert isinstance(request.runtime, ToolRuntime)
    assert request.runtime.tool_call_id == "c_email" and request.runtime.context == {"role": "clerk"}
    assert request.tool_call["id"] == "c_email" and request.tool is None
    assert len(request.runtime.state["messages"]) == 2 and request.state is request.runtime.state


# -- edit_notice -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("edit_notice", "expected"),
    [
        # LangChain 1.5's form and wording: the notice, what ran, then the tool's response (the AIMessage keeps
        # the model's call, as there).
        (DEFAULT_EDIT_NOTICE, "Note: a human reviewer replaced this tool call before it ran. The call recorded in "
                              "your message is the one you produced, not the one that executed. This was intentional "
                              'and authorized. Do not re-issue your original call. Executed instead: send_email with '
                              'arguments {"to": "bob@example.com", "body": "yo"}.\n\nTool response:\n'
                              "sent to bob@example.com"),
        (True, None),  # the default
        ("Edited by a reviewer.", 'Edited by a reviewer. Executed instead: send_email with arguments {"to": '
                                  '"bob@example.com", "body": "yo"}.\n\nTool response:\nsent to bob@example.com'),
        (None, "sent to bob@example.com"),
        (False, "sent to bob@example.com"),
        ("", "sent to bob@example.com"),
        # ours: a template using {name}, {args}, {requested_name} or {requested_args}
        ("(edited from {requested_args}) ", '(edited from {"body": "hi", "to": "ann@example.com"}) sent to '
                                            "bob@example.com"),
    ],
)
def test_edit_notice(run: Runner, edit_notice: bool | str | None, expected: str | None) -> None:
    if expected is None:
        expected = (f'{DEFAULT_EDIT_NOTICE} Executed instead: send_email with arguments {{"to": "bob@example.com", '
                    f'"body": "yo"}}.\n\nTool response:\nsent to bob@example.com')
    agent = agent_with(HumanInTheLoopMiddleware({"send_email": True}, edit_notice=edit_notice))
    run(agent, {"messages": [HumanMessage("go")]}, config=CFG)
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob@example.com", "body": "yo"}}}
    out = run(agent, Command(resume={"decisions": [edit]}), config=CFG)
    assert out["messages"][2].content == expected


def test_edit_notice_default_and_a_plain_text_with_braces() -> None:
    assert HumanInTheLoopMiddleware({"send_email": True}).edit_notice == DEFAULT_EDIT_NOTICE
    assert HumanInTheLoopMiddleware({"send_email": True}, edit_notice="{").edit_notice == "{"  # plain text, as in LC


@pytest.mark.parametrize("bad", ["{name} {unknown}", "{args} {", 3, ["x"]])
def test_a_bad_edit_notice_is_refused(bad: Any) -> None:
    with pytest.raises(MiddlewareConfigError) as err:
        HumanInTheLoopMiddleware({"send_email": True}, edit_notice=bad)
    assert err.value.hook == "edit_notice" and "edit_notice" in str(err.value)


# -- the model-facing reject text and the error sentences start with LangChain's ---------------------------------------
def test_reject_text_starts_with_langchains(run: Runner) -> None:
    agent = agent_with(HumanInTheLoopMiddleware({"send_email": True}))
    run(agent, {"messages": [HumanMessage("go")]}, config=CFG)
    out = run(agent, Command(resume={"decisions": [{"type": "reject"}]}), config=CFG)
    assert out["messages"][2].content == (
        "User rejected the tool call for `send_email` with id c_email. The tool was not executed. Do not retry this "
        "tool call unless the user explicitly requests it.")
    assert out["messages"][2].status == "error"
    agent = agent_with(HumanInTheLoopMiddleware({"send_email": True}))
    config: Any = {"configurable": {"thread_id": "with-reason"}}
    run(agent, {"messages": [HumanMessage("go")]}, config=config)
    out = run(agent, Command(resume={"decisions": [{"type": "reject", "message": "not now"}]}), config=config)
    assert out["messages"][2].content == "User rejected the tool call for `send_email` with reason: not now"


def test_interrupt_mode_error_starts_with_langchains_sentence() -> None:
    with pytest.raises(MiddlewareConfigError) as err:
        HumanInTheLoopMiddleware({"t": True}, interrupt_mode="sometimes")  # type: ignore[arg-type]
    assert str(err.value).startswith("`interrupt_mode` must be 'batched' or 'per_call', got 'sometimes'.")
    assert isinstance(err.value, ValueError) and err.value.hook == "interrupt_mode"


@pytest.mark.parametrize(
    ("resume", "sentence"),
    [
        ({"decisions": []}, "Number of human decisions (0) does not match number of hanging tool calls (1)."),
        ({"decisions": [{"type": "respond", "message": "x"}]},
         "Unexpected human decision: {'type': 'respond', 'message': 'x'}. Decision type 'respond' is not allowed for "
         "tool 'send_email'. Expected one of ['approve', 'reject'] based on the tool's configuration."),
    ],
)
def test_errors_start_with_langchains_sentence_then_our_fix(run: Runner, resume: Any, sentence: str) -> None:
    agent = agent_with(HumanInTheLoopMiddleware({"send_email": {"allowed_decisions": ["approve", "reject"]}}))
    run(agent, {"messages": [HumanMessage("go")]}, config=CFG)
    with pytest.raises(InvalidResumeError) as err:  # a ValueError, as LangChain raises
        run(agent, Command(resume=resume), config=CFG)
    assert isinstance(err.value, ValueError)
    assert str(err.value).startswith(sentence + " HumanInTheLoopMiddleware: ")
    assert str(err.value).endswith("The interrupt is still pending: resume the thread again with a corrected value.")


# -- frozen configuration ----------------------------------------------------------------------------------------------
def test_configuration_is_frozen_once_adopted_and_replace_gives_a_working_copy(run: Runner) -> None:
    given: dict[str, Any] = {"send_email": {"allowed_decisions": ["approve"]}}
    middleware = HumanInTheLoopMiddleware(given)
    given["send_email"]["allowed_decisions"].append("reject")  # the caller's dict is copied
    given["other"] = True
    assert middleware.interrupt_on == {"send_email": {"allowed_decisions": ["approve"]}}
    middleware.interrupt_on["send_email"]["allowed_decisions"].append("edit")
    # before an agent adopts it, settings may be assigned (as in LangChain), validated as constructor arguments
    middleware.interrupt_mode = "per_call"
    assert middleware.interrupt_mode == "per_call"
    with pytest.raises(MiddlewareConfigError, match="got 'each'"):
        middleware.interrupt_mode = "each"  # type: ignore[assignment]
    middleware.interrupt_mode = "batched"
    agent = agent_with(middleware)
    for attribute, value in (("interrupt_on", {}), ("interrupt_mode", "per_call"), ("edit_notice", False)):
        with pytest.raises(FrozenMiddlewareError, match=rf"cannot set '{attribute}'"):
            setattr(middleware, attribute, value)
    out = run(agent, {"messages": [HumanMessage("go")]}, config=CFG)
    assert out["__interrupt__"][0].value["review_configs"][0]["allowed_decisions"] == ["approve"]  # unchanged
    per_call = middleware.replace(interrupt_mode="per_call")
    assert per_call.interrupt_mode == "per_call" and middleware.interrupt_mode == "batched"
    changed = agent_with(per_call)
    (pending,) = run(changed, {"messages": [HumanMessage("go")]}, config=CFG)["__interrupt__"]
    assert pending.value["type"] == "tool_approval"
    with pytest.raises(MiddlewareConfigError, match="got 'each'"):
        middleware.replace(interrupt_mode="each")


# -- the interrupt function: patched module global or injected; one validation path -----------------------------------
def _ai_state() -> Any:
    return {"messages": [HumanMessage("go"), AIMessage("", tool_calls=[EMAIL], id="ai1")]}


def test_an_injected_interrupt_takes_the_same_validation_path() -> None:
    asked: list[Any] = []

    def fake(payload: Any) -> Any:
        asked.append(payload)
        return {"decisions": [{"type": "edit", "edited_action": {"args": {1: "x"}}}]}

    middleware = HumanInTheLoopMiddleware({"send_email": True}, interrupt=fake)
    with pytest.raises(InvalidResumeError, match=r"invalid at 'edited_action\.args\.1\.\[key\]'"):
        middleware.after_model(_ai_state(), make_runtime())
    assert asked[0]["action_requests"][0]["id"] == "c_email"
    ok = middleware.replace(interrupt=lambda payload: {"decisions": [{"type": "approve"}]})
    result = ok.after_model(_ai_state(), make_runtime())
    assert result is not None and result["messages"][0].tool_calls == [EMAIL]


def test_an_injected_interrupt_with_response_schema_gets_the_validator() -> None:
    def fake(payload: Any, *, response_schema: Any = None) -> Any:
        return TypeAdapter(response_schema).validate_python({"decisions": [{"type": "reject", "message": "no"}]})

    middleware = HumanInTheLoopMiddleware({"send_email": True}, interrupt=fake)
    result = middleware.after_model(_ai_state(), make_runtime())
    assert result is not None and isinstance(result["messages"][1], ToolMessage)
    assert result["messages"][1].content == "User rejected the tool call for `send_email` with reason: no"


def test_the_module_global_is_looked_up_at_call_time() -> None:
    middleware = HumanInTheLoopMiddleware({"send_email": True})
    with patch.object(hitl_module, "interrupt", return_value={"decisions": [{"type": "approve"}]}) as fake:
        middleware.after_model(_ai_state(), make_runtime())
    fake.assert_called_once()
    assert fake.call_args.args[0]["action_requests"][0]["name"] == "send_email"
    assert fake.call_args.kwargs == {}  # a mock is called with the payload only, as in LangChain's tests


@pytest.mark.parametrize("parameter", ["interrupt", "clock"])
def test_injected_functions_must_be_callable(parameter: str) -> None:
    with pytest.raises(MiddlewareConfigError, match=f"{parameter} must be callable"):
        HumanInTheLoopMiddleware({"send_email": True}, **{parameter: 3})  # type: ignore[arg-type]


# -- the package keeps every name the single module had ----------------------------------------------------------------
BEFORE_THE_SPLIT = [
    "Action", "ActionRequest", "ApproveDecision", "Decision", "DecisionType", "DescriptionFactory", "EditDecision",
    "HITLRequest", "HITLResponse", "HumanInTheLoopMiddleware", "HumanInTheLoopState", "InterruptOnConfig",
    "InterruptOnPolicy", "InvalidResumeError", "RejectDecision", "RespondDecision", "ReviewConfig", "WhenPredicate",
    "interrupt",
]


def test_every_name_of_the_old_module_is_importable_from_the_package() -> None:
    import importlib
    from pathlib import Path

    package = importlib.import_module("middleware_kit.middlewares.human_in_the_loop")
    assert [name for name in BEFORE_THE_SPLIT if not hasattr(package, name)] == []
    assert Path(package.__file__ or "").name == "__init__.py"
    assert not (Path(package.__file__ or "").parent.parent / "human_in_the_loop.py").exists()
    assert package.__all__ == sorted(package.__all__)


# -- LangChain 1.5.2's module: names, patch points, hooks called outside a graph --------------------------------------
LANGCHAIN_NAMES = [
    "Action", "ActionRequest", "ApproveDecision", "Decision", "DecisionType", "EditDecision", "HITLRequest",
    "HITLResponse", "HumanInTheLoopMiddleware", "InterruptMode", "InterruptOnConfig", "RejectDecision",
    "RespondDecision", "ReviewConfig", "ToolApprovalRequest", "interrupt", "get_config", "get_runtime",
    "ToolRuntime", "AgentState", "ToolCallRequest",
]


def test_every_public_name_of_langchains_module_is_in_the_middleware_module() -> None:
    module = importlib.import_module("middleware_kit.middlewares.human_in_the_loop.middleware")
    assert [name for name in LANGCHAIN_NAMES if not hasattr(module, name)] == []
    assert module.InterruptMode.__args__ == ("batched", "per_call")


@pytest.mark.parametrize("runtime", [None, Runtime()], ids=["none", "plain-runtime"])
def test_after_model_called_directly_outside_a_graph(runtime: Any) -> None:
    calls: list[Any] = []

    def when(request: Any) -> bool:
        calls.append(request)
        return True

    middleware = HumanInTheLoopMiddleware({"send_email": InterruptOnConfig(allowed_decisions=["approve", "reject"],
                                                                            when=when)})
    state = _ai_state()
    with patch.object(hitl_middleware_module, "interrupt", return_value={"decisions": [{"type": "reject"}]}) as ask:
        result = middleware.after_model(state, runtime)
    ask.assert_called_once()
    assert result is not None and result["messages"][1].status == "error"
    (request,) = calls  # evaluated once, with a ToolRuntime built without a run config
    assert request.state is state and isinstance(request.runtime, ToolRuntime) and request.runtime.config == {}


def test_get_config_is_looked_up_in_the_middleware_module_at_call_time() -> None:
    seen: list[Any] = []

    def when(request: Any) -> bool:
        seen.append(request.runtime.config)
        return True

    middleware = HumanInTheLoopMiddleware({"send_email": InterruptOnConfig(allowed_decisions=["approve"], when=when)})
    with (patch.object(hitl_middleware_module, "get_config", return_value={"tags": ["x"]}) as config,
          patch.object(hitl_middleware_module, "interrupt", return_value={"decisions": [{"type": "approve"}]})):
        result = middleware.after_model(_ai_state(), Runtime())
    config.assert_called()
    assert seen == [{"tags": ["x"]}]
    assert result is not None and result["messages"][0].tool_calls == [EMAIL]
    assert result["messages"][0] == _ai_state()["messages"][-1]  # unchanged, as in LangChain 1.5
    assert result["human_review"]["c_email"]["decision"] == "approve"  # ours: the audit trail, in private state


@pytest.mark.parametrize("interrupt_mode", ["batched", "per_call"])
@pytest.mark.parametrize(("decision", "status"), [({"type": "reject", "message": "no"}, "error"),
                                                   ({"type": "respond", "message": "done already"}, "success"),
                                                   ({"type": "approve"}, "success")])
def test_answers_a_reviewer_gives_are_marked_as_langchain_marks_them(
    run: Runner, interrupt_mode: str, decision: dict[str, Any], status: str
) -> None:
    agent = agent_with(HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode=cast(Any, interrupt_mode)))
    (pending,) = run(agent, {"messages": [HumanMessage("go")]}, config=CFG)["__interrupt__"]
    answer = {"decisions": [decision]} if interrupt_mode == "batched" else decision
    out = run(agent, Command(resume={pending.id: answer}), config=CFG)
    (message,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert message.status == status
    marked = {"lc_source": "hitl_interrupt_decision", "lc_data": {"decision": decision["type"]}}
    assert message.additional_kwargs == ({} if decision["type"] == "approve" else marked)


def test_per_call_response_schema_has_langchains_shape(run: Runner) -> None:
    agent = agent_with(HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode="per_call"))
    (pending,) = run(agent, {"messages": [HumanMessage("go")]}, config=CFG)["__interrupt__"]
    schema = pending.response_schema
    assert schema["oneOf"] == [{"$ref": f"#/$defs/{kind}Decision"} for kind in ("Approve", "Edit", "Reject", "Respond")]
    edited = schema["$defs"]["EditedAction"]["properties"]
    assert edited["name"]["const"] == "send_email" and edited["args"] == {"$ref": "#/$defs/send_email"}
    tool_args = schema["$defs"]["send_email"]
    assert (tool_args["required"], tool_args["description"]) == (["to", "body"], "Send an email.")
    with pytest.raises(ValidationError, match=r"1 validation error for HumanInTheLoopMiddleware\.after_model: the "
                                              r"answer for 'send_email'.*\nedit\.edited_action\n") as err:
        run(agent, Command(resume={pending.id: {"type": "edit"}}), config=CFG)
    assert isinstance(err.value, InvalidResumeError) and err.value.allowed_decisions == (
        "approve", "edit", "reject", "respond")
    assert ran == []
    run(agent, Command(resume={pending.id: {"type": "approve"}}), config=CFG)
    assert len(ran) == 1


def test_per_call_refuses_a_reviewed_call_without_an_id(run: Runner) -> None:
    call = tool_call("send_email", {"to": "ann@example.com", "body": "hi"}, id="x")
    call["id"] = None
    model = ScriptedChatModel([AIMessage("", tool_calls=[call]), "done"])
    agent = create_agent(model, [send_email], middleware=[HumanInTheLoopMiddleware(
        {"send_email": True}, interrupt_mode="per_call")], checkpointer=InMemorySaver())
    with pytest.raises(MiddlewareConfigError, match="Tool call `send_email` has no ID") as err:
        run(agent, {"messages": [HumanMessage("go")]}, config=CFG)
    assert (err.value.middleware, err.value.hook) == ("HumanInTheLoopMiddleware", "after_model")
    assert ran == []
