"""LangChain 1.5's API reference for ``ModelRefusalMiddleware`` (``langchain.agents.middleware.model_refusal``; the
prebuilt middleware page has no section for it), rewritten as tests: imports changed, models replaced by
``ScriptedChatModel``s answering with the providers' refusal shapes. Each test asserts what the reference says:
"Raise ModelRefusalError for responses containing a standard refusal block"; "Model calls without this middleware
continue to return messages, including refusal content"; "List it after ModelFallbackMiddleware so the fallback can
catch the error"; "This middleware does not infer refusals from text or retry blocked requests"."""

from __future__ import annotations

import pytest
from langchain_core.exceptions import ModelRefusalError
from langchain_core.messages import AIMessage, HumanMessage

from middleware_kit import create_agent
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.model_refusal import ModelRefusalMiddleware
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner

REFUSAL = AIMessage(content=[{"type": "refusal", "refusal": "I can't help with that."}])
Q = {"messages": [HumanMessage("Please do the thing.")]}


def test_a_refusal_block_raises_model_refusal_error(run: Runner) -> None:
    agent = create_agent(ScriptedChatModel([REFUSAL]), middleware=[ModelRefusalMiddleware()])
    with pytest.raises(ModelRefusalError, match="I can't help with that"):
        run(agent, Q)


def test_without_the_middleware_the_refusal_is_returned_as_a_message(run: Runner) -> None:
    result = run(create_agent(ScriptedChatModel([REFUSAL])), Q)
    assert result["messages"][-1].content_blocks[0]["type"] == "refusal"


def test_listed_after_the_fallback_the_fallback_catches_the_error(run: Runner) -> None:
    backup = ScriptedChatModel(["Done by the fallback model."])
    agent = create_agent(
        ScriptedChatModel([REFUSAL]),
        middleware=[ModelFallbackMiddleware(backup), ModelRefusalMiddleware()],
    )
    assert run(agent, Q)["messages"][-1].content == "Done by the fallback model."


def test_it_does_not_infer_refusals_from_text_nor_retry(run: Runner) -> None:
    model = ScriptedChatModel(["I can't help with that.", "unused"])
    result = run(create_agent(model, middleware=[ModelRefusalMiddleware()]), Q)
    assert result["messages"][-1].content == "I can't help with that." and model.call_count == 1
