"""``TodoListMiddleware``: a ``write_todos`` tool and a planning prompt, so the agent keeps a task list in state.

- ``write_todos(todos)`` replaces ``state["todos"]`` (a list of ``{content, status}``) and answers with a
  ``ToolMessage``, through a ``Command``.
- The planning prompt is appended to the system message of each model call (never stored in state).
- Two ``write_todos`` calls in one ``AIMessage`` would race: each gets an error ``ToolMessage`` (from
  ``after_model``, so neither runs) and the todos stay as they were; the other calls of that message run.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import TypedDict

from middleware_kit.hooks import AsyncModelHandler, ModelHandler
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.types import AgentState, ModelRequest, ModelResponse, OmitFromInput

__all__ = [
    "PARALLEL_WRITE_TODOS_ERROR",
    "WRITE_TODOS_SYSTEM_PROMPT",
    "WRITE_TODOS_TOOL_DESCRIPTION",
    "PlanningState",
    "Todo",
    "TodoListMiddleware",
    "write_todos",
]


class Todo(TypedDict):
    """One task of the list."""

    content: str
    """What to do."""
    status: Literal["pending", "in_progress", "completed"]


class PlanningState(AgentState):
    """The state of an agent with a todo list."""

    todos: NotRequired[Annotated[list[Todo], OmitFromInput]]
    """The current todo list, as the last ``write_todos`` call set it."""


WRITE_TODOS_TOOL_DESCRIPTION = """Create and update the todo list of your current task.

Use it for work that takes three or more steps, or when the user asks for a plan or gives several tasks at once.
Skip it for a single, simple request: just do it.

Each call replaces the whole list. A todo is {"content": "...", "status": "pending" | "in_progress" |
"completed"}.
- Mark a task in_progress before you start it, and completed as soon as it is done; never batch completions.
- Keep tasks specific and actionable; add new ones as you discover them, and remove ones that no longer apply.
- Only mark a task completed when it is fully done (not when it failed or is blocked: keep it in_progress and add
  a task for what blocks it).
- Call this tool at most once per turn."""
"""The description of the ``write_todos`` tool the model sees."""

WRITE_TODOS_SYSTEM_PROMPT = """## `write_todos`

You have the `write_todos` tool to plan and track multi-step work. Use it for complex objectives so that you, and
the user, can see progress; do not use it for simple requests that take a step or two.

Write the plan as soon as you know the steps, mark each task in_progress when you start it and completed as soon as
it is done, and revise the list when you learn something new. Call `write_todos` at most once per turn: never call
it several times in parallel."""
"""Appended to the system message of each model call."""

PARALLEL_WRITE_TODOS_ERROR = (
    "Error: The `write_todos` tool should never be called multiple times in parallel. Please call it only once per "
    "model invocation to update the todo list."
)
"""The content of the error ``ToolMessage`` each of several parallel ``write_todos`` calls gets."""


def _write_todos(todos: list[Todo], tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Replace the todo list."""
    return Command(
        update={
            "todos": todos,
            "messages": [ToolMessage(f"Updated todo list to {todos}", tool_call_id=tool_call_id, name="write_todos")],
        }
    )


def _make_tool(description: str) -> BaseTool:
    return StructuredTool.from_function(func=_write_todos, name="write_todos", description=description)


write_todos: BaseTool = _make_tool(WRITE_TODOS_TOOL_DESCRIPTION)
"""The ``write_todos`` tool with the default description (the middleware offers it; one is made per custom
``tool_description``)."""


class TodoListMiddleware(AgentMiddleware[PlanningState]):
    """Give the agent a todo list: the ``write_todos`` tool, ``PlanningState.todos`` and a planning prompt.

    Args:
        system_prompt: Appended (after a blank line) to the system message of every model call.
        tool_description: The description of ``write_todos``.
    """

    state_schema = PlanningState

    def __init__(
        self,
        *,
        system_prompt: str = WRITE_TODOS_SYSTEM_PROMPT,
        tool_description: str = WRITE_TODOS_TOOL_DESCRIPTION,
    ) -> None:
        self.system_prompt = system_prompt
        self.tool_description = tool_description
        default = tool_description == WRITE_TODOS_TOOL_DESCRIPTION
        self.tools = (write_todos if default else _make_tool(tool_description),)

    # -- the prompt -------------------------------------------------------------------------------------------
    def _with_prompt(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        if not self.system_prompt:
            return request
        current = request.system_message
        if current is None:
            return request.override(system_message=SystemMessage(content=self.system_prompt))
        if isinstance(current.content, str):
            content: Any = f"{current.content}\n\n{self.system_prompt}" if current.content else self.system_prompt
        else:
            content = [*current.content, {"type": "text", "text": f"\n\n{self.system_prompt}"}]
        return request.override(system_message=current.model_copy(update={"content": content}))

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any]:
        return handler(self._with_prompt(request))

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> ModelResponse[Any]:
        return await handler(self._with_prompt(request))

    # -- parallel calls ---------------------------------------------------------------------------------------
    def _refuse_parallel(self, state: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        i = len(messages) - 1
        while i >= 0 and not isinstance(messages[i], AIMessage):
            i -= 1
        if i < 0:
            return None
        message = messages[i]
        calls = [c for c in message.tool_calls if c["name"] == "write_todos"]
        if len(calls) < 2:
            return None
        answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolMessage)}
        errors = [
            ToolMessage(PARALLEL_WRITE_TODOS_ERROR, tool_call_id=c["id"] or "", name="write_todos", status="error")
            for c in calls
            if c["id"] not in answered
        ]
        return {"messages": errors} if errors else None

    def after_model(self, state: PlanningState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._refuse_parallel(state)

    async def aafter_model(self, state: PlanningState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._refuse_parallel(state)
