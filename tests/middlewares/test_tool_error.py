"""ToolErrorMiddleware: tool exceptions become error ToolMessages; middleware errors and interrupts still propagate."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from middleware_kit import HookReturnError, MiddlewareConfigError, ToolCallRequest, create_agent, wrap_tool_call
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.retry import ToolRetryMiddleware
from middleware_kit.middlewares.tool_error import DEFAULT_TOOL_ERROR_TEMPLATE, ToolErrorMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add

Q = {"messages": [HumanMessage("q")]}


@tool
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    raise KeyError(key)


def calls(name: str, args: dict[str, Any]) -> ScriptedChatModel:
    return ScriptedChatModel([AIMessage("", tool_calls=[tool_call(name, args, id="c1")]), "recovered"])


def test_tool_exception_becomes_an_error_message_the_model_sees(run: Runner) -> None:
    model = calls("divide", {"a": 1, "b": 0})
    result = run(create_agent(model, [divide], middleware=[ToolErrorMiddleware(DEFAULT_TOOL_ERROR_TEMPLATE)]), Q)
    message = result["messages"][2]
    assert isinstance(message, ToolMessage)
    assert (message.status, message.name, message.tool_call_id) == ("error", "divide", "c1")
    assert message.content == (
        "Error: tool 'divide' raised ZeroDivisionError: division by zero\nPlease fix your mistakes."
    )
    assert model.calls[1].messages[-1].content == message.content
    assert result["messages"][-1].content == "recovered"


def test_template(run: Runner) -> None:
    model = calls("lookup", {"key": "k"})
    middleware = ToolErrorMiddleware("{tool}({args}) failed: {error_type} {error}")
    result = run(create_agent(model, [lookup], middleware=[middleware]), Q)
    assert result["messages"][2].content == "lookup({'key': 'k'}) failed: KeyError 'k'"

    model = calls("lookup", {"key": "k"})
    result = run(create_agent(model, [lookup], middleware=[ToolErrorMiddleware("That did not work.")]), Q)
    assert result["messages"][2].content == "That did not work."


def test_bad_template_is_refused_when_built() -> None:
    with pytest.raises(MiddlewareConfigError, match=r"\{tool\}, \{error_type\}, \{error\} and \{args\}") as err:
        ToolErrorMiddleware("failed: {reason}")
    assert err.value.hook == "on_error"
    with pytest.raises(MiddlewareConfigError, match="on_error must be"):
        ToolErrorMiddleware(42)  # type: ignore[arg-type]


def test_callables(run: Runner) -> None:
    def one(exc: Exception) -> str:
        return f"one: {exc!r}"

    def two(exc: Exception, request: ToolCallRequest) -> ToolMessage:
        return ToolMessage(f"two: {request.tool_call['name']}", tool_call_id=request.tool_call["id"] or "",
                           status="error", artifact={"retryable": False})

    async def async_one(exc: Exception) -> str:
        return "async"

    for on_error, expected in ((one, "one: ZeroDivisionError('division by zero')"), (two, "two: divide"),
                               (async_one, "async"), (str, "division by zero")):
        result = run(create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                                  middleware=[ToolErrorMiddleware(on_error)]), Q)
        assert result["messages"][2].content == expected
        assert result["messages"][2].status == "error"
    assert result["messages"][2].name == "divide"


def test_a_handler_is_required() -> None:
    with pytest.raises(MiddlewareConfigError, match="requires `on_error` and/or `aon_error`") as err:
        ToolErrorMiddleware()
    assert isinstance(err.value, ValueError) and err.value.hook == "on_error"
    with pytest.raises(MiddlewareConfigError, match="aon_error must be"):
        ToolErrorMiddleware(aon_error=42)  # type: ignore[arg-type]


def test_none_lets_the_exception_propagate_and_other_returns_are_refused(run: Runner) -> None:
    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                         middleware=[ToolErrorMiddleware(lambda exc, request: None)])
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        run(agent, Q)
    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                         middleware=[ToolErrorMiddleware(lambda exc: 42)])
    with pytest.raises(HookReturnError, match="on_error returned int"):
        run(agent, Q)


def test_content_blocks_are_sent_as_the_message_content(run: Runner) -> None:
    blocks = [{"type": "text", "text": "divide failed"}]
    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                         middleware=[ToolErrorMiddleware(lambda exc, request: blocks)])
    message = run(agent, Q)["messages"][2]
    assert message.content == blocks and message.status == "error"


def test_aon_error_serves_ainvoke_and_alone_also_invoke(run: Runner, mode: str) -> None:
    def sync_handler(exc: Exception, request: ToolCallRequest) -> str:
        return "sync"

    async def async_handler(exc: Exception, request: ToolCallRequest) -> str:
        return "async"

    both = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                        middleware=[ToolErrorMiddleware(sync_handler, aon_error=async_handler)])
    expected = "async" if mode == "ainvoke" else "sync"
    assert run(both, Q)["messages"][2].content == expected
    alone = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                         middleware=[ToolErrorMiddleware(aon_error=async_handler)])
    assert run(alone, Q)["messages"][2].content == "async"


def test_trace_inputs_are_omitted() -> None:
    policy = ToolErrorMiddleware.trace_policy
    assert policy is not None and policy.process_inputs is not None
    assert policy.process_inputs({"request": {"tool_call": {"args": {"secret": 1}}}}) == {}


def test_validation_errors_of_other_middlewares_reach_the_caller(run: Runner) -> None:
    @wrap_tool_call
    def forgot(request: Any, handler: Any) -> None:
        handler(request)

    agent = create_agent(calls("add", {"a": 1, "b": 2}), [add], middleware=[ToolErrorMiddleware(str), forgot])
    with pytest.raises(HookReturnError, match=r"forgot\.wrap_tool_call returned None"):
        run(agent, Q)


def test_interrupts_pass_through(run: Runner) -> None:
    @tool
    def confirm(x: int) -> str:
        """Ask a human first."""
        return f"human said {interrupt('ok?')}"

    agent = create_agent(calls("confirm", {"x": 1}), [confirm], middleware=[ToolErrorMiddleware(str)],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert run(agent, Q, config=config)["__interrupt__"][0].value == "ok?"
    result = run(agent, Command(resume="yes"), config=config)
    assert result["messages"][2].content == "human said yes" and result["messages"][2].status == "success"


def test_catch_and_tools_select_what_is_converted(run: Runner) -> None:
    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                         middleware=[ToolErrorMiddleware(str, catch=(KeyError,))])
    with pytest.raises(ZeroDivisionError):
        run(agent, Q)

    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                         middleware=[ToolErrorMiddleware(str, catch=lambda exc: isinstance(exc, ArithmeticError))])
    assert run(agent, Q)["messages"][2].status == "error"

    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide, lookup],
                         middleware=[ToolErrorMiddleware(str, tools=[lookup])])
    with pytest.raises(ZeroDivisionError):
        run(agent, Q)
    agent = create_agent(calls("lookup", {"key": "k"}), [divide, lookup],
                         middleware=[ToolErrorMiddleware(str, tools=["lookup"])])
    assert run(agent, Q)["messages"][2].status == "error"


def test_bad_catch_and_tools_are_refused() -> None:
    with pytest.raises(MiddlewareConfigError, match="catch must"):
        ToolErrorMiddleware(str, catch=("x",))  # type: ignore[arg-type]
    with pytest.raises(MiddlewareConfigError, match="tools must"):
        ToolErrorMiddleware(str, tools=[1])  # type: ignore[list-item]


def test_outside_a_retry_it_converts_the_final_failure(run: Runner) -> None:
    attempts: list[int] = []

    @tool
    def flaky(x: int) -> str:
        """Always times out."""
        attempts.append(x)
        raise TimeoutError("too slow")

    retry = ToolRetryMiddleware(max_retries=2, on_failure="error", sleep=lambda s: None)
    agent = create_agent(calls("flaky", {"x": 1}), [flaky],
                         middleware=[ToolErrorMiddleware(DEFAULT_TOOL_ERROR_TEMPLATE), retry])
    result = run(agent, Q)
    assert len(attempts) == 3
    assert result["messages"][2].content == (
        "Error: tool 'flaky' raised TimeoutError: too slow\nPlease fix your mistakes."
    )


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    names = ["add"]
    mw = ToolErrorMiddleware("failed: {error}", tools=names)
    names.append("other")
    assert mw.tools_handled == frozenset({"add"})
    create_agent(ScriptedChatModel(["ok"]), [add], middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'on_error'"):
        mw.on_error = "x"
    changed = mw.replace(on_error="broken: {error_type}")

    @tool
    def explode(x: int) -> str:
        """Always fails."""
        raise RuntimeError("boom")

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("explode", {"x": 1})]), "ok"])
    result = run(create_agent(model, [explode], middleware=[changed.replace(tools=None)]),
                 {"messages": [HumanMessage("go")]})
    assert result["messages"][2].content == "broken: RuntimeError" and result["messages"][2].status == "error"
