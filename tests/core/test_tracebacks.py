"""A user's hook error shows the user's frame and at most one engine frame (engine frames hide themselves)."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

import middleware_kit
from middleware_kit import ModelRequest, ToolCallRequest, before_model, create_agent, wrap_model_call, wrap_tool_call
from middleware_kit.flow import ModelCallFlow
from middleware_kit.testing import ScriptedChatModel, tool_call
from middleware_kit.testing.tracebacks import format_user_traceback, visible_frames
from tests.conftest import Runner, add

PACKAGE = str(pathlib.Path(middleware_kit.__file__).parent)


class Boom(Exception):
    pass


@before_model
def failing_node_hook(state: Any, runtime: Any) -> None:
    raise Boom("in before_model")


@wrap_model_call
def failing_wrapper(request: ModelRequest[Any], handler: Any) -> Any:
    raise Boom("in wrap_model_call")


@wrap_model_call
def failing_flow(request: ModelRequest[Any]) -> ModelCallFlow:
    response = yield request
    raise Boom(f"in a flow, after {response.result[0].content}")


@wrap_tool_call
def failing_tool_wrapper(request: ToolCallRequest, handler: Any) -> Any:
    raise Boom("in wrap_tool_call")


@pytest.mark.parametrize("middleware", [failing_node_hook, failing_wrapper, failing_flow, failing_tool_wrapper],
                         ids=lambda m: m.name)
def test_user_frame_and_at_most_one_engine_frame(run: Runner, middleware: Any) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "done"])
    agent = create_agent(model, [add], middleware=[middleware])
    with pytest.raises(Boom) as info:
        run(agent, {"messages": [HumanMessage("hi")]})
    frames = visible_frames(info.value)
    engine = [f for f in frames if f.filename.startswith(PACKAGE)]
    user = [f for f in frames if f.filename == __file__ and f.name == middleware.name]
    assert len(user) == 1, format_user_traceback(info.value)
    assert len(engine) <= 1, format_user_traceback(info.value)
    text = format_user_traceback(info.value)
    assert "Boom" in text and middleware.name in text


def test_the_full_traceback_still_holds_every_frame() -> None:
    agent = create_agent(ScriptedChatModel(["x"]), middleware=[failing_node_hook])
    with pytest.raises(Boom) as info:
        asyncio.run(agent.ainvoke({"messages": [HumanMessage("hi")]}))
    import traceback

    full = "".join(traceback.format_exception(info.value))
    assert "middleware_kit" in full and len(full) > len(format_user_traceback(info.value))
