"""``TodoListMiddleware``: a ``write_todos`` tool and a planning prompt, so the agent keeps a task list in state.

- ``write_todos(todos)`` replaces ``state["todos"]`` (a list of ``{content, status}``) and answers with a
  ``ToolMessage``, through a ``Command``.
- The planning prompt is appended to the system message of each model call (never stored in state).
- Two ``write_todos`` calls in one ``AIMessage`` would race: each gets an error ``ToolMessage`` (from
  ``after_model``, so neither runs) and the todos stay as they were; the other calls of that message run.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import TypedDict

from middleware_kit._engine.pairing import last_ai_index
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import NON_EMPTY_STR, STR, Config
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.types import AgentState, ModelRequest, OmitFromInput

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


WRITE_TODOS_TOOL_DESCRIPTION = """Use this tool to create and manage a structured task list for your current work session. This helps you track progress, organize complex tasks, and demonstrate thoroughness to the user.

Only use this tool if you think it will be helpful in staying organized. If the user's request is trivial and takes less than 3 steps, it is better to NOT use this tool and just do the task directly.

## When to Use This Tool
Use this tool in these scenarios:

1. Complex multi-step tasks - When a task requires 3 or more distinct steps or actions
2. Non-trivial and complex tasks - Tasks that require careful planning or multiple operations
3. User explicitly requests todo list - When the user directly asks you to use the todo list
4. User provides multiple tasks - When users provide a list of things to be done (numbered or comma-separated)
5. The plan may need future revisions or updates based on results from the first few steps

## How to Use This Tool
1. When you start working on a task - Mark it as in_progress BEFORE beginning work.
2. After completing a task - Mark it as completed and add any new follow-up tasks discovered during implementation.
3. You can also update future tasks, such as deleting them if they are no longer necessary, or adding new tasks that are necessary. Don't change previously completed tasks.
4. You can make several updates to the todo list at once. For example, when you complete a task, you can mark the next task you need to start as in_progress.

## When NOT to Use This Tool
It is important to skip using this tool when:
1. There is only a single, straightforward task
2. The task is trivial and tracking it provides no benefit
3. The task can be completed in less than 3 trivial steps
4. The task is purely conversational or informational

## Task States and Management

1. **Task States**: Use these states to track progress:
   - pending: Task not yet started
   - in_progress: Currently working on (you can have multiple tasks in_progress at a time if they are not related to each other and can be run in parallel)
   - completed: Task finished successfully

2. **Task Management**:
   - Update task status in real-time as you work
   - Mark tasks complete IMMEDIATELY after finishing (don't batch completions)
   - Complete current tasks before starting new ones
   - Remove tasks that are no longer relevant from the list entirely
   - IMPORTANT: When you write this todo list, you should mark your first task (or tasks) as in_progress immediately!.
   - IMPORTANT: Unless all tasks are completed, you should always have at least one task in_progress to show the user that you are working on something.

3. **Task Completion Requirements**:
   - ONLY mark a task as completed when you have FULLY accomplished it
   - If you encounter errors, blockers, or cannot finish, keep the task as in_progress
   - When blocked, create a new task describing what needs to be resolved
   - Never mark a task as completed if:
     - There are unresolved issues or errors
     - Work is partial or incomplete
     - You encountered blockers that prevent completion
     - You couldn't find necessary resources or dependencies
     - Quality standards haven't been met

4. **Task Breakdown**:
   - Create specific, actionable items
   - Break complex tasks into smaller, manageable steps
   - Use clear, descriptive task names

Being proactive with task management demonstrates attentiveness and ensures you complete all requirements successfully
Remember: If you only need to make a few tool calls to complete a task, and it is clear what you need to do, it is better to just do the task directly and NOT call this tool at all."""  # noqa: E501
"""The description of the ``write_todos`` tool the model sees (LangChain's text)."""

WRITE_TODOS_SYSTEM_PROMPT = """## `write_todos`

You have access to the `write_todos` tool to help you manage and plan complex objectives.
Use this tool for complex objectives to ensure that you are tracking each necessary step and giving the user visibility into your progress.
This tool is very helpful for planning complex objectives, and for breaking down these larger complex objectives into smaller steps.

It is critical that you mark todos as completed as soon as you are done with a step. Do not batch up multiple steps before marking them as completed.
For simple objectives that only require a few steps, it is better to just complete the objective directly and NOT use this tool.
Writing todos takes time and tokens, use it when it is helpful for managing complex many-step problems! But not for simple few-step requests.

## Important To-Do List Usage Notes to Remember
- The `write_todos` tool should never be called multiple times in parallel.
- Don't be afraid to revise the To-Do list as you go. New information may reveal new tasks that need to be done, or old tasks that are irrelevant."""  # noqa: E501
"""Appended to the system message of each model call, as a text content block (LangChain's text)."""

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


class TodoListMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware[PlanningState]):
    """Give the agent a todo list: the ``write_todos`` tool, ``PlanningState.todos`` and a planning prompt.

    Args:
        system_prompt: Appended (after a blank line) to the system message of every model call.
        tool_description: The description of ``write_todos``.
    """

    state_schema = PlanningState

    __config__ = Config(
        owner=lambda _: "TodoListMiddleware",
        template="{owner}: {param} must be {expected}, got {value!r:.60}. Pass the text the model reads "
        "(system_prompt='' adds nothing).",
        system_prompt=STR,
        tool_description=NON_EMPTY_STR.saying("a str (not empty)"),
    )

    def __init__(
        self,
        *,
        system_prompt: str = WRITE_TODOS_SYSTEM_PROMPT,
        tool_description: str = WRITE_TODOS_TOOL_DESCRIPTION,
    ) -> None:
        self.system_prompt = system_prompt
        self.tool_description = tool_description
        default = tool_description == WRITE_TODOS_TOOL_DESCRIPTION
        self.tools = [write_todos if default else _make_tool(tool_description)]

    # -- the prompt -------------------------------------------------------------------------------------------
    def _with_prompt(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request with the prompt appended as a text content block, as LangChain does: the system message's
        content becomes ``[*content_blocks, {"type": "text", "text": "\\n\\n" + prompt}]`` (or the prompt's block
        alone without a system message). The message's id and kwargs are kept."""
        if not self.system_prompt:
            return request
        current = request.system_message
        if current is None:
            alone: list[Any] = [{"type": "text", "text": self.system_prompt}]
            return request.override(system_message=SystemMessage(content=alone))
        content: list[Any] = [*current.content_blocks, {"type": "text", "text": f"\n\n{self.system_prompt}"}]
        return request.override(system_message=current.model_copy(update={"content": content}))

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Send the request with the planning prompt (a flow: one body for invoke and ainvoke)."""
        return (yield self._with_prompt(request))

    # -- parallel calls ---------------------------------------------------------------------------------------
    def after_model(self, state: PlanningState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Refuse parallel ``write_todos`` calls: each open one gets :data:`PARALLEL_WRITE_TODOS_ERROR` (an error
        ``ToolMessage``, as LangChain's), so none runs and the todos stay as they were."""
        messages = state["messages"]
        i = last_ai_index(messages)
        if i < 0:
            return None
        calls = [c for c in messages[i].tool_calls if c["name"] == "write_todos"]  # type: ignore[union-attr]
        if len(calls) < 2:
            return None
        answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolMessage)}
        errors = [
            ToolMessage(PARALLEL_WRITE_TODOS_ERROR, tool_call_id=c["id"] or "", status="error")
            for c in calls
            if c["id"] not in answered
        ]
        return {"messages": errors} if errors else None

    async def aafter_model(self, state: PlanningState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """LangChain's async entry point of :meth:`after_model` (no I/O: the same body, without a thread hop)."""
        return self.after_model(state, runtime)
