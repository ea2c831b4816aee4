"""Structured output with a research step: a typed answer, a retry on a bad answer, and a plan kept in state.

What it shows
    ``create_agent(response_format=ToolStrategy(TripPlan))`` gives the model a ``TripPlan`` tool. The scripted model
    (standing in for a provider) first calls a regular tool, then answers through the structured tool with a
    malformed day count: the error goes back to the model as a ``ToolMessage`` and it answers again, this time in
    the same message as one more regular call. That call runs, then the run ends with
    ``result["structured_response"]``, a validated ``TripPlan`` instance. ``TodoListMiddleware`` keeps the agent's
    plan in ``state["todos"]`` and ``ContextEditingMiddleware`` keeps old tool results out of later model calls
    without touching the stored history.

When to use it
    Whenever the caller needs data, not prose: an API response, a form to fill, a row to store. Validation lives in
    the schema (pydantic here), and the model fixes its own mistakes.

Run it: ``python recipes/structured_output.py``.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field

from middleware_kit import create_agent
from middleware_kit.middlewares.context_editing import ClearToolUsesEdit, ContextEditingMiddleware
from middleware_kit.middlewares.todo_list import TodoListMiddleware
from middleware_kit.structured_output import ToolStrategy
from middleware_kit.testing import ScriptedChatModel, tool_call


class TripPlan(BaseModel):
    """The final plan of a trip."""

    city: str
    days: int = Field(ge=1, le=30, description="length of the stay")
    highlights: list[str]


@tool
def city_guide(city: str) -> str:
    """The travel guide of a city."""
    return f"{city}: old town, harbour, museum of modern art. " + "More details... " * 80


@tool
def book_hotel(city: str, nights: int) -> str:
    """Book a hotel."""
    return f"booked {nights} nights in {city}"


def main() -> None:
    plan = [{"content": "read the guide", "status": "completed"}, {"content": "answer", "status": "in_progress"}]
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[
            tool_call("city_guide", {"city": "Lisbon"}),
            tool_call("write_todos", {"todos": plan}),
        ]),
        AIMessage("", tool_calls=[tool_call("TripPlan", {"city": "Lisbon", "days": 0, "highlights": []}, id="bad")]),
        AIMessage("", tool_calls=[
            tool_call("book_hotel", {"city": "Lisbon", "nights": 3}),
            tool_call("TripPlan", {"city": "Lisbon", "days": 3, "highlights": ["old town", "harbour"]}),
        ]),
    ])
    agent = create_agent(
        model,
        [city_guide, book_hotel],
        system_prompt="You plan trips.",
        middleware=[
            TodoListMiddleware(),
            ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=300, keep=2)]),
        ],
        response_format=ToolStrategy(TripPlan),
    )
    result = agent.invoke({"messages": [HumanMessage("Plan 3 days in Lisbon and book a hotel.")]})

    trip = result["structured_response"]
    print(f"  structured_response: {trip!r}")
    for message in result["messages"]:
        print(f"  {type(message).__name__:12} {str(message.content)[:70]!r}")

    if trip != TripPlan(city="Lisbon", days=3, highlights=["old town", "harbour"]):
        raise SystemExit(f"unexpected structured response: {trip!r}")
    error = next(m for m in result["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "bad")
    if error.status != "error" or "days" not in error.content:
        raise SystemExit(f"the malformed answer should have been sent back to the model: {error!r}")
    if model.call_count != 3:
        raise SystemExit(f"the run should end after the structured answer; {model.call_count} model calls")
    if not any(isinstance(m, ToolMessage) and m.content == "booked 3 nights in Lisbon" for m in result["messages"]):
        raise SystemExit("the regular tool called alongside the structured answer should have run")
    if result["todos"] != plan:
        raise SystemExit(f"the plan should be in state: {result.get('todos')!r}")
    guide_sent = [m.content for m in model.calls[-1].messages if isinstance(m, ToolMessage) and m.name == "city_guide"]
    if guide_sent != ["[cleared]"]:
        raise SystemExit(f"the old guide should not be sent to the last model call: {guide_sent!r}")
    if not next(m for m in result["messages"] if m.name == "city_guide").content.startswith("Lisbon"):
        raise SystemExit("the stored history must keep the original tool result")
    print(f"\nOK: {trip.city}, {trip.days} days, after {model.call_count} model calls and one corrected answer.")


if __name__ == "__main__":
    main()
