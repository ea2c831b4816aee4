"""What every subject of the benchmark shares: the tool, the scripted model, the no-op middlewares, the input.

Every subject runs the same conversation, one tool round-trip per invoke::

    human -> model (AIMessage with one tool call) -> tool -> model (text "done") -> end

:func:`check_messages` verifies that flow on every subject before it is timed, so a subject that silently does
less work cannot look fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import AgentMiddleware
from middleware_kit.flow import ModelCallFlow, ToolCallFlow
from middleware_kit.hooks import AsyncModelHandler, AsyncToolHandler, ModelHandler, ToolHandler, ToolResult
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.types import ModelRequest, ToolCallRequest

__all__ = [
    "FINAL_TEXT",
    "NS",
    "TOOL_ARGS",
    "AsyncNoopMiddleware",
    "BenchSetupError",
    "CountingSaver",
    "NoopMiddleware",
    "add",
    "check_messages",
    "clear_saver",
    "make_input",
    "make_model",
    "noops",
]

NS: tuple[int, ...] = (0, 1, 10, 20)
"""Middleware counts measured."""

TOOL_ARGS: dict[str, Any] = {"a": 1, "b": 2}
FINAL_TEXT = "done"


class BenchSetupError(AssertionError):
    """A subject did not run the expected conversation: its timing would be meaningless."""


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_model() -> ScriptedChatModel:
    """A fresh scripted model: a tool call, then a text reply, cycling (one cycle per invoke)."""
    return ScriptedChatModel(
        [AIMessage(content="", tool_calls=[tool_call("add", TOOL_ARGS, id="call_bench")]), FINAL_TEXT],
        cycle=True,
    )


def make_input() -> dict[str, Any]:
    """A fresh input per invoke (LangGraph's ``add_messages`` assigns ids to input messages in place)."""
    return {"messages": [HumanMessage(content="What is 1 + 2?")]}


class NoopMiddleware(AgentMiddleware[Any, Any]):
    """The middleware of the issue: four sync hooks that do nothing but return None / ``handler(request)``."""

    def __init__(self, index: int) -> None:
        self.name = f"noop_{index}"  # names must be unique within an agent

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        return handler(request)

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        return handler(request)


class AsyncNoopMiddleware(NoopMiddleware):
    """The same no-op, also defining the async twins (so ``ainvoke`` needs no sync/async bridging)."""

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> Any:
        return await handler(request)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncToolHandler) -> ToolResult:
        return await handler(request)


class FlowNoopMiddleware(AgentMiddleware[Any, Any]):
    """The same no-op with its wrap hooks written once, as flows (node hooks with async twins, as
    :class:`AsyncNoopMiddleware`): compared with it, the cost of a flow under ``ainvoke``."""

    def __init__(self, index: int) -> None:
        self.name = f"flow_noop_{index}"

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    def wrap_model_call(self, request: ModelRequest[Any]) -> ModelCallFlow:
        return (yield request)

    def wrap_tool_call(self, request: ToolCallRequest) -> ToolCallFlow:
        return (yield request)


def noops(n: int, cls: type[Any] = NoopMiddleware) -> list[Any]:
    return [cls(i) for i in range(n)]


def check_messages(messages: Sequence[BaseMessage], subject: str) -> None:
    """Raise :class:`BenchSetupError` unless ``messages`` is exactly the one-round-trip conversation."""
    kinds = [type(m).__name__ for m in messages]
    expected = ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    problem = None
    if kinds != expected:
        problem = f"message types {kinds}, expected {expected}"
    else:
        ai, result, final = messages[1], messages[2], messages[3]
        assert isinstance(ai, AIMessage) and isinstance(result, ToolMessage) and isinstance(final, AIMessage)
        if len(ai.tool_calls) != 1 or ai.tool_calls[0]["args"] != TOOL_ARGS:
            problem = f"tool calls {ai.tool_calls!r}"
        elif result.content != "3" or result.tool_call_id != ai.tool_calls[0]["id"]:
            problem = f"tool result {result!r}"
        elif final.content != FINAL_TEXT or final.tool_calls:
            problem = f"final reply {final!r}"
    if problem is not None:
        raise BenchSetupError(f"{subject}: the run did not do one tool round-trip: {problem}")


class CountingSaver(InMemorySaver):
    """``InMemorySaver`` counting ``put`` (checkpoints) and ``put_writes`` (pending-write batches)."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0
        self.put_writes_calls = 0

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self.puts += 1
        return super().put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self.put_writes_calls += 1
        super().put_writes(*args, **kwargs)


def clear_saver(saver: InMemorySaver) -> None:
    """Drop every stored thread (between timed batches, so memory and GC work do not grow over the run), and the
    call ledger's records of those threads, as an app deleting a thread does (docs/exactly_once.md): the records
    live beside the checkpoints until then."""
    from middleware_kit.ledger import ledger_store

    store = ledger_store(saver)
    for thread_id in list(saver.storage):
        store.delete_thread(thread_id)
    saver.storage.clear()
    saver.writes.clear()
    saver.blobs.clear()
