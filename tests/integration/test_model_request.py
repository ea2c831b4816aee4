"""modify_model_request chaining, the frozen request, dynamic prompts, ExtendedModelResponse."""

from __future__ import annotations

import dataclasses
from typing import Any, NotRequired

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    HookReturnError,
    ModelRequest,
    ModelResponse,
    create_agent,
    dynamic_prompt,
    modify_model_request,
    wrap_model_call,
)
from middleware_kit.testing import ScriptedChatModel, make_request, tool_call
from tests.conftest import Runner


def test_modify_model_request_chains_in_list_order_and_never_touches_state(run: Runner) -> None:
    seen: list[tuple[str, str | None, int]] = []

    @modify_model_request
    def first(request: ModelRequest, state: Any) -> ModelRequest:
        seen.append(("first", request.system_prompt, len(request.messages)))
        return request.override(system_prompt="from first", messages=[*request.messages, HumanMessage("extra")])

    @modify_model_request
    async def second(request: ModelRequest, state: Any) -> ModelRequest:
        seen.append(("second", request.system_prompt, len(request.messages)))
        return request.override(system_prompt=f"{request.system_prompt} + second")

    model = ScriptedChatModel(["hello"])
    agent = create_agent(model, middleware=[first, second], system_prompt="base")
    result = run(agent, {"messages": [HumanMessage("hi")]})
    assert seen == [("first", "base", 1), ("second", "from first", 2)]
    sent = model.calls[0].messages
    assert sent[0] == SystemMessage("from first + second")
    assert [m.content for m in sent[1:]] == ["hi", "extra"]
    # State holds only the real conversation: no system message, no request-only message.
    assert [m.content for m in result["messages"]] == ["hi", "hello"]


def test_modify_model_request_must_return_a_request(run: Runner) -> None:
    @modify_model_request
    def broken(request: ModelRequest, state: Any) -> Any:
        return {"messages": []}

    agent = create_agent(ScriptedChatModel(["x"]), middleware=[broken])
    with pytest.raises(HookReturnError) as err:
        run(agent, {"messages": [HumanMessage("hi")]})
    assert err.value.middleware == "broken"
    assert err.value.hook == "modify_model_request"
    assert "must return a ModelRequest" in str(err.value)


def test_request_is_frozen_and_override_copies() -> None:
    request = make_request(["hi"], system_prompt="sys", model_settings={"temperature": 0})
    with pytest.raises(dataclasses.FrozenInstanceError, match="override"):
        request.messages = []
    with pytest.raises(dataclasses.FrozenInstanceError):
        del request.model
    assert isinstance(request.messages, list)  # a list, as in LangChain (each call's own: see the next test)
    with pytest.raises(TypeError):
        request.model_settings["temperature"] = 1  # type: ignore[index]
    changed = request.override(system_prompt="other", tools=[])
    assert request.system_prompt == "sys" and changed.system_prompt == "other"
    assert changed.messages is request.messages  # unchanged fields keep their identity
    assert changed.tools == []
    with pytest.raises(ValueError, match="Cannot specify both system_prompt and system_message"):
        request.override(system_prompt="a", system_message=SystemMessage("b"))
    with pytest.raises(ValueError, match="Cannot specify both"):
        ModelRequest(model=request.model, messages=[], system_prompt="a", system_message=SystemMessage("b"))
    with pytest.raises(TypeError, match="unknown field"):
        request.override(temperature=1)  # type: ignore[call-arg]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_in_place_edits_cannot_leak_into_state(run: Runner) -> None:
    # LangChain's retry pattern edits request.messages in place; here that changes this model call only: each call
    # gets its own list, so nothing reaches the thread's state, the checkpoint or the next call.
    @wrap_model_call
    def sneaky(request: ModelRequest, handler: Any) -> Any:
        request.messages.append(HumanMessage("this call only"))
        request.tools.clear()
        return handler(request)

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "ok"])
    agent = create_agent(model, [add], middleware=[sneaky], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "in-place"}}
    result = run(agent, {"messages": [HumanMessage("hi")]}, config=config)
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    assert all(m.content != "this call only" for m in result["messages"])
    assert all(m.content != "this call only" for m in agent.get_state(config).values["messages"])
    first, second = model.calls
    assert [m.content for m in first.messages][-1] == "this call only" and first.tools == ()
    assert [m.content for m in second.messages].count("this call only") == 1  # the second call's own append only


def test_dynamic_prompt_overrides_system_prompt_and_innermost_wins(run: Runner) -> None:
    @dynamic_prompt
    def outer(request: ModelRequest) -> str:
        return "outer"

    @dynamic_prompt
    async def inner(request: ModelRequest) -> SystemMessage:
        return SystemMessage(f"inner sees {request.system_prompt}")

    model = ScriptedChatModel(["a"])
    run(create_agent(model, middleware=[outer, inner], system_prompt="static"), {"messages": [HumanMessage("q")]})
    assert model.calls[0].messages[0] == SystemMessage("inner sees outer")


def test_wrapper_may_return_ai_message_or_short_circuit(run: Runner) -> None:
    @wrap_model_call
    def cache(request: ModelRequest, handler: Any) -> AIMessage:
        return AIMessage("cached")

    model = ScriptedChatModel([])
    result = run(create_agent(model, middleware=[cache]), {"messages": [HumanMessage("q")]})
    assert result["messages"][-1].content == "cached"
    assert model.call_count == 0


def test_wrapper_returning_none_names_the_fix(run: Runner) -> None:
    @wrap_model_call
    def forgot(request: ModelRequest, handler: Any) -> None:
        handler(request)

    with pytest.raises(HookReturnError, match=r'forgot.wrap_model_call returned None.*return handler\(request\)'):
        run(create_agent(ScriptedChatModel(["x"]), middleware=[forgot]), {"messages": [HumanMessage("q")]})


class Counted(AgentState):
    notes: NotRequired[list[str]]
    count: NotRequired[int]


def test_extended_model_response_updates_apply_inner_first_and_outer_sees_plain_response(run: Runner) -> None:
    outer_saw: list[type] = []

    class Outer(AgentMiddleware):
        state_schema = Counted

        def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
            response = handler(request)
            outer_saw.append(type(response))
            return ExtendedModelResponse(
                model_response=response,
                command=Command(update={"messages": [AIMessage("outer note")], "notes": ["outer"]}),
            )

    class Inner(AgentMiddleware):
        state_schema = Counted

        def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
            return ExtendedModelResponse(
                model_response=handler(request),
                command=Command(update={"messages": [AIMessage("inner note")], "count": 1}),
            )

    result = run(create_agent(ScriptedChatModel(["answer"]), middleware=[Outer(), Inner()]),
                 {"messages": [HumanMessage("q")]})
    assert outer_saw == [ModelResponse]
    assert [m.content for m in result["messages"]] == ["q", "answer", "inner note", "outer note"]
    assert result["count"] == 1 and result["notes"] == ["outer"]


def test_extended_model_response_goto_is_not_supported(run: Runner) -> None:
    @wrap_model_call
    def router(request: ModelRequest, handler: Any) -> Any:
        return ExtendedModelResponse(model_response=handler(request), command=Command(goto="model"))

    with pytest.raises(NotImplementedError, match=r"router\.wrap_model_call"):
        run(create_agent(ScriptedChatModel(["a"]), middleware=[router]), {"messages": [HumanMessage("q")]})


def test_structured_response_from_a_wrapper_lands_in_state(run: Runner) -> None:
    @wrap_model_call
    def structured(request: ModelRequest, handler: Any) -> ModelResponse:
        response = handler(request)
        return ModelResponse(result=response.result, structured_response={"answer": 42})

    result = run(create_agent(ScriptedChatModel(["a"]), middleware=[structured]), {"messages": [HumanMessage("q")]})
    assert result["structured_response"] == {"answer": 42}


def test_no_structured_response_key_unless_set(run: Runner) -> None:
    result = run(create_agent(ScriptedChatModel(["a"])), {"messages": [HumanMessage("q")]})
    assert set(result) == {"messages"}


def test_wrapper_can_retry_by_calling_handler_several_times(run: Runner) -> None:
    @wrap_model_call
    def retry(request: ModelRequest, handler: Any) -> Any:
        for attempt in range(3):
            try:
                return handler(request)
            except ConnectionError:
                if attempt == 2:
                    raise
        raise AssertionError

    model = ScriptedChatModel([ConnectionError("1"), ConnectionError("2"), "finally"])
    result = run(create_agent(model, middleware=[retry]), {"messages": [HumanMessage("q")]})
    assert result["messages"][-1].content == "finally"
    assert model.call_count == 3


def test_model_exception_propagates_unchanged(run: Runner) -> None:
    boom = RuntimeError("provider down")
    with pytest.raises(RuntimeError, match="provider down"):
        run(create_agent(ScriptedChatModel([boom])), {"messages": [HumanMessage("q")]})
