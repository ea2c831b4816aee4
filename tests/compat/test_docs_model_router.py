"""LangChain 1.5's API reference for ``ModelRouterMiddleware`` / ``ModelChoice`` (``langchain.agents.middleware.
model_router``; the prebuilt middleware page has no section for it), its example rewritten: imports changed, the
chat models and the decision model replaced by ``ScriptedChatModel``s and a scripted ``BaseDecisionModel``. Each test
asserts what the reference says: the latest human message is classified once before a run, the complete answer
(label, probabilities, confidence) is kept in state, the selected label's model serves every model call of the run,
and classifier failures propagate and terminate the run."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.decisions import ChoiceAnswer
from langchain_core.messages import AIMessage, HumanMessage

from middleware_kit import create_agent
from middleware_kit.middlewares.model_router import ModelChoice, ModelRouterMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add
from tests.middlewares.test_model_router import ScriptedDecisionModel


def test_the_reference_example_routes_a_run_with_a_choice_answer(run: Runner) -> None:
    fast_model = ScriptedChatModel(["Hello!"])  # e.g. "openai:gpt-5.4-mini"
    strong_model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 2, "b": 2})]), "4"])
    classifier = ScriptedDecisionModel(answers=["strong"], requests=[], confidence=0.8)

    router = ModelRouterMiddleware(
        choices={
            "fast": ModelChoice(model=fast_model, criteria="Simple questions and casual conversation."),
            "strong": ModelChoice(model=strong_model, criteria="Complex reasoning, math, and coding tasks."),
        },
        instructions="Choose the model best suited to answer the user's request.",
        classifier=classifier,
    )
    agent = create_agent(ScriptedChatModel([]), tools=[add], middleware=[router])
    result = run(agent, {"messages": [HumanMessage("What is 2 + 2? Use the tool.")]})

    assert result["messages"][-1].content == "4"
    assert strong_model.call_count == 2 and fast_model.call_count == 0  # every model call of the run
    assert len(classifier.requests) == 1  # classified once, before the run
    state, questions = classifier.requests[0]
    assert state.content == "What is 2 + 2? Use the tool."  # the latest human message
    assert questions["model_route"].criteria == {
        "fast": "Simple questions and casual conversation.",
        "strong": "Complex reasoning, math, and coding tasks.",
    }
    assert result["model_route"] == ChoiceAnswer(
        type="choice", choice="strong", probabilities={"fast": 0.0, "strong": 0.8}, confidence=0.8
    )


def test_classifier_failures_propagate_and_terminate_the_run(run: Runner) -> None:
    router = ModelRouterMiddleware(
        choices={"fast": ModelChoice(model=ScriptedChatModel([]), criteria="Anything.")},
        instructions="Choose a model.",
        classifier=ScriptedDecisionModel(answers=[TimeoutError("decision API timed out")], requests=[]),
    )
    default = ScriptedChatModel(["never"])
    with pytest.raises(TimeoutError, match="decision API timed out"):
        run(create_agent(default, middleware=[router]), {"messages": [HumanMessage("hi")]})
    assert default.call_count == 0  # no silent switch to another model


def test_model_choice_holds_a_model_and_its_criteria() -> None:
    model: Any = ScriptedChatModel([])
    choice = ModelChoice(model=model, criteria={"good_for": ["math", "code"]})
    assert (choice.model, choice.criteria) == (model, {"good_for": ["math", "code"]})
