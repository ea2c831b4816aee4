"""Structured output: ``response_format=ToolStrategy(...)`` or a bare schema, through the public API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from middleware_kit import AgentArgumentError, MiddlewareConfigError, ModelRequest, create_agent, wrap_model_call
from middleware_kit.structured_output import (
    MultipleStructuredOutputsError,
    StructuredOutputValidationError,
    ToolStrategy,
)
from middleware_kit.testing import ScriptedChatModel, arun_model_chain, make_request, run_model_chain, tool_call
from tests.conftest import Runner, add
from tests.helpers import kinds


class Weather(BaseModel):
    """A weather report."""

    city: str
    temperature: float = Field(description="degrees Celsius")


@dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


WEATHER_JSON = {
    "title": "weather",
    "description": "A weather report.",
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def test_structured_call_alongside_a_regular_tool_call(run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[
            tool_call("add", {"a": 1, "b": 2}, id="c_add"),
            tool_call("Weather", {"city": "Oslo", "temperature": 3.5}, id="c_out"),
        ]),
    ])
    agent = create_agent(model, [add], response_format=ToolStrategy(Weather))
    result = run(agent, {"messages": [HumanMessage("weather in Oslo?")]})

    assert result["structured_response"] == Weather(city="Oslo", temperature=3.5)
    # The regular tool ran too, and the run ended after it: the model was called once.
    assert model.call_count == 1
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage"]
    answers = {m.tool_call_id: m for m in result["messages"][2:]}
    assert answers["c_add"].content == "3" and answers["c_add"].name == "add"
    assert answers["c_out"].name == "Weather" and answers["c_out"].status == "success"
    assert answers["c_out"].content == "Returning structured response: city='Oslo' temperature=3.5"
    # Both tools were offered together, and tool use was forced.
    assert model.calls[0].tools == ("add", "Weather")
    assert model.calls[0].kwargs["tool_choice"] == "any"


def test_structured_call_alone_ends_the_run_without_the_tool_node(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("Weather", {"city": "Rome", "temperature": 20})])])
    agent = create_agent(model, [add], response_format=Weather)
    result = run(agent, {"messages": [HumanMessage("q")]})
    assert result["structured_response"].city == "Rome"
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert model.call_count == 1


def test_parse_error_is_sent_to_the_model_which_retries(run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("Weather", {"city": "Oslo"}, id="bad")]),
        AIMessage("", tool_calls=[tool_call("Weather", {"city": "Oslo", "temperature": 1}, id="good")]),
    ])
    result = run(create_agent(model, response_format=ToolStrategy(Weather)), {"messages": [HumanMessage("q")]})
    error = result["messages"][2]
    assert isinstance(error, ToolMessage) and error.tool_call_id == "bad" and error.status == "error"
    assert error.content.startswith("Error: Failed to parse structured output for tool 'Weather'")
    assert error.content.endswith("Please fix your mistakes.")
    # The model's second call saw the error, paired with its call.
    assert kinds(list(model.calls[1].messages)) == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert result["structured_response"] == Weather(city="Oslo", temperature=1)


def test_handle_errors_false_raises(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("Weather", {"city": 1})])])
    agent = create_agent(model, response_format=ToolStrategy(Weather, handle_errors=False))
    with pytest.raises(StructuredOutputValidationError, match="Failed to parse structured output") as info:
        run(agent, {"messages": [HumanMessage("q")]})
    assert info.value.tool_name == "Weather" and isinstance(info.value.ai_message, AIMessage)


@pytest.mark.parametrize(
    ("handle_errors", "expected"),
    [
        ("Use the schema.", "Use the schema."),
        (lambda exc: f"custom: {type(exc).__name__}", "custom: StructuredOutputValidationError"),
        (StructuredOutputValidationError, "Error: Failed"),
    ],
)
def test_handle_errors_message_forms(run: Runner, handle_errors: Any, expected: str) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("Weather", {})]),
        AIMessage("", tool_calls=[tool_call("Weather", {"city": "a", "temperature": 0})]),
    ])
    agent = create_agent(model, response_format=ToolStrategy(Weather, handle_errors=handle_errors))
    result = run(agent, {"messages": [HumanMessage("q")]})
    assert result["messages"][2].content.startswith(expected)


def test_handle_errors_other_exception_type_raises(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("Weather", {})])])
    agent = create_agent(model, response_format=ToolStrategy(Weather, handle_errors=(MultipleStructuredOutputsError,)))
    with pytest.raises(StructuredOutputValidationError):
        run(agent, {"messages": [HumanMessage("q")]})


def test_multiple_structured_calls_get_errors_and_a_retry(run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[
            tool_call("Weather", {"city": "a", "temperature": 1}, id="w"),
            tool_call("Point", {"x": 1, "y": 2}, id="p"),
        ]),
        AIMessage("", tool_calls=[tool_call("Point", {"x": 1, "y": 2})]),
    ])
    agent = create_agent(model, response_format=ToolStrategy(Weather | Point))
    result = run(agent, {"messages": [HumanMessage("q")]})
    errors = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert {m.tool_call_id for m in errors} == {"w", "p"}
    assert "multiple structured responses (Weather, Point)" in errors[0].content
    assert result["structured_response"] == Point(x=1, y=2)
    assert model.calls[0].tools == ("Weather", "Point")


@pytest.mark.parametrize(
    ("schema", "name", "args", "expected"),
    [
        (Point, "Point", {"x": 1, "y": 2}, Point(x=1, y=2)),
        (Movie, "Movie", {"title": "Up", "year": 2009}, {"title": "Up", "year": 2009}),
        (WEATHER_JSON, "weather", {"city": "Oslo"}, {"city": "Oslo"}),
    ],
    ids=["dataclass", "typeddict", "json_schema"],
)
def test_bare_schema_forms(run: Runner, schema: Any, name: str, args: dict[str, Any], expected: Any) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call(name, args)])])
    result = run(create_agent(model, response_format=schema), {"messages": [HumanMessage("q")]})
    assert result["structured_response"] == expected
    assert model.calls[0].tools == (name,)


def test_tool_message_content_and_request_field(run: Runner) -> None:
    seen: list[Any] = []

    @wrap_model_call
    def look(request: ModelRequest, handler: Any) -> Any:
        seen.append(request.response_format)
        response = handler(request)
        seen.append(response.structured_response)
        return response

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("Point", {"x": 0, "y": 0})])])
    agent = create_agent(model, middleware=[look], response_format=ToolStrategy(Point, tool_message_content="Got it"))
    result = run(agent, {"messages": [HumanMessage("q")]})
    assert isinstance(seen[0], ToolStrategy) and seen[0].schema is Point
    assert seen[1] == Point(0, 0)  # wrappers see the parsed response
    assert result["messages"][-1].content == "Got it"


def test_a_wrapper_overriding_response_format_takes_effect(run: Runner) -> None:
    @wrap_model_call
    def ask_for_a_point(request: ModelRequest, handler: Any) -> Any:
        return handler(request.override(response_format=Point))

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("Point", {"x": 3, "y": 4})])])
    result = run(create_agent(model, [add], middleware=[ask_for_a_point]), {"messages": [HumanMessage("q")]})
    assert result["structured_response"] == Point(3, 4)
    assert model.calls[0].tools == ("add", "Point")


def test_a_wrapper_can_remove_the_response_format(run: Runner) -> None:
    @wrap_model_call
    def plain(request: ModelRequest, handler: Any) -> Any:
        return handler(request.override(response_format=None))

    model = ScriptedChatModel(["just text"])
    result = run(create_agent(model, middleware=[plain], response_format=Weather), {"messages": [HumanMessage("q")]})
    assert "structured_response" not in result
    assert model.calls[0].tools == () and "tool_choice" not in model.calls[0].kwargs


def test_explicit_tool_choice_is_kept(run: Runner) -> None:
    @wrap_model_call
    def auto(request: ModelRequest, handler: Any) -> Any:
        return handler(request.override(tool_choice="auto"))

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("Point", {"x": 3, "y": 4})])])
    run(create_agent(model, middleware=[auto], response_format=Point), {"messages": [HumanMessage("q")]})
    assert model.calls[0].kwargs["tool_choice"] == "auto"


def test_each_run_of_a_thread_gets_its_own_answer(run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("Point", {"x": 1, "y": 1})]),
        AIMessage("", tool_calls=[tool_call("Point", {"x": "bad", "y": 2})]),
        AIMessage("", tool_calls=[tool_call("Point", {"x": 2, "y": 2})]),
    ])
    agent = create_agent(model, response_format=Point, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert run(agent, {"messages": [HumanMessage("1")]}, config=config)["structured_response"] == Point(1, 1)
    # A parse error in a later run is retried, although the thread already holds a structured response.
    assert run(agent, {"messages": [HumanMessage("2")]}, config=config)["structured_response"] == Point(2, 2)
    assert model.call_count == 3


def test_invalid_response_formats_are_rejected_when_built() -> None:
    with pytest.raises(AgentArgumentError, match="response_format"):
        create_agent(ScriptedChatModel([]), response_format="json")
    with pytest.raises(MiddlewareConfigError, match="have the name of a tool"):

        class add(BaseModel):
            a: int

        from tests.conftest import add as add_tool

        create_agent(ScriptedChatModel([]), [add_tool], response_format=add)


def test_plain_answer_without_the_structured_tool_ends_without_a_response(run: Runner) -> None:
    # A model that ignores tool_choice and answers in text: the run ends, no structured_response.
    model = ScriptedChatModel(["it is sunny"])
    result = run(create_agent(model, response_format=Weather), {"messages": [HumanMessage("q")]})
    assert "structured_response" not in result
    assert result["messages"][-1].content == "it is sunny"


def test_testing_kit_runs_a_chain_with_a_response_format() -> None:
    import asyncio

    @wrap_model_call
    def passthrough(request: ModelRequest, handler: Any) -> Any:
        return handler(request)

    def model() -> ScriptedChatModel:
        return ScriptedChatModel([AIMessage("", tool_calls=[tool_call("Point", {"x": 1, "y": 2})])])

    response = run_model_chain(passthrough, make_request(["q"], model=model(), response_format=Point))
    assert response.structured_response == Point(1, 2)  # type: ignore[union-attr]
    response = asyncio.run(arun_model_chain(passthrough, make_request(["q"], model=model(), response_format=Point)))
    assert response.structured_response == Point(1, 2)  # type: ignore[union-attr]
