"""Private state keys (``PrivateStateAttr``) never reach a stream or an output, while hooks, tools and checkpoints
keep reading and writing them (issue 18, item 4)."""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, AgentState, PrivateStateAttr, create_agent
from middleware_kit.testing import ScriptedChatModel, tool_call

MARK = "zq-private"
MODES = ["updates", "values", "debug", "tasks", "checkpoints", "custom", "messages"]


class SecretState(AgentState[Any]):
    secret: NotRequired[Annotated[str, PrivateStateAttr]]
    tally: NotRequired[Annotated[list[str], operator.add, PrivateStateAttr]]


class Secretive(AgentMiddleware[SecretState, Any]):
    """Writes private keys in two phases and checks every later hook sees them."""

    state_schema = SecretState

    def __init__(self, seen: list[str]) -> None:
        super().__init__()
        self._seen = seen  # test instrumentation: what the hooks and the tool read

    def before_agent(self, state: SecretState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {"secret": f"{MARK}-{len(state.get('tally', []))}"}

    def before_model(self, state: SecretState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._seen.append(f"before_model:{state['secret']}")
        return {"tally": [f"{MARK}-t"]}

    def after_model(self, state: SecretState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._seen.append(f"after_model:{state['secret']}:{len(state['tally'])}")
        return None


def peek_tool(seen: list[str]) -> BaseTool:
    @tool
    def peek(runtime: ToolRuntime) -> str:
        """Read the private state."""
        seen.append(f"tool:{runtime.state['secret']}")
        return "peeked"

    return peek


def make_agent(seen: list[str], checkpointer: BaseCheckpointSaver[Any]) -> Any:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("peek", {})]), "done"], cycle=True)
    return create_agent(model, [peek_tool(seen)], middleware=[Secretive(seen)], checkpointer=checkpointer)


@asynccontextmanager
async def checkpointer(kind: str, mode: str, path: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    if kind == "memory":
        yield InMemorySaver()
    elif mode == "invoke":
        conn = sqlite3.connect(path / "cp.sqlite", check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        async with AsyncSqliteSaver.from_conn_string(str(path / "cp.sqlite")) as saver:
            yield saver


def assert_no_private(value: Any) -> None:
    text = repr(value)
    assert MARK not in text
    assert "'secret'" not in text and "'tally'" not in text


async def collect(graph: Any, inp: Any, config: Any, mode: Literal["invoke", "ainvoke"], **kwargs: Any) -> list[Any]:
    if mode == "invoke":
        return list(graph.stream(inp, config, **kwargs))
    return [chunk async for chunk in graph.astream(inp, config, **kwargs)]


def expected_seen(run: int) -> list[str]:
    """Two model calls per run (tool, then answer), ``tally`` grows by one per model call across runs."""
    secret = f"{MARK}-{2 * run}"
    return [
        f"before_model:{secret}", f"after_model:{secret}:{2 * run + 1}", f"tool:{secret}",
        f"before_model:{secret}", f"after_model:{secret}:{2 * run + 2}",
    ]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("stream_mode", [*MODES, MODES])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_no_stream_mode_carries_private_keys(
    mode: Literal["invoke", "ainvoke"], stream_mode: Any, kind: str, tmp_path: Path
) -> None:
    seen: list[str] = []
    async with checkpointer(kind, mode, tmp_path) as saver:
        agent = make_agent(seen, saver)
        config = {"configurable": {"thread_id": "t"}}
        for run in range(2):  # the second run starts from a checkpoint holding the private keys
            chunks = await collect(agent, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=stream_mode)
            assert chunks or stream_mode == "custom"  # nothing emits custom events here
            assert_no_private(chunks)
            assert seen == expected_seen(run)
            seen.clear()
        # the checkpoint keeps them (state inspection is not a stream)
        if mode == "invoke":
            state, history = agent.get_state(config), list(agent.get_state_history(config))
        else:
            state, history = await agent.aget_state(config), [s async for s in agent.aget_state_history(config)]
        assert state.values["secret"] == f"{MARK}-2" and len(state.values["tally"]) == 4
        assert any("tally" in snapshot.values for snapshot in history)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_invoke_output_has_no_private_keys(mode: Literal["invoke", "ainvoke"]) -> None:
    seen: list[str] = []
    agent = make_agent(seen, InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    inp = {"messages": [HumanMessage("go")]}
    out = agent.invoke(inp, config) if mode == "invoke" else await agent.ainvoke(inp, config)
    assert_no_private(out)
    assert out["messages"][-1].content == "done"
    assert seen == expected_seen(0)


def parent_of(agent: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("stream_mode", [*MODES, MODES])
async def test_private_keys_stay_hidden_in_a_subgraph(mode: Literal["invoke", "ainvoke"], stream_mode: Any) -> None:
    seen: list[str] = []
    agent = make_agent(seen, InMemorySaver())
    parent = parent_of(agent)
    config = {"configurable": {"thread_id": "p"}}
    chunks = await collect(
        parent, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=stream_mode, subgraphs=True
    )
    namespaces = {chunk[0] for chunk in chunks}
    # the agent's own chunks are there
    assert stream_mode == "custom" or any(ns and ns[0].startswith("agent") for ns in namespaces)
    assert_no_private(chunks)
    assert seen == expected_seen(0)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_private_keys_survive_an_interrupt_and_resume(mode: Literal["invoke", "ainvoke"]) -> None:
    """A node interrupted before it runs is re-run on resume from the checkpoint: it still reads the private keys."""
    seen: list[str] = []
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("peek", {})]), "done"], cycle=True)
    agent = create_agent(model, [peek_tool(seen)], middleware=[Secretive(seen)], checkpointer=InMemorySaver(),
                         interrupt_before=["tools"])
    config = {"configurable": {"thread_id": "i"}}
    first = await collect(agent, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=MODES)
    second = await collect(agent, None, config, mode, stream_mode=MODES)
    assert_no_private([first, second])
    assert seen == expected_seen(0)
