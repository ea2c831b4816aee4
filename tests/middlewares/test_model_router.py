"""ModelRouterMiddleware / ModelChoice: one classification per run picks the model of every call in that run."""

from __future__ import annotations

import asyncio
import sqlite3
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core._api import LangChainBetaWarning
from langchain_core.decisions import BaseDecisionModel, ChoiceAnswer, ClassifierResponse, Question, State
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde import _msgpack
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import Field, ValidationError

from middleware_kit import MiddlewareConfigError, create_agent, omit_payload
from middleware_kit.middlewares import model_router
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.model_router import (
    ModelChoice,
    ModelRouterMiddleware,
    RoutingError,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add


class ScriptedDecisionModel(BaseDecisionModel):
    """A decision model that replays answers: a label for a Choice question, a probability for a Noul one (or an
    exception to raise). Records every request in ``requests``."""

    model: str = "scripted-decisions"
    answers: list[Any] = Field(default_factory=list)
    confidence: float = 0.9
    requests: list[tuple[Any, dict[str, Any]]] = Field(default_factory=list)

    @property
    def _provider(self) -> str:
        return "scripted"

    def _classify(self, state: State, questions: dict[str, Question]) -> ClassifierResponse:
        self.requests.append((state, dict(questions)))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        body: dict[str, Any] = {}
        for qid, question in questions.items():
            if question.type == "choice":
                probabilities = {label: (self.confidence if label == answer else 0.0) for label in question.criteria}
                body[qid] = {
                    "type": "choice",
                    "choice": answer,
                    "probabilities": probabilities,
                    "confidence": self.confidence,
                }
            else:
                body[qid] = {"type": "noul", "noul": answer}
        return ClassifierResponse(model=self.model, answers=body)


_NAME = "ModelRouterMiddleware"


def models() -> tuple[ScriptedChatModel, ScriptedChatModel, ScriptedChatModel]:
    return (
        ScriptedChatModel(["agent model"], cycle=True),
        ScriptedChatModel(["fast"], cycle=True),
        ScriptedChatModel(["strong"], cycle=True),
    )


def router(fast: Any, strong: Any, classifier: Any, **kwargs: Any) -> ModelRouterMiddleware:
    return ModelRouterMiddleware(
        choices={
            "fast": ModelChoice(fast, "Short factual questions and small talk."),
            "strong": ModelChoice(strong, "Multi-step reasoning, math and code."),
        },
        instructions="Which model should answer this request?",
        classifier=classifier,
        **kwargs,
    )


def ask(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def custom_events(agent: Any, inp: Any, mode: str) -> list[dict[str, Any]]:
    if mode == "invoke":
        return [e for e in agent.stream(inp, stream_mode="custom") if isinstance(e, dict)]

    async def go() -> list[dict[str, Any]]:
        return [e async for e in agent.astream(inp, stream_mode="custom") if isinstance(e, dict)]

    return asyncio.run(go())


# -- decision models (LangChain 1.5) ------------------------------------------------------------------------------
def test_a_decision_model_routes_the_run_and_the_answer_is_kept_in_state(run: Runner) -> None:
    base, fast, strong = models()
    classifier = ScriptedDecisionModel(answers=["strong"], requests=[])
    result = run(
        create_agent(base, middleware=[router(fast, strong, classifier)]), ask("Prove that sqrt(2) is irrational")
    )
    assert result["messages"][-1].content == "strong"
    assert (base.call_count, fast.call_count, strong.call_count) == (0, 0, 1)
    assert result["model_route"] == ChoiceAnswer(
        type="choice", choice="strong", probabilities={"fast": 0.0, "strong": 0.9}, confidence=0.9
    )
    state, questions = classifier.requests[0]
    assert isinstance(state, HumanMessage) and state.content == "Prove that sqrt(2) is irrational"
    question = questions["model_route"]
    assert question.type == "choice" and question.instructions == "Which model should answer this request?"
    assert question.criteria == {
        "fast": "Short factual questions and small talk.",
        "strong": "Multi-step reasoning, math and code.",
    }


def test_every_model_call_of_the_run_uses_the_route_and_the_classifier_runs_once(run: Runner) -> None:
    base = ScriptedChatModel(["agent model"])
    fast = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    classifier = ScriptedDecisionModel(answers=["fast"], requests=[])
    result = run(create_agent(base, [add], middleware=[router(fast, ScriptedChatModel([]), classifier)]), ask("1+2?"))
    assert result["messages"][-1].content == "3"
    assert fast.call_count == 2 and base.call_count == 0 and len(classifier.requests) == 1
    assert fast.calls[0].tools == ("add",)  # the agent's tools are bound to the routed model


def test_each_run_of_a_thread_classifies_its_latest_human_message(run: Runner) -> None:
    base, fast, strong = models()
    classifier = ScriptedDecisionModel(answers=["fast", "strong"], requests=[])
    agent = create_agent(base, middleware=[router(fast, strong, classifier)], checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    assert run(agent, ask("hi"), config=cfg)["messages"][-1].content == "fast"
    second = run(agent, ask("now integrate x^2 sin x"), config=cfg)
    assert second["messages"][-1].content == "strong" and second["model_route"].choice == "strong"
    assert [s.content for s, _ in classifier.requests] == ["hi", "now integrate x^2 sin x"]


def test_resuming_after_an_interrupt_keeps_the_route_without_classifying_again(run: Runner) -> None:
    base = ScriptedChatModel(["agent model"])
    strong = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 2, "b": 2})]), "4"])
    classifier = ScriptedDecisionModel(answers=["strong"], requests=[])
    agent = create_agent(
        base,
        [add],
        middleware=[router(ScriptedChatModel([]), strong, classifier), HumanInTheLoopMiddleware({"add": True})],
        checkpointer=InMemorySaver(),
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": "r"}}
    paused = run(agent, ask("2+2, carefully"), config=cfg)
    assert "__interrupt__" in paused
    done = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=cfg)
    assert done["messages"][-1].content == "4" and strong.call_count == 2 and base.call_count == 0
    assert len(classifier.requests) == 1


def test_the_route_persists_in_a_strict_checkpointer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The state schema declares ``ChoiceAnswer``, so LangGraph allow-lists it for strict deserialization."""
    monkeypatch.setattr(_msgpack, "STRICT_MSGPACK_ENABLED", True)
    base, fast, strong = models()
    with sqlite3.connect(tmp_path / "cp.sqlite", check_same_thread=False) as conn:
        saver = SqliteSaver(conn)
        agent = create_agent(
            base,
            middleware=[router(fast, strong, ScriptedDecisionModel(answers=["fast"], requests=[]))],
            checkpointer=saver,
        )
        cfg: RunnableConfig = {"configurable": {"thread_id": "s"}}
        agent.invoke(ask("hello"), cfg)
        again = create_agent(
            base,
            middleware=[router(fast, strong, ScriptedDecisionModel(answers=[], requests=[]))],
            checkpointer=SqliteSaver(conn),
        )
        route = again.get_state(cfg).values["model_route"]
        assert isinstance(route, ChoiceAnswer) and route.choice == "fast"


def test_low_confidence_uses_the_agents_model(mode: str) -> None:
    base, fast, strong = models()
    classifier = ScriptedDecisionModel(answers=["strong"], requests=[], confidence=0.4)
    agent = create_agent(base, middleware=[router(fast, strong, classifier, min_confidence=0.6)])
    events = custom_events(agent, ask("hmm"), mode)
    assert base.call_count == 1 and strong.call_count == 0
    assert events == [
        {
            "event": "model_routed",
            "middleware": "ModelRouterMiddleware",
            "route": None,
            "confidence": None,
            "reason": "confidence 0.40 is below min_confidence 0.6",
        }
    ]


def test_a_classifier_failure_ends_the_run_by_default(run: Runner) -> None:
    base, fast, strong = models()
    agent = create_agent(
        base,
        middleware=[
            router(fast, strong, ScriptedDecisionModel(answers=[ConnectionError("decisions API down")], requests=[]))
        ],
    )
    with pytest.raises(ConnectionError, match="decisions API down"):
        run(agent, ask("x"))
    assert base.call_count == fast.call_count == strong.call_count == 0


def test_on_error_default_keeps_serving_with_the_agents_model(mode: str) -> None:
    base, fast, strong = models()
    agent = create_agent(
        base,
        middleware=[
            router(
                fast, strong, ScriptedDecisionModel(answers=[ConnectionError("down")], requests=[]), on_error="default"
            )
        ],
    )
    events = custom_events(agent, ask("x"), mode)
    assert base.call_count == 1
    assert events[0]["route"] is None and events[0]["reason"] == "classifier failed: ConnectionError: down"


def test_a_label_that_is_not_a_choice_is_a_routing_error(run: Runner) -> None:
    base, fast, strong = models()
    agent = create_agent(
        base, middleware=[router(fast, strong, ScriptedDecisionModel(answers=["medium"], requests=[]))]
    )
    with pytest.raises(RoutingError, match="chose 'medium', which is not a choice"):
        run(agent, ask("x"))


def test_no_human_message_is_a_routing_error(run: Runner) -> None:
    base, fast, strong = models()
    classifier = ScriptedDecisionModel(answers=[], requests=[])
    agent = create_agent(base, middleware=[router(fast, strong, classifier)])
    with pytest.raises(RoutingError, match="requires a HumanMessage in the agent state to route on") as err:
        run(agent, {"messages": [AIMessage("hi")]})
    assert isinstance(err.value, ValueError) and (err.value.middleware, err.value.hook) == (_NAME, "before_agent")
    assert base.call_count == 0 and classifier.requests == []


def test_no_human_message_with_on_error_default_means_the_agents_model(run: Runner) -> None:
    base, fast, strong = models()
    classifier = ScriptedDecisionModel(answers=[], requests=[])
    agent = create_agent(base, middleware=[router(fast, strong, classifier, on_error="default")])
    result = run(agent, {"messages": [AIMessage("hi")]})
    assert result["model_route"] is None and base.call_count == 1 and classifier.requests == []


# -- beyond LangChain: chat models and rules as classifiers -------------------------------------------------------
@pytest.mark.parametrize(
    ("answer", "expected"),
    [("strong", "strong"), ("  `fast`. ", "fast"), ("I would pick STRONG for this.", "strong")],
)
def test_a_chat_model_routes_by_answering_a_label(run: Runner, answer: str, expected: str) -> None:
    base, fast, strong = models()
    routing_model = ScriptedChatModel([answer])
    result = run(create_agent(base, middleware=[router(fast, strong, routing_model)]), ask("Write a parser"))
    assert result["messages"][-1].content == expected
    assert result["model_route"] == ChoiceAnswer(
        type="choice", choice=expected, probabilities={expected: 1.0}, confidence=1.0
    )
    system, human = routing_model.calls[0].messages
    assert "- fast: Short factual questions and small talk." in system.content and human.content == "Write a parser"


@pytest.mark.parametrize("answer", ["fast or strong", "medium", ""])
def test_an_unreadable_chat_answer_is_a_routing_error(run: Runner, answer: str) -> None:
    base, fast, strong = models()
    with pytest.raises(RoutingError, match="names no single choice"):
        run(create_agent(base, middleware=[router(fast, strong, ScriptedChatModel([answer]))]), ask("x"))


def test_a_routing_models_tokens_never_stream(mode: str) -> None:
    base, fast, strong = models()
    agent = create_agent(base, middleware=[router(fast, strong, ScriptedChatModel(["strong"], cycle=True))])
    if mode == "invoke":
        chunks: list[Any] = list(agent.stream(ask("x"), stream_mode="messages"))
    else:

        async def go() -> list[Any]:
            return [c async for c in agent.astream(ask("x"), stream_mode="messages")]

        chunks = asyncio.run(go())
    assert [c.text for c, _ in chunks] == ["strong"]  # the answer of the strong model, not the router's "strong"
    assert strong.call_count == 1


def test_a_rule_routes_and_none_means_the_agents_model(run: Runner) -> None:
    base, fast, strong = models()

    def by_length(message: HumanMessage) -> str | None:
        text = str(message.content)
        return None if text == "default please" else ("strong" if len(text) > 20 else "fast")

    agent = create_agent(base, middleware=[router(fast, strong, by_length)])
    assert run(agent, ask("hi"))["messages"][-1].content == "fast"
    assert run(agent, ask("explain the proof of Fermat's last theorem"))["messages"][-1].content == "strong"
    assert run(agent, ask("default please"))["messages"][-1].content == "agent model"


def test_one_instance_routes_concurrent_runs_independently() -> None:
    base, fast, strong = models()

    def rule(message: HumanMessage) -> str:
        return str(message.content).split()[0]

    def answer(messages: list[BaseMessage]) -> str:
        return f"answered {messages[-1].content}"

    fast, strong = ScriptedChatModel(default=answer), ScriptedChatModel(default=answer)
    agent = create_agent(base, middleware=[router(fast, strong, rule)])
    questions = [f"{'fast' if i % 3 else 'strong'} question {i}" for i in range(30)]

    def one(question: str) -> tuple[str, str]:
        result = agent.invoke(ask(question))
        return result["model_route"].choice, result["messages"][-1].content

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, questions))
    assert results == [(q.split()[0], f"answered {q}") for q in questions]
    assert fast.call_count == 20 and strong.call_count == 10 and base.call_count == 0


# -- configuration ------------------------------------------------------------------------------------------------
def _choices() -> dict[str, ModelChoice]:
    return {"fast": ModelChoice(ScriptedChatModel([]), "simple")}


@pytest.mark.parametrize(
    ("kwargs", "parameter", "text"),
    [
        ({"classifier": 42}, "classifier", "classifier must be a BaseDecisionModel"),
        ({"min_confidence": 1.5}, "min_confidence", "min_confidence must be a number from 0 to 1"),
        ({"on_error": "ignore"}, "on_error", "on_error must be 'raise' or 'default'"),
    ],
)
def test_constructor_errors_name_the_class_and_parameter(kwargs: dict[str, Any], parameter: str, text: str) -> None:
    arguments: dict[str, Any] = {"choices": _choices(), "instructions": "Which?", "classifier": lambda m: None}
    arguments.update(kwargs)
    with pytest.raises(MiddlewareConfigError, match=f"^ModelRouterMiddleware: {text}") as err:
        ModelRouterMiddleware(**arguments)
    assert (err.value.middleware, err.value.hook) == ("ModelRouterMiddleware", parameter)


@pytest.mark.parametrize(
    ("kwargs", "field", "text"),
    [
        ({"choices": {}}, "choices", "choices must be a non-empty mapping"),
        ({"choices": {"fast": ScriptedChatModel([])}}, "choices", r"choices\['fast'\] must be a ModelChoice"),
        ({"choices": {"": ModelChoice(ScriptedChatModel([]), "x")}}, "choices", "choice labels must be non-empty"),
        ({"instructions": "  "}, "instructions", "instructions must say what to decide"),
    ],
)
def test_invalid_choices_and_instructions_are_validation_errors(kwargs: dict[str, Any], field: str, text: str) -> None:
    """As LangChain (which validates them with pydantic): a ``pydantic.ValidationError``, with our message."""
    arguments: dict[str, Any] = {"choices": _choices(), "instructions": "Which?", "classifier": lambda m: None}
    arguments.update(kwargs)
    with pytest.raises(ValidationError, match=f"ModelRouterMiddleware: {text}") as err:
        ModelRouterMiddleware(**arguments)
    assert err.value.errors()[0]["loc"] == (field,) and err.value.title == "ModelRouterMiddleware"


def test_a_model_name_in_a_choice_is_resolved_once_through_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise ImportError("no provider package")

    monkeypatch.setattr(model_router, "init_chat_model", missing)
    with pytest.raises(MiddlewareConfigError, match="Pass a model instance instead") as err:
        ModelRouterMiddleware({"fast": ModelChoice("openai:gpt-4o-mini", "simple")}, "Which?", lambda m: "fast")
    assert err.value.hook == "choices['fast'].model"
    resolved = ScriptedChatModel(["resolved model"])
    names: list[str] = []

    def resolve(name: str) -> Any:
        names.append(name)
        return resolved

    monkeypatch.setattr(model_router, "init_chat_model", resolve)
    mw = ModelRouterMiddleware({"fast": ModelChoice("openai:gpt-4o-mini", "simple")}, "Which?", lambda m: "fast")
    assert mw.models == {"fast": resolved} and names == ["openai:gpt-4o-mini"]
    assert (
        create_agent(ScriptedChatModel([]), middleware=[mw]).invoke(ask("x"))["messages"][-1].content
        == "resolved model"
    )


def test_the_beta_warning_is_given_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_router, "_beta_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            ModelRouterMiddleware(_choices(), "Which?", lambda m: "fast")
    assert [str(w.message) for w in caught if w.category is LangChainBetaWarning] == [
        "The middleware `ModelRouterMiddleware` is in beta. It is actively being worked on, so the API may change."
    ]


def test_config_and_trace_policy_match_langchain() -> None:
    mw = ModelRouterMiddleware(_choices(), "Which?", lambda m: "fast")
    assert mw.config.choices == mw.choices and mw.config.instructions == "Which?"
    assert mw.trace_policy is not None and mw.trace_policy.process_inputs is omit_payload


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    base, fast, strong = models()
    choices = {"fast": ModelChoice(fast, "simple"), "strong": ModelChoice(strong, "hard")}
    mw = ModelRouterMiddleware(choices, "Which?", lambda m: "fast")
    choices.pop("strong")
    assert set(mw.choices) == {"fast", "strong"}
    with pytest.raises(TypeError):  # the mapping on the instance is read-only too (was a plain dict)
        mw.choices["fast"] = ModelChoice(strong, "anything")  # type: ignore[index]
    create_agent(base, middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'classifier'"):
        mw.classifier = lambda m: "strong"
    changed = mw.replace(classifier=lambda m: "strong")
    assert run(create_agent(base, middleware=[changed]), ask("x"))["messages"][-1].content == "strong"
    assert run(create_agent(base, middleware=[mw]), ask("x"))["messages"][-1].content == "fast"


# -- bad classifier answers never poison a run ------------------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(st.text(max_size=40), st.sampled_from(["fast", "STRONG", "fast, strong", "`strong`", "medium"])),
    st.sampled_from(["invoke", "ainvoke"]),
)
def test_any_routing_answer_routes_or_falls_back_with_on_error_default(answer: str, mode: str) -> None:
    base, fast, strong = models()
    agent = create_agent(base, middleware=[router(fast, strong, ScriptedChatModel([answer]), on_error="default")])
    result = agent.invoke(ask("x")) if mode == "invoke" else asyncio.run(agent.ainvoke(ask("x")))
    route = result["model_route"]
    served = {"agent model": None, "fast": "fast", "strong": "strong"}[result["messages"][-1].content]
    assert (route.choice if route else None) == served
    assert base.call_count + fast.call_count + strong.call_count == 1


def test_a_failed_classification_leaves_the_thread_usable(run: Runner) -> None:
    base, fast, strong = models()
    classifier = ScriptedDecisionModel(answers=[ConnectionError("down"), "fast"], requests=[])
    agent = create_agent(base, middleware=[router(fast, strong, classifier)], checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": "p"}}
    with pytest.raises(ConnectionError):
        run(agent, ask("first"), config=cfg)
    result = run(agent, ask("second"), config=cfg)
    assert result["messages"][-1].content == "fast" and result["model_route"].choice == "fast"
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "HumanMessage", "AIMessage"]


def test_before_agent_can_be_called_directly_in_both_modes() -> None:
    """Outside a graph (``runtime=None`` or a bare ``Runtime()``), as users unit-test hooks; one flow serves both."""
    classifier = ScriptedDecisionModel(answers=["strong", "fast"], requests=[])
    mw = router(ScriptedChatModel([]), ScriptedChatModel([]), classifier)
    state: Any = {"messages": [HumanMessage("hello")]}
    first = mw.before_agent(state, None)
    assert first is not None and first["model_route"].choice == "strong"
    update = asyncio.run(mw.abefore_agent(state, Runtime()))
    assert update is not None and update["model_route"].choice == "fast"
    assert [s.content for s, _ in classifier.requests] == ["hello", "hello"]
