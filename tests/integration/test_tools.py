"""The tool loop: dynamic tools, unknown tools, before_tool/after_tool, parallel calls, errors, return_direct."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import InjectedState, ToolNode, ToolRuntime
from langgraph.types import Command

from middleware_kit import (
    AgentMiddleware,
    HookReturnError,
    ToolCallRequest,
    UnknownToolError,
    after_tool,
    before_tool,
    create_agent,
    wrap_model_call,
    wrap_tool_call,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add, echo
from tests.helpers import kinds, tool_then_answer


@tool
def secret_lookup(key: str) -> str:
    """Look up a secret (only offered dynamically)."""
    return f"secret:{key}"


def test_never_binds_tools_when_there_are_none(run: Runner) -> None:
    model = ScriptedChatModel(["a"])
    run(create_agent(model), {"messages": [HumanMessage("q")]})
    assert model.calls[0].tools == ()

    @wrap_model_call
    def drop_tools(request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[]))

    model2 = ScriptedChatModel(["a"])
    run(create_agent(model2, [add], middleware=[drop_tools]), {"messages": [HumanMessage("q")]})
    assert model2.calls[0].tools == ()
    assert "tools" not in model2.calls[0].kwargs


def test_tool_node_is_rejected() -> None:
    with pytest.raises(TypeError, match="ToolNode"):
        create_agent(ScriptedChatModel([]), ToolNode([add]))  # type: ignore[arg-type]


def test_plain_functions_and_provider_dict_tools(run: Runner) -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    web = {"type": "web_search"}
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("shout", {"text": "hi"})]), "ok"])
    result = run(create_agent(model, [shout, web]), {"messages": [HumanMessage("q")]})
    assert result["messages"][2].content == "HI" and result["messages"][2].name == "shout"
    assert model.calls[0].tools == ("shout", "?")


def test_dynamic_tool_added_by_a_wrapper_needs_registration(run: Runner) -> None:
    @wrap_model_call
    def offer(request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[*request.tools, secret_lookup]))

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("secret_lookup", {"key": "k"})]), "ok"])
    with pytest.raises(UnknownToolError, match=r"Unknown tools: \['secret_lookup'\]") as err:
        run(create_agent(model, [add], middleware=[offer]), {"messages": [HumanMessage("q")]})
    assert isinstance(err.value, ValueError)


def test_dynamic_tool_runs_through_wrap_tool_call(run: Runner) -> None:
    class Dynamic(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request.override(tools=[*request.tools, secret_lookup]))

        def wrap_tool_call(self, request: ToolCallRequest, handler: Any) -> Any:
            if request.tool is None and request.tool_call["name"] == "secret_lookup":
                return handler(request.override(tool=secret_lookup))
            return handler(request)

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("secret_lookup", {"key": "k"})]), "ok"])
    result = run(create_agent(model, middleware=[Dynamic()]), {"messages": [HumanMessage("q")]})
    assert result["messages"][2].content == "secret:k"


def test_hallucinated_tool_gets_an_error_message_for_the_model(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("nope", {})]), "sorry"])
    result = run(create_agent(model, [add]), {"messages": [HumanMessage("q")]})
    assert result["messages"][2].status == "error" and "not a valid tool" in result["messages"][2].content
    assert result["messages"][-1].content == "sorry"


def test_invalid_tool_arguments_become_an_error_tool_message(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": "x"})]), "fixed"])
    result = run(create_agent(model, [add]), {"messages": [HumanMessage("q")]})
    assert result["messages"][2].status == "error"


def test_tool_exceptions_propagate_through_wrappers(run: Runner) -> None:
    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise RuntimeError("tool exploded")

    seen: list[str] = []

    @wrap_tool_call
    def observe(request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except RuntimeError as exc:
            seen.append(str(exc))
            raise

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("broken", {"x": 1})]), "never"])
    with pytest.raises(RuntimeError, match="tool exploded"):
        run(create_agent(model, [broken], middleware=[observe]), {"messages": [HumanMessage("q")]})
    assert seen == ["tool exploded"]


def test_wrap_tool_call_can_handle_tool_exceptions(run: Runner) -> None:
    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise RuntimeError("tool exploded")

    @wrap_tool_call
    def soften(request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except RuntimeError as exc:
            return ToolMessage(f"failed: {exc}", tool_call_id=request.tool_call["id"], status="error")

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("broken", {"x": 1})]), "recovered"])
    result = run(create_agent(model, [broken], middleware=[soften]), {"messages": [HumanMessage("q")]})
    assert result["messages"][2].content == "failed: tool exploded"
    assert result["messages"][-1].content == "recovered"


def test_wrap_tool_call_returning_none_names_the_fix(run: Runner) -> None:
    @wrap_tool_call
    def forgot(request: Any, handler: Any) -> None:
        handler(request)

    with pytest.raises(HookReturnError, match=r"forgot\.wrap_tool_call returned None.*return handler"):
        run(create_agent(tool_then_answer(), [add], middleware=[forgot]), {"messages": [HumanMessage("q")]})


def test_before_tool_rewrites_and_after_tool_replaces(run: Runner) -> None:
    @before_tool
    def double(request: ToolCallRequest) -> ToolCallRequest:
        args = {k: v * 2 for k, v in request.tool_call["args"].items()}
        return request.override(tool_call={**request.tool_call, "args": args})

    @after_tool
    async def annotate(request: ToolCallRequest, result: Any) -> ToolMessage:
        return ToolMessage(f"{result.content} (args {request.tool_call['args']})",
                           tool_call_id=result.tool_call_id, name=result.name)

    # The outer middleware rewrites the call; the inner one's after_tool sees the call that ran.
    result = run(create_agent(tool_then_answer(), [add], middleware=[double, annotate]),
                 {"messages": [HumanMessage("q")]})
    assert result["messages"][2].content == "6 (args {'a': 2, 'b': 4})"
    # Listed the other way round, annotate is outside double: it sees the request as it passed it on (onion).
    result = run(create_agent(tool_then_answer(), [add], middleware=[annotate, double]),
                 {"messages": [HumanMessage("q")]})
    assert result["messages"][2].content == "6 (args {'a': 1, 'b': 2})"


def test_before_tool_short_circuit_skips_tool_wrappers_and_inner_after_tool(run: Runner) -> None:
    trace: list[str] = []

    @after_tool
    def outer_after(request: ToolCallRequest, result: Any) -> None:
        trace.append("outer_after")

    @before_tool
    def deny(request: ToolCallRequest) -> ToolMessage:
        trace.append("deny")
        return ToolMessage("denied by policy", tool_call_id=request.tool_call["id"], status="error")

    @after_tool
    def inner_after(request: ToolCallRequest, result: Any) -> None:
        trace.append("inner_after")

    @wrap_tool_call
    def inner_wrap(request: Any, handler: Any) -> Any:
        trace.append("inner_wrap")
        return handler(request)

    result = run(create_agent(tool_then_answer(), [add], middleware=[outer_after, deny, inner_after, inner_wrap]),
                 {"messages": [HumanMessage("q")]})
    assert trace == ["deny", "outer_after"]
    assert result["messages"][2].content == "denied by policy"


def test_before_tool_runs_once_when_a_wrapper_retries(run: Runner) -> None:
    counts = {"before": 0, "tool": 0}

    @tool
    def flaky(x: int) -> str:
        """Fails once."""
        counts["tool"] += 1
        if counts["tool"] == 1:
            raise ConnectionError("transient")
        return "ok"

    @before_tool
    def count(request: ToolCallRequest) -> None:
        counts["before"] += 1

    @wrap_tool_call
    def retry(request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except ConnectionError:
            return handler(request)

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("flaky", {"x": 1})]), "done"])
    run(create_agent(model, [flaky], middleware=[count, retry]), {"messages": [HumanMessage("q")]})
    assert counts == {"before": 1, "tool": 2}


def test_bad_before_tool_return_is_reported(run: Runner) -> None:
    @before_tool
    def odd(request: ToolCallRequest) -> str:
        return "nope"

    with pytest.raises(HookReturnError, match=r"odd\.before_tool"):
        run(create_agent(tool_then_answer(), [add], middleware=[odd]), {"messages": [HumanMessage("q")]})


def test_parallel_tool_calls_each_get_their_own_chain(run: Runner) -> None:
    seen: list[str] = []

    @wrap_tool_call
    def spy(request: ToolCallRequest, handler: Any) -> Any:
        seen.append(request.tool_call["id"])
        return handler(request)

    calls = [tool_call("add", {"a": 1, "b": 1}, id="c1"), tool_call("echo", {"text": "x"}, id="c2")]
    model = ScriptedChatModel([AIMessage("", tool_calls=calls), "both done"])
    result = run(create_agent(model, [add, echo], middleware=[spy]), {"messages": [HumanMessage("q")]})
    assert sorted(seen) == ["c1", "c2"]
    answers = {m.tool_call_id: m.content for m in result["messages"] if isinstance(m, ToolMessage)}
    assert answers == {"c1": "2", "c2": "x"}


def test_tools_see_state_and_runtime(run: Runner) -> None:
    @tool
    def inspect_state(state: Annotated[dict, InjectedState], runtime: ToolRuntime) -> str:
        """Count messages."""
        return f"{len(state['messages'])} messages, call {runtime.tool_call_id}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("inspect_state", {}, id="z9")]), "ok"])
    result = run(create_agent(model, [inspect_state]), {"messages": [HumanMessage("q")]})
    assert result["messages"][2].content == "2 messages, call z9"


def test_return_direct_tool_ends_the_run(run: Runner) -> None:
    @tool(return_direct=True)
    def final(text: str) -> str:
        """Answer directly."""
        return f"final: {text}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("final", {"text": "bye"})])])
    result = run(create_agent(model, [final]), {"messages": [HumanMessage("q")]})
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert model.call_count == 1


def test_tool_returning_a_command_updates_state(run: Runner) -> None:
    @tool
    def remember(fact: str, runtime: ToolRuntime) -> Command:
        """Store a fact as a message."""
        return Command(update={"messages": [ToolMessage(f"remembered {fact}", tool_call_id=runtime.tool_call_id)]})

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("remember", {"fact": "x"})]), "ok"])
    result = run(create_agent(model, [remember]), {"messages": [HumanMessage("q")]})
    assert result["messages"][2].content == "remembered x"


def test_middleware_tools_are_offered_and_executed(run: Runner) -> None:
    class WithTool(AgentMiddleware):
        tools = (echo,)

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("echo", {"text": "mw"})]), "ok"])
    result = run(create_agent(model, middleware=[WithTool()]), {"messages": [HumanMessage("q")]})
    assert model.calls[0].tools == ("echo",)
    assert result["messages"][2].content == "mw"


def test_tool_calls_of_an_agent_without_tools_are_closed_at_the_end(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("ghost", {}, id="g1")])])
    result = run(create_agent(model), {"messages": [HumanMessage("q")]})
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert result["messages"][-1].status == "error" and result["messages"][-1].tool_call_id == "g1"
