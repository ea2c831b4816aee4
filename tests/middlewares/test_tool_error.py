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
from middleware_kit.middlewares.tool_error import ToolErrorMiddleware
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
    result = run(create_agent(model, [divide], middleware=[ToolErrorMiddleware()]), Q)
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


def test_on_error_must_return_text_or_a_tool_message(run: Runner) -> None:
    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                         middleware=[ToolErrorMiddleware(lambda exc: None)])  # type: ignore[arg-type,return-value]
    with pytest.raises(HookReturnError, match="on_error returned NoneType"):
        run(agent, Q)


def test_validation_errors_of_other_middlewares_reach_the_caller(run: Runner) -> None:
    @wrap_tool_call
    def forgot(request: Any, handler: Any) -> None:
        handler(request)

    agent = create_agent(calls("add", {"a": 1, "b": 2}), [add], middleware=[ToolErrorMiddleware(), forgot])
    with pytest.raises(HookReturnError, match=r"forgot\.wrap_tool_call returned None"):
        run(agent, Q)


def test_interrupts_pass_through(run: Runner) -> None:
    @tool
    def confirm(x: int) -> str:
        """Ask a human first."""
        return f"human said {interrupt('ok?')}"

    agent = create_agent(calls("confirm", {"x": 1}), [confirm], middleware=[ToolErrorMiddleware()],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert run(agent, Q, config=config)["__interrupt__"][0].value == "ok?"
    result = run(agent, Command(resume="yes"), config=config)
    assert result["messages"][2].content == "human said yes" and result["messages"][2].status == "success"


def test_catch_and_tools_select_what_is_converted(run: Runner) -> None:
    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                         middleware=[ToolErrorMiddleware(catch=(KeyError,))])
    with pytest.raises(ZeroDivisionError):
        run(agent, Q)

    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide],
                         middleware=[ToolErrorMiddleware(catch=lambda exc: isinstance(exc, ArithmeticError))])
    assert run(agent, Q)["messages"][2].status == "error"

    agent = create_agent(calls("divide", {"a": 1, "b": 0}), [divide, lookup],
                         middleware=[ToolErrorMiddleware(tools=[lookup])])
    with pytest.raises(ZeroDivisionError):
        run(agent, Q)
    agent = create_agent(calls("lookup", {"key": "k"}), [divide, lookup],
                         middleware=[ToolErrorMiddleware(tools=["lookup"])])
    assert run(agent, Q)["messages"][2].status == "error"


def test_bad_catch_and_tools_are_refused() -> None:
    with pytest.raises(MiddlewareConfigError, match="catch must"):
        ToolErrorMiddleware(catch=("x",))  # type: ignore[arg-type]
    with pytest.raises(MiddlewareConfigError, match="tools must"):
        ToolErrorMiddleware(tools=[1])  # type: ignore[list-item]


def test_outside_a_retry_it_converts_the_final_failure(run: Runner) -> None:
    attempts: list[int] = []

    @tool
    def flaky(x: int) -> str:
        """Always times out."""
        attempts.append(x)
        raise TimeoutError("too slow")

    retry = ToolRetryMiddleware(max_retries=2, on_failure="error", sleep=lambda s: None)
    agent = create_agent(calls("flaky", {"x": 1}), [flaky], middleware=[ToolErrorMiddleware(), retry])
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
