"""Structured output and the new middlewares, as users write them: must type-check under mypy --strict."""

from typing import Any

from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from middleware_kit import AgentState, create_agent
from middleware_kit.middlewares.context_editing import ClearToolUsesEdit, ContextEditingMiddleware
from middleware_kit.middlewares.todo_list import PlanningState, TodoListMiddleware
from middleware_kit.structured_output import ToolStrategy
from middleware_kit.testing import ScriptedChatModel


class Weather(BaseModel):
    city: str


strategy: ToolStrategy[Weather] = ToolStrategy(Weather, handle_errors="Try again.")
agent = create_agent(
    ScriptedChatModel(["ok"]),
    response_format=strategy,
    middleware=[TodoListMiddleware(), ContextEditingMiddleware(edits=[ClearToolUsesEdit(keep=1)])],
)


def weather_of(result: AgentState[Weather]) -> str | None:
    response = result.get("structured_response")
    return None if response is None else response.city


def todos_of(state: PlanningState) -> list[str]:
    return [todo["content"] for todo in state.get("todos", [])]


def run() -> Any:
    return agent.invoke({"messages": [HumanMessage("hi")]})
