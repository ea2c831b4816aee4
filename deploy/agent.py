"""The agent served by LangGraph Server (``langgraph.json`` points here: ``./deploy/agent.py:graph``).

A stable module of its own, so the deployment does not follow every change of ``middleware_kit/demo.py``: a scripted
model (no API key, runs offline), one tool under human review, a thread-level model call limit, and a context schema.
The graph is compiled **without** a checkpointer or store: LangGraph Server brings its own (in memory for
``langgraph dev``, PostgreSQL in production) and refuses graphs that carry one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from middleware_kit import create_agent
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.limits import ModelCallLimitMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call

__all__ = ["DeployContext", "build_graph", "graph"]


@dataclass
class DeployContext:
    """``context=`` of a run: who is asking (the server passes it as the run's ``context``)."""

    user: str = "anonymous"


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"sunny in {city}"


def _reply(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"Weather report: {last.content}.")
    return AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Paris"}, id=f"call_{len(messages)}")])


def build_graph() -> Any:
    """The served agent, without checkpointer: ``get_weather`` needs approval, 20 model calls per thread at most."""
    return create_agent(
        ScriptedChatModel(default=_reply),
        [get_weather],
        middleware=[
            ModelCallLimitMiddleware(thread_limit=20),
            HumanInTheLoopMiddleware({"get_weather": {"allowed_decisions": ["approve", "reject"]}}),
        ],
        context_schema=DeployContext,
        name="middleware_kit_agent",
    )


graph = build_graph()
