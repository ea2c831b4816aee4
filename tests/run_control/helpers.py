"""Builders shared by the run-control tests: agents on every checkpointer, a ledger of tool side effects, and a
way to run ``invoke`` (in a worker thread) or ``ainvoke`` from one async test body."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import Field

from middleware_kit import create_agent
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.run_control import RunControl
from middleware_kit.testing import ScriptedChatModel, tool_call

APPROVE = {"decisions": [{"type": "approve"}]}


class Ledger:
    """Side effects of tools, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: list[str] = []

    def add(self, item: str) -> None:
        with self._lock:
            self.items.append(item)


def pay_tool(ledger: Ledger, delay: float = 0.0) -> BaseTool:
    @tool
    def pay(ref: str) -> str:
        """Pay (records the side effect)."""
        if delay:
            time.sleep(delay)
        ledger.add(ref)
        return f"paid {ref}"

    return pay


def reply(messages: list[BaseMessage]) -> AIMessage:
    """After a tool result: a final answer; after a user turn: ``pay`` with a ref naming the turn."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"done: {last.content}")
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    ref = f"{humans[-1].content}"
    return AIMessage("", tool_calls=[tool_call("pay", {"ref": ref}, id=f"call_{len(humans)}")])


class SlowModel(ScriptedChatModel):
    """A scripted model whose every call takes ``delay`` seconds (``asyncio.sleep`` under ainvoke: cancellable);
    ``in_call`` is set when a call starts (a run holding its thread is inside the model call from then on)."""

    delay: float = 0.0
    in_call: threading.Event = Field(default_factory=threading.Event)

    async def reached(self) -> None:
        """Wait (up to 10 s) until a call has started."""
        assert await asyncio.to_thread(self.in_call.wait, 10), "the model call never started"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.in_call.set()
        time.sleep(self.delay)
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        self.in_call.set()
        await asyncio.sleep(self.delay)
        return super()._generate(messages, stop, None, **kwargs)


def build(
    saver: Any,
    control: RunControl | None = None,
    *,
    tools: Sequence[BaseTool] = (),
    model: ScriptedChatModel | None = None,
    middleware: Sequence[AgentMiddleware[Any, Any]] = (),
    review: bool = True,
) -> Any:
    """The plain agent: ``create_agent(model, tools, middleware=[...], checkpointer=saver)``, run control on by
    default; ``control`` tunes it (``run_control=control``)."""
    stack = [*middleware, *([HumanInTheLoopMiddleware({"pay": True})] if review else [])]
    if control is None:
        return create_agent(model or ScriptedChatModel(default=reply), list(tools), middleware=stack,
                            checkpointer=saver)
    return create_agent(model or ScriptedChatModel(default=reply), list(tools), middleware=stack,
                        checkpointer=saver, run_control=control)


def cfg(thread: str) -> Any:
    """A run config for ``thread`` (typed ``Any``: LangGraph's overloads want a ``RunnableConfig``)."""
    return {"configurable": {"thread_id": thread}}


async def call(agent: Any, mode: str, inp: Any, config: Any, **kwargs: Any) -> Any:
    """``invoke`` in a worker thread (so several run truly at once) or ``ainvoke`` on this loop."""
    if mode == "invoke":
        return await asyncio.to_thread(agent.invoke, inp, config, **kwargs)
    return await agent.ainvoke(inp, config, **kwargs)


@contextlib.asynccontextmanager
async def saver_for(kind: str, mode: str, tmp: Path) -> AsyncIterator[Any]:
    """``memory``: InMemorySaver; ``sqlite``: SqliteSaver under invoke, AsyncSqliteSaver under ainvoke."""
    if kind == "memory":
        yield InMemorySaver()
    elif mode == "invoke":
        conn = sqlite3.connect(tmp / "agent.sqlite", check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        async with AsyncSqliteSaver.from_conn_string(str(tmp / "agent.sqlite")) as saver:
            yield saver


def assert_paired(messages: Sequence[BaseMessage]) -> None:
    """Every tool call has exactly one answer, right after its message; every answer has its call."""
    open_ids: list[str] = []
    for m in messages:
        if isinstance(m, AIMessage):
            assert not open_ids, f"calls {open_ids} left unanswered before {m!r}"
            open_ids = [c["id"] or "" for c in m.tool_calls]
        elif isinstance(m, ToolMessage):
            assert m.tool_call_id in open_ids, f"answer without a call: {m!r}"
            open_ids.remove(m.tool_call_id)
        else:
            assert not open_ids, f"calls {open_ids} left unanswered before {m!r}"
    assert not open_ids, f"calls {open_ids} left unanswered"


def run_control_layers(agent: Any) -> list[str]:
    """The run-control layers in ``agent``'s plan, in order (shown apart from the user's middleware, as the engine's
    layers; listed with it by plans that do not tell them apart)."""
    plan = agent.middleware_plan
    return [n for n in (*getattr(plan, "engine", ()), *plan.middleware)
            if n in ("RunControlMiddleware", "RunControlGuard")]
