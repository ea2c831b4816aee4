"""Model calls a middleware makes for itself stay out of ``stream_events(version="v3")``'s messages."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit._engine.internal_calls import (
    INTERNAL_CALL_METADATA_KEY,
    InternalCallTransformer,
    internal_call_metadata,
    is_internal_call,
)
from middleware_kit.middlewares._model_arg import internal_call_config

pytestmark = pytest.mark.filterwarnings("ignore:The v3 streaming protocol")


class Checker(AgentMiddleware):
    """Asks a side model before each model call; declares the transformer that hides that call."""

    transformers = (InternalCallTransformer,)

    def __init__(self, side: GenericFakeChatModel) -> None:
        self.side = side

    def before_model(self, state: Any, runtime: Any) -> None:
        self.side.invoke([HumanMessage("check")], config={"metadata": internal_call_metadata()})


def _agent() -> Any:
    main = GenericFakeChatModel(messages=iter([AIMessage("final answer")]))
    side = GenericFakeChatModel(messages=iter([AIMessage("internal check")]))
    return create_agent(main, middleware=[Checker(side)])


def test_the_marker_cannot_be_guessed() -> None:
    token = internal_call_metadata()[INTERNAL_CALL_METADATA_KEY]
    assert isinstance(token, str) and len(token) >= 16
    assert is_internal_call(internal_call_metadata())
    assert not is_internal_call({INTERNAL_CALL_METADATA_KEY: True}) and not is_internal_call(None)


def test_bundled_internal_calls_carry_lc_source_and_the_marker() -> None:
    config = internal_call_config("LLMToolSelectorMiddleware", "select_tools")
    metadata = config["metadata"]
    assert metadata["lc_source"] == "tool_selection" and is_internal_call(metadata)
    assert internal_call_config("LLMToolEmulator", "emulate")["metadata"]["lc_source"] == "tool_emulation"
    assert internal_call_config("Router", "route")["metadata"]["lc_source"] == "route"
    assert internal_call_config("Router", "route", source="routing")["metadata"]["lc_source"] == "routing"
    assert config["run_name"] == "LLMToolSelectorMiddleware.select_tools"


def test_internal_calls_are_not_in_run_messages_sync() -> None:
    run = _agent().stream_events({"messages": [HumanMessage("hi")]}, version="v3")
    texts = ["".join(message.text) for message in run.messages]
    assert texts == ["final answer"]


async def test_internal_calls_are_not_in_run_messages_async() -> None:
    run = await _agent().astream_events({"messages": [HumanMessage("hi")]}, version="v3")
    texts = []
    async for message in run.messages:
        texts.append("".join([chunk async for chunk in message.text]))
    assert texts == ["final answer"]


def test_events_of_another_namespace_are_left_alone() -> None:
    transformer = InternalCallTransformer(())
    payload = {"event": "message-start", "role": "ai", "id": "m"}
    event: Any = {
        "type": "event",
        "method": "messages",
        "params": {"namespace": ["sub"], "timestamp": 0, "data": (payload, internal_call_metadata())},
    }
    assert transformer.process(event) is True and payload["role"] == "ai"
    event["params"]["namespace"] = []
    assert transformer.process(event) is False and payload["role"] == "tool"
