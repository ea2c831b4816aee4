"""The model call is bound once, the same way for the agent and for the testing kit."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from middleware_kit import ModelRequest, create_agent, wrap_model_call
from middleware_kit._engine.model_call import ModelCall
from middleware_kit.testing import ScriptedChatModel, arun_model_chain, make_request, run_model_chain
from tests.conftest import add


@wrap_model_call
def tuned(request: ModelRequest[Any], handler: Any) -> Any:
    return handler(request.override(model_settings={"temperature": 0.25}))


def test_run_model_chain_sends_model_settings_like_an_agent() -> None:
    model = ScriptedChatModel(["from the kit"])
    run_model_chain(tuned, make_request(model=model))
    kit = model.calls[-1].kwargs

    agent_model = ScriptedChatModel(["from the agent"])
    create_agent(agent_model, middleware=[tuned]).invoke({"messages": [HumanMessage("hi")]})
    assert kit == agent_model.calls[-1].kwargs == {"temperature": 0.25}


def test_run_model_chain_binds_tools_and_structured_output_like_an_agent() -> None:
    class Answer(BaseModel):
        text: str

    model = ScriptedChatModel(["x"])
    asyncio.run(arun_model_chain([], make_request(model=model, tools=[add], response_format=Answer)))
    kit = model.calls[-1]
    agent_model = ScriptedChatModel(["x"])
    create_agent(agent_model, [add], response_format=Answer).invoke({"messages": [HumanMessage("hi")]})
    assert kit.tools == agent_model.calls[-1].tools == ("add", "Answer")
    assert kit.kwargs == agent_model.calls[-1].kwargs == {"tool_choice": "any"}


def test_model_call_is_a_frozen_value() -> None:
    call = ModelCall()
    try:
        call.nostream = True  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("ModelCall must be frozen")
