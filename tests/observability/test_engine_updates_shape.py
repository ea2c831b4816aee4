"""``stream_mode="updates"``: one dict per node per step, also when several hooks of a fused node write the same key
(issue 18, item 4), with the same final state as the separate writes."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, NotRequired

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

from middleware_kit import AgentMiddleware, AgentState, create_agent
from middleware_kit.testing import ScriptedChatModel, tool_call

Mode = Literal["invoke", "ainvoke"]


def shift(left: int | None, right: int) -> int:
    """Not associative: two writes cannot be combined into one."""
    return (left or 0) * 10 + right


class Counted(AgentState[Any]):
    count: NotRequired[Annotated[list[int], operator.add]]
    odd: NotRequired[Annotated[int, shift]]


class Noter(AgentMiddleware[Counted, Any]):
    """Writes a note before the model and counts; its twin below removes that note in the same node."""

    state_schema = Counted

    def before_model(self, state: Counted, runtime: Runtime[Any]) -> dict[str, Any] | None:
        n = len(state.get("count", []))
        return {"messages": [HumanMessage(f"note {n}", id=f"note-{n}")], "count": [1]}

    def after_model(self, state: Counted, runtime: Runtime[Any]) -> dict[str, Any] | None:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:  # an answer now would leave the tool calls unanswered
            return {"count": [3]}
        return {"messages": [AIMessage("after", id=f"after-{len(state['count'])}")], "count": [3]}


class Remover(AgentMiddleware[Counted, Any]):
    state_schema = Counted

    def before_model(self, state: Counted, runtime: Runtime[Any]) -> dict[str, Any] | None:
        n = len(state.get("count", [])) - 1
        return {"messages": [RemoveMessage(id=f"note-{n}")], "count": [2]}


async def updates(agent: Any, mode: Mode, config: Any) -> list[Any]:
    inp = {"messages": [HumanMessage("go", id="h")]}
    if mode == "invoke":
        return list(agent.stream(inp, config, stream_mode="updates"))
    return [chunk async for chunk in agent.astream(inp, config, stream_mode="updates")]


def assert_one_dict_per_node(chunks: list[Any]) -> None:
    assert chunks
    for chunk in chunks:
        for node, value in chunk.items():
            assert value is None or type(value) is dict, (node, value)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_updates_are_one_dict_per_node(mode: Mode) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("echo", {"text": "x"})], id="m1"),
                               AIMessage("done", id="m2")])

    def echo(text: str) -> str:
        """Echo."""
        return text

    agent = create_agent(model, [echo], middleware=[Noter(), Remover()], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "u"}}
    chunks = await updates(agent, mode, config)
    assert_one_dict_per_node(chunks)
    model_chunks = [chunk["model"] for chunk in chunks if "model" in chunk]
    assert len(model_chunks) == 2
    first = model_chunks[0]
    # the note is added and removed in the same node; then the model's message and after_model's
    assert [type(m).__name__ for m in first["messages"]] == ["HumanMessage", "RemoveMessage", "AIMessage"]
    assert [type(m).__name__ for m in model_chunks[1]["messages"]] == [
        "HumanMessage", "RemoveMessage", "AIMessage", "AIMessage"
    ]
    assert first["count"] == model_chunks[1]["count"] == [1, 2, 3]
    state = agent.get_state(config) if mode == "invoke" else await agent.aget_state(config)
    # the same final state as separate writes: the notes are gone, every count kept in order
    messages = state.values["messages"]
    assert [m.id for m in messages] == ["h", "m1", messages[2].id, "m2", "after-5"]
    assert messages[2].content == "x"
    assert state.values["count"] == [1, 2, 3, 1, 2, 3]


class Odd(AgentMiddleware[Counted, Any]):
    """Two writes through a reducer that is not associative: they cannot be combined into one."""

    state_schema = Counted

    def before_model(self, state: Counted, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {"odd": 1}

    def after_model(self, state: Counted, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {"odd": 2}


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_a_reducer_that_cannot_combine_keeps_the_writes_in_order(mode: Mode) -> None:
    """The documented exception: a custom reducer written twice in one node (LangGraph lists the writes)."""
    agent = create_agent(ScriptedChatModel(["hi"]), middleware=[Odd()], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "o"}}
    chunks = await updates(agent, mode, config)
    model = next(chunk["model"] for chunk in chunks if "model" in chunk)
    assert isinstance(model, list)
    assert [update["odd"] for update in model if "odd" in update] == [1, 2]
    state = agent.get_state(config) if mode == "invoke" else await agent.aget_state(config)
    assert state.values["odd"] == 12
