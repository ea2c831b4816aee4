"""The examples of LangChain 1.5's "Structured output" page (docs.langchain.com/oss/python/langchain/
structured-output), tool strategy part, rewritten for middleware_kit: imports changed, the model scripted. Each test
asserts what the page says happens. (`ProviderStrategy` is not offered: docs/migration.md.)
"""

from __future__ import annotations

from typing import Any, Literal, Union

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, Field

from middleware_kit import create_agent
from middleware_kit.structured_output import (
    MultipleStructuredOutputsError,
    StructuredOutputValidationError,
    ToolStrategy,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

REVIEW = "Analyze this review: 'Great product: 5 out of 5 stars. Fast shipping, but expensive'"
EXTRACT = "Extract info: John Doe (john@email.com) is organizing Tech Conference on March 15th"
MULTIPLE = (
    "Error: Model incorrectly returned multiple structured responses (ContactInfo, EventDetails) when only one is "
    "expected.\n Please fix your mistakes."
)


class ProductReview(BaseModel):
    """Analysis of a product review."""

    rating: int | None = Field(description="The rating of the product", ge=1, le=5)
    sentiment: Literal["positive", "negative"] = Field(description="The sentiment of the review")
    key_points: list[str] = Field(description="The key points of the review. Lowercase, 1-3 words each.")


class CustomerComplaint(BaseModel):
    """A customer complaint about a product or service."""

    issue_type: Literal["product", "service", "shipping", "billing"] = Field(description="The type of issue")
    severity: Literal["low", "medium", "high"] = Field(description="The severity of the complaint")
    description: str = Field(description="Brief description of the complaint")


REVIEW_ARGS: dict[str, Any] = {"rating": 5, "sentiment": "positive", "key_points": ["fast shipping", "expensive"]}

product_review_schema = {
    "title": "product_review",
    "type": "object",
    "description": "Analysis of a product review.",
    "properties": {
        "rating": {"type": ["integer", "null"], "description": "The rating of the product (1-5)", "minimum": 1,
                   "maximum": 5},
        "sentiment": {"type": "string", "enum": ["positive", "negative"], "description": "The sentiment of the review"},
        "key_points": {"type": "array", "items": {"type": "string"}, "description": "The key points of the review"},
    },
    "required": ["sentiment", "key_points"],
}


def answering(name: str, args: dict[str, Any]) -> ScriptedChatModel:
    return ScriptedChatModel([AIMessage("", tool_calls=[tool_call(name, args)])])


def test_tool_strategy_pydantic(run: Runner) -> None:
    agent = create_agent(answering("ProductReview", REVIEW_ARGS), tools=[], response_format=ToolStrategy(ProductReview))
    result = run(agent, {"messages": [{"role": "user", "content": REVIEW}]})
    assert result["structured_response"] == ProductReview(**REVIEW_ARGS)


def test_tool_strategy_json_schema(run: Runner) -> None:
    model = answering("product_review", REVIEW_ARGS)
    result = run(create_agent(model, tools=[], response_format=ToolStrategy(product_review_schema)),
                 {"messages": [{"role": "user", "content": REVIEW}]})
    assert result["structured_response"] == REVIEW_ARGS


def test_tool_strategy_union(run: Runner) -> None:
    model = answering("ProductReview", REVIEW_ARGS)
    agent = create_agent(model, tools=[], response_format=ToolStrategy(Union[ProductReview, CustomerComplaint]))  # noqa: UP007
    result = run(agent, {"messages": [{"role": "user", "content": REVIEW}]})
    assert result["structured_response"] == ProductReview(**REVIEW_ARGS)
    assert set(model.calls[0].tools) == {"ProductReview", "CustomerComplaint"}


class MeetingAction(BaseModel):
    """Action items extracted from a meeting transcript."""

    task: str = Field(description="The specific task to be completed")
    assignee: str = Field(description="Person responsible for the task")
    priority: Literal["low", "medium", "high"] = Field(description="Priority level")


def test_custom_tool_message_content(run: Runner) -> None:
    args = {"task": "Update the project timeline", "assignee": "Sarah", "priority": "high"}
    agent = create_agent(
        answering("MeetingAction", args),
        tools=[],
        response_format=ToolStrategy(schema=MeetingAction,
                                     tool_message_content="Action item captured and added to meeting notes!"),
    )
    result = run(agent, {"messages": [{"role": "user", "content": "From our meeting: Sarah needs to update the "
                                       "project timeline as soon as possible"}]})
    answer = result["messages"][-1]
    assert isinstance(answer, ToolMessage) and answer.name == "MeetingAction"
    assert answer.content == "Action item captured and added to meeting notes!"
    default = run(create_agent(answering("MeetingAction", args), tools=[], response_format=ToolStrategy(MeetingAction)),
                  {"messages": [HumanMessage("From our meeting: ...")]})
    assert default["messages"][-1].content.startswith("Returning structured response: ")


class ContactInfo(BaseModel):
    name: str = Field(description="Person's name")
    email: str = Field(description="Email address")


class EventDetails(BaseModel):
    event_name: str = Field(description="Name of the event")
    date: str = Field(description="Event date")


CONTACT = {"name": "John Doe", "email": "john@email.com"}
EVENT = {"event_name": "Tech Conference", "date": "March 15th"}


def multiple_then_one() -> ScriptedChatModel:
    return ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("ContactInfo", CONTACT, id="call_1"),
                                  tool_call("EventDetails", EVENT, id="call_2")]),
        AIMessage("", tool_calls=[tool_call("ContactInfo", CONTACT, id="call_3")]),
    ])


def test_multiple_structured_outputs_are_retried(run: Runner) -> None:
    model = multiple_then_one()
    agent = create_agent(model, tools=[], response_format=ToolStrategy(Union[ContactInfo, EventDetails]))  # noqa: UP007
    result = run(agent, {"messages": [{"role": "user", "content": EXTRACT}]})
    assert result["structured_response"] == ContactInfo(**CONTACT) and model.call_count == 2
    errors: list[Any] = [m for m in result["messages"] if isinstance(m, ToolMessage)][:2]
    assert [m.name for m in errors] == ["ContactInfo", "EventDetails"]
    assert all(m.content.startswith("Error: Model incorrectly returned multiple structured responses (ContactInfo, "
                                    "EventDetails) when only one is expected.") for m in errors)
    assert all(m.content.endswith("\n Please fix your mistakes.") for m in errors)


def test_multiple_structured_outputs_message_is_langchains(run: Runner) -> None:
    agent = create_agent(multiple_then_one(), tools=[], response_format=ToolStrategy(Union[ContactInfo, EventDetails]))  # noqa: UP007
    result = run(agent, {"messages": [{"role": "user", "content": EXTRACT}]})
    assert [m.content for m in result["messages"] if isinstance(m, ToolMessage)][:2] == [MULTIPLE, MULTIPLE]


def test_retry_tool_messages_have_status_error_a_deliberate_difference(run: Runner) -> None:
    # LangChain 1.5 leaves the ToolMessage default "success" on these retry messages; ours say "error"
    # (docs/migration.md "Structured output: ToolStrategy only"), so providers and UIs see a failed call.
    agent = create_agent(multiple_then_one(), tools=[], response_format=ToolStrategy(Union[ContactInfo, EventDetails]))  # noqa: UP007
    result = run(agent, {"messages": [{"role": "user", "content": EXTRACT}]})
    assert [m.status for m in result["messages"] if isinstance(m, ToolMessage)] == ["error", "error", "success"]


class ProductRating(BaseModel):
    rating: int | None = Field(description="Rating from 1-5", ge=1, le=5)
    comment: str = Field(description="Review comment")


def bad_then_good() -> ScriptedChatModel:
    return ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("ProductRating", {"rating": 10, "comment": "Amazing product"})]),
        AIMessage("", tool_calls=[tool_call("ProductRating", {"rating": 5, "comment": "Amazing product"})]),
    ])


def test_schema_validation_error_is_retried(run: Runner) -> None:
    agent = create_agent(
        bad_then_good(), tools=[], response_format=ToolStrategy(ProductRating),
        system_prompt="You are a helpful assistant that parses product reviews. Do not make any field or value up.",
    )
    result = run(agent, {"messages": [{"role": "user", "content": "Parse this: Amazing product, 10/10!"}]})
    assert result["structured_response"] == ProductRating(rating=5, comment="Amazing product")
    error = result["messages"][2]
    assert error.content.startswith("Error: Failed to parse structured output for tool 'ProductRating': 1 validation "
                                    "error for ProductRating")
    assert "Input should be less than or equal to 5" in error.content
    assert error.content.endswith("\n Please fix your mistakes.")


def test_schema_validation_message_has_no_developer_advice(run: Runner) -> None:
    agent = create_agent(bad_then_good(), tools=[], response_format=ToolStrategy(ProductRating))
    result = run(agent, {"messages": [{"role": "user", "content": "Parse this: Amazing product, 10/10!"}]})
    assert "Fix:" not in result["messages"][2].content


@pytest.mark.parametrize(
    ("handle_errors", "expected"),
    [
        ("Please provide a valid rating between 1-5 and include a comment.",
         "Please provide a valid rating between 1-5 and include a comment."),
        (StructuredOutputValidationError, "Error: Failed to parse structured output for tool 'ProductRating'"),
        ((StructuredOutputValidationError, TypeError), "Error: Failed to parse structured output for tool"),
    ],
)
def test_error_handling_strategies(run: Runner, handle_errors: Any, expected: str) -> None:
    agent = create_agent(bad_then_good(), tools=[],
                         response_format=ToolStrategy(schema=ProductRating, handle_errors=handle_errors))
    result = run(agent, {"messages": [{"role": "user", "content": "Parse this: Amazing product, 10/10!"}]})
    assert result["messages"][2].content.startswith(expected)
    assert result["structured_response"].rating == 5


def custom_error_handler(error: Exception) -> str:
    if isinstance(error, StructuredOutputValidationError):
        return "There was an issue with the format. Try again."
    if isinstance(error, MultipleStructuredOutputsError):
        return "Multiple structured outputs were returned. Pick the most relevant one."
    return f"Error: {error!s}"


def test_custom_error_handler_function(run: Runner) -> None:
    agent = create_agent(multiple_then_one(), tools=[],
                         response_format=ToolStrategy(schema=Union[ContactInfo, EventDetails],  # noqa: UP007
                                                      handle_errors=custom_error_handler))
    result = run(agent, {"messages": [{"role": "user", "content": EXTRACT}]})
    contents = [m.content for m in result["messages"] if isinstance(m, ToolMessage)]
    assert contents[:2] == ["Multiple structured outputs were returned. Pick the most relevant one."] * 2
    agent = create_agent(bad_then_good(), tools=[],
                         response_format=ToolStrategy(schema=ProductRating, handle_errors=custom_error_handler))
    result = run(agent, {"messages": [{"role": "user", "content": "Parse this"}]})
    assert result["messages"][2].content == "There was an issue with the format. Try again."


def test_no_error_handling_raises(run: Runner) -> None:
    agent = create_agent(bad_then_good(), tools=[],
                         response_format=ToolStrategy(schema=ProductRating, handle_errors=False))
    with pytest.raises(StructuredOutputValidationError):
        run(agent, {"messages": [{"role": "user", "content": "Parse this"}]})
    agent = create_agent(bad_then_good(), tools=[],
                         response_format=ToolStrategy(schema=ProductRating, handle_errors=ValueError))
    with pytest.raises(StructuredOutputValidationError):  # not a ValueError: raised, not retried
        run(agent, {"messages": [{"role": "user", "content": "Parse this"}]})
