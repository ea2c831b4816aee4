"""The plain agent (run control on by default) keeps what create_agent installs around a run: the context check and
the input guards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import AgentMiddleware, ContextError, RunControl, create_agent
from middleware_kit.run_control import ControlledAgent
from middleware_kit.testing import ScriptedChatModel
from tests.run_control.helpers import run_control_layers


@dataclass
class Ctx:
    user_id: str


class Scrub(AgentMiddleware):
    def guard_messages(self, messages: Sequence[AnyMessage], runtime: Any) -> Sequence[AnyMessage] | None:
        if not any("SECRET" in str(m.content) for m in messages):
            return None
        return [m.model_copy(update={"content": str(m.content).replace("SECRET", "[x]")}) for m in messages]


def build() -> tuple[Any, InMemorySaver]:
    saver = InMemorySaver()
    agent = create_agent(ScriptedChatModel(["ok"], cycle=True), middleware=[Scrub()], context_schema=Ctx,
                         checkpointer=saver)
    return agent, saver


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_context_is_still_checked_and_input_still_guarded(mode: str) -> None:
    agent, saver = build()
    assert isinstance(agent, ControlledAgent)
    cfg: Any = {"configurable": {"thread_id": f"t-{mode}"}}
    call: Any = agent.invoke if mode == "invoke" else agent.ainvoke

    async def run(value: Any, context: Any) -> Any:
        result = call(value, cfg, context=context)
        return await result if mode == "ainvoke" else result

    with pytest.raises(ContextError, match="user_id"):
        await run({"messages": [HumanMessage("hi")]}, {"userid": "a"})
    result = await run({"messages": [HumanMessage("my SECRET")]}, {"user_id": "a"})
    assert result["messages"][-1].content == "ok"
    stored = repr(dict(saver.storage)) + repr(dict(saver.writes)) + repr(dict(saver.blobs))
    assert "my [x]" in stored and "SECRET" not in stored
    # the lease was released: the next turn on the thread runs
    assert (await run({"messages": [HumanMessage("again")]}, {"user_id": "a"}))["messages"][-1].content == "ok"


def test_create_agent_run_control_keyword_builds_a_controlled_agent() -> None:
    agent = create_agent(ScriptedChatModel(["ok"]), checkpointer=InMemorySaver(), run_control=RunControl(deadline=30))
    assert isinstance(agent, ControlledAgent)
    assert run_control_layers(agent) == ["RunControlMiddleware", "RunControlGuard"]
    cfg: Any = {"configurable": {"thread_id": "kw"}}
    assert agent.invoke({"messages": [HumanMessage("hi")]}, cfg)["messages"][-1].content == "ok"
