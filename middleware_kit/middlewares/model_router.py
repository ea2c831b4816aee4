"""``ModelRouterMiddleware`` and ``ModelChoice``: pick the agent's model for a run from the user's latest message.

Once per run (``before_agent``: not again when a run resumes from an interrupt), a classifier picks one of the named
``choices`` for the latest human message. The complete answer, a ``langchain_core.decisions.ChoiceAnswer`` (label,
probabilities, confidence), is stored in state under ``model_route`` (as LangChain 1.5; the state schema declares
its type, so LangGraph's strict checkpoint deserialization allows it) and every model call of the run uses the
chosen model. ``model_route`` of ``None`` (a low-confidence answer, or a classifier failure with
``on_error="default"``) means the agent's own model. A run without a human message is an error
(``RoutingError``, a ``ValueError``), as in LangChain, unless ``on_error="default"``.

The classifier may be:

- a LangChain decision model (``langchain_core.decisions.BaseDecisionModel``), asked a ``Choice`` question (id
  ``"model_route"``) whose criteria are the choices' ``criteria`` (as LangChain 1.5);
- a chat model (a "routing model", e.g. a small fast one, or ``ScriptedChatModel`` in tests), asked to answer one
  label; its answer is recorded with probability 1 (``probabilities={label: 1.0}``, ``confidence=1.0``);
- a rule: a function ``rule(message: HumanMessage) -> label | None`` (recorded the same way).

Beyond LangChain 1.5's version: chat models and rules as classifiers; ``min_confidence`` (below it the agent's model
is used); ``on_error="default"`` to keep serving with the agent's model when the classifier fails (default
``"raise"``, as LangChain: a classifier failure ends the run rather than silently picking another model); the
routing call is tagged ``nostream`` so a chat-model router's tokens never reach the user's stream; and a
``model_routed`` event: ``{"event": "model_routed", "middleware", "route", "confidence", "reason"}``.

Model names in ``choices`` are resolved through :data:`init_chat_model` (a module global looked up at call time, as
LangChain's; tests may patch it).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NotRequired, TypeAlias

from langchain_core.decisions import BaseDecisionModel, Choice, ChoiceAnswer, Content
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from pydantic import JsonValue
from pydantic_core import ValidationError

from middleware_kit._engine.compat import LangChainBetaWarning
from middleware_kit._engine.drive import Steps, run_async, run_sync
from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import Config, is_number, one_of, rule
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._model_arg import internal_call, internal_call_config, resolve_chat_model
from middleware_kit.middlewares._stream import emit
from middleware_kit.models import resolve_model
from middleware_kit.trace_policy import TracePolicy, omit_payload
from middleware_kit.types import AgentState, ModelRequest

__all__ = [
    "ModelChoice",
    "ModelRouterMiddleware",
    "ModelRouterState",
    "RouterConfig",
    "RouteRule",
    "RoutingError",
    "init_chat_model",
]

_NAME = "ModelRouterMiddleware"
_QUESTION = "model_route"
_BETA_MESSAGE = f"The middleware `{_NAME}` is in beta. It is actively being worked on, so the API may change."
_beta_warned = False
"""Whether the beta warning was given (once per process, as LangChain's ``@beta``)."""

init_chat_model: Callable[..., BaseChatModel] = resolve_model
"""Resolves a model name in ``choices`` (``"openai:gpt-4o-mini"``) to a chat model; looked up when a router is
constructed, so tests may patch it (``mock.patch("...model_router.init_chat_model")``)."""

RouteRule: TypeAlias = Callable[[HumanMessage], "str | None"]
"""A routing rule: the latest human message in, a choice's label (or None: the agent's model) out."""


@dataclass(frozen=True)
class ModelChoice:
    """A model available to the router and the criterion for selecting it."""

    model: str | BaseChatModel
    """A chat model, or a model name (resolved through :data:`init_chat_model`)."""
    criteria: JsonValue
    """Description of the tasks suited to the model (text, or any JSON the classifier understands)."""


class ModelRouterState(AgentState):
    """State of an agent with a :class:`ModelRouterMiddleware`."""

    model_route: NotRequired[ChoiceAnswer | None]
    """This run's routing answer; None means the agent's own model."""


@dataclass(frozen=True)
class RouterConfig:
    """The validated routing configuration (``ModelRouterMiddleware.config``, as LangChain's)."""

    choices: Mapping[str, ModelChoice]
    instructions: Content


class RoutingError(MiddlewareError, ValueError):
    """No route can be chosen: the state has no human message, or the classifier's answer names no choice
    (``on_error="raise"``)."""


def _invalid(field: str, value: object, message: str) -> ValidationError:
    """A pydantic ``ValidationError`` (LangChain validates the router's configuration with pydantic) carrying our
    message, which names the middleware and the fix."""
    error = ValueError(f"{_NAME}: {message}")
    return ValidationError.from_exception_data(
        _NAME, [{"type": "value_error", "loc": (field,), "input": value, "ctx": {"error": error}}]
    )


def _warn_beta() -> None:
    global _beta_warned
    if not _beta_warned:
        _beta_warned = True
        warnings.warn(_BETA_MESSAGE, LangChainBetaWarning, stacklevel=4)


def _resolve(value: object, parameter: str) -> BaseChatModel:
    """``value`` as a chat model: an instance as it is, a name through :data:`init_chat_model`."""
    return resolve_chat_model(value, middleware=_NAME, parameter=parameter, resolver=init_chat_model)


def _checked_choices(choices: object) -> dict[str, ModelChoice]:
    if not isinstance(choices, Mapping) or not choices:
        raise _invalid(
            "choices", choices, f"choices must be a non-empty mapping of label -> ModelChoice; got {choices!r:.80}."
        )
    for label, choice in choices.items():
        if not isinstance(label, str) or not label:
            raise _invalid("choices", choices, f"choice labels must be non-empty strings; got {label!r}.")
        if not isinstance(choice, ModelChoice):
            raise _invalid(
                "choices",
                choices,
                f"choices[{label!r}] must be a ModelChoice(model, criteria); got {type(choice).__name__}.",
            )
    return dict(choices)


def _checked_instructions(instructions: object) -> Content:
    if (
        not isinstance(instructions, (str, dict, list))
        or not instructions
        or (isinstance(instructions, str) and not instructions.strip())
    ):
        raise _invalid(
            "instructions",
            instructions,
            "instructions must say what to decide, e.g. 'Which model should answer this request?'.",
        )
    return instructions


class ModelRouterMiddleware(ModelCallFlowHooks, FrozenConfig, AgentMiddleware[ModelRouterState, Any]):
    """Route each run to one of several models, chosen by a classifier from the latest human message.

    Args:
        choices: Named model choices: ``{"fast": ModelChoice(fast_model, "Short factual questions."), ...}``.
        instructions: What the classifier should decide (e.g. "Which model should answer this request?").
        classifier: A ``BaseDecisionModel``, a chat model (or a model name), or a rule
            ``rule(message) -> label | None``.
        min_confidence: Use the agent's own model when the classifier's confidence is below this (0..1).
        on_error: ``"raise"`` (default): a classifier failure propagates and ends the run. ``"default"``: the run
            uses the agent's own model and a ``model_routed`` event gives the reason.
    """

    state_schema = ModelRouterState
    trace_policy = TracePolicy(process_inputs=omit_payload)
    """The hook runs record no payload: the conversation stays out of the router's trace runs (as LangChain)."""
    __config__ = Config(
        template="{owner}: {param} must be {expected}; got {value!r}.",
        min_confidence=rule(lambda v: v is None or (is_number(v) and 0 <= v <= 1), "a number from 0 to 1, or None"),
        on_error=one_of("raise", "default"),
    )

    def __init__(
        self,
        choices: Mapping[str, ModelChoice],
        instructions: Content,
        classifier: BaseDecisionModel | BaseChatModel | str | RouteRule,
        *,
        min_confidence: float | None = None,
        on_error: Literal["raise", "default"] = "raise",
    ) -> None:
        _warn_beta()
        checked = _checked_choices(choices)
        self.instructions: Content = _checked_instructions(instructions)
        self.choices: Mapping[str, ModelChoice] = MappingProxyType(checked)
        self.models: Mapping[str, BaseChatModel] = MappingProxyType(
            {label: _resolve(c.model, f"choices[{label!r}].model") for label, c in checked.items()}
        )
        """The chat model of each choice (model names resolved once, here)."""
        self.classifier: BaseDecisionModel | BaseChatModel | RouteRule = self._checked_classifier(classifier)
        self.min_confidence = min_confidence
        self.on_error: Literal["raise", "default"] = on_error

    @property
    def config(self) -> RouterConfig:
        """The validated choices and instructions (LangChain's ``config``)."""
        return RouterConfig(self.choices, self.instructions)

    @staticmethod
    def _checked_classifier(classifier: object) -> BaseDecisionModel | BaseChatModel | RouteRule:
        if isinstance(classifier, (BaseDecisionModel, BaseChatModel)):
            return classifier
        if isinstance(classifier, str):
            return _resolve(classifier, "classifier")
        if callable(classifier):
            return classifier
        raise MiddlewareConfigError(
            f"{_NAME}: classifier must be a BaseDecisionModel, a chat model, a model name or a rule "
            f"function(message) -> label | None; got {type(classifier).__name__}.",
            middleware=_NAME,
            hook="classifier",
        )

    # -- classification, shared by the sync and async hooks -----------------------------------------------------------
    def _choice_question(self) -> Choice:
        return Choice(instructions=self.instructions, criteria={k: v.criteria for k, v in self.choices.items()})

    def _chat_prompt(self, message: HumanMessage) -> list[BaseMessage]:
        options = "\n".join(f"- {label}: {choice.criteria}" for label, choice in self.choices.items())
        instructions = self.instructions if isinstance(self.instructions, str) else repr(self.instructions)
        return [
            SystemMessage(
                f"{instructions}\n\nOptions:\n{options}\n\nAnswer with exactly one option label and nothing else."
            ),
            HumanMessage(message.content),
        ]

    def _route_of_answer(self, answer: Any) -> ChoiceAnswer:
        if isinstance(answer, ChoiceAnswer):
            if answer.choice not in self.choices:
                raise RoutingError(
                    f"{self.name}: the classifier chose {answer.choice!r}, which is not a choice "
                    f"({sorted(self.choices)}).",
                    middleware=self.name,
                    hook="before_agent",
                )
            return answer
        label = self._label_of_text(answer.text if isinstance(answer, BaseMessage) else answer)
        return ChoiceAnswer(type="choice", choice=label, probabilities={label: 1.0}, confidence=1.0)

    def _label_of_text(self, text: Any) -> str:
        if not isinstance(text, str):
            raise RoutingError(
                f"{self.name}: the classifier returned {type(text).__name__}; a rule must return a label or None.",
                middleware=self.name,
                hook="before_agent",
            )
        cleaned = text.strip().strip("`'\".").strip()
        if cleaned in self.choices:
            return cleaned
        found = [label for label in self.choices if re.search(rf"(?<!\w){re.escape(label)}(?!\w)", text, re.I)]
        if len(found) == 1:
            return found[0]
        raise RoutingError(
            f"{self.name}: the classifier answered {text!r:.80}, which names no single choice of "
            f"{sorted(self.choices)}. Make the instructions ask for one label, or pass on_error='default' to use the "
            f"agent's model in that case.",
            middleware=self.name,
            hook="before_agent",
        )

    def _decide(self, runtime: Any, route: ChoiceAnswer | None, reason: str) -> dict[str, Any]:
        if route is not None and self.min_confidence is not None and route.confidence < self.min_confidence:
            reason = f"confidence {route.confidence:.2f} is below min_confidence {self.min_confidence}"
            route = None
        emit(
            runtime,
            {
                "event": "model_routed",
                "middleware": self.name,
                "route": None if route is None else route.choice,
                "confidence": None if route is None else route.confidence,
                "reason": reason,
            },
        )
        return {"model_route": route}

    def _failed(self, runtime: Any, error: Exception) -> dict[str, Any]:
        if self.on_error == "raise":
            raise error
        return self._decide(runtime, None, f"classifier failed: {type(error).__name__}: {error}"[:300])

    def _latest_human(self, state: Mapping[str, Any]) -> HumanMessage:
        message = next((m for m in reversed(state.get("messages", ())) if isinstance(m, HumanMessage)), None)
        if message is None:
            raise RoutingError(
                f"{self.name} requires a HumanMessage in the agent state to route on. Fix: start the run with a "
                f"user message, or pass on_error='default' to use the agent's own model in that case.",
                middleware=self.name,
                hook="before_agent",
            )
        return message

    # -- hooks ------------------------------------------------------------------------------------------------------
    def _classifier_input(self, message: HumanMessage) -> Any:
        """What the model classifier is invoked with."""
        if isinstance(self.classifier, BaseDecisionModel):
            return {"state": message, "questions": {_QUESTION: self._choice_question()}}
        return self._chat_prompt(message)

    def _answer(self, message: HumanMessage, response: Any) -> Any:
        """The classifier's answer: from the model's ``response``, or the rule's (computed here)."""
        if isinstance(self.classifier, BaseDecisionModel):
            return response.choices[_QUESTION]
        if isinstance(self.classifier, BaseChatModel):
            return response
        return self.classifier(message)

    def _route_flow(self, state: Mapping[str, Any], runtime: Any) -> Steps[dict[str, Any]]:
        """The routing decision, written once: a classifier model's call is the one ``Step`` it yields
        (``invoke`` under :meth:`before_agent`, ``ainvoke`` under :meth:`abefore_agent`)."""
        try:
            message = self._latest_human(state)
            response = None
            if isinstance(self.classifier, (BaseDecisionModel, BaseChatModel)):
                payload, config = self._classifier_input(message), internal_call_config(self.name, "route")
                response = yield internal_call(self.classifier, payload, config, site=f"{self.name}.before_agent")
            answer = self._answer(message, response)
            if answer is None:
                return self._decide(runtime, None, "the rule chose no route")
            return self._decide(runtime, self._route_of_answer(answer), "classified")
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return self._failed(runtime, exc)

    def before_agent(self, state: ModelRouterState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Classify the latest human message once per run and store the answer in state (``model_route``)."""
        return run_sync(self._route_flow(state, runtime))

    async def abefore_agent(self, state: ModelRouterState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """:meth:`before_agent` under ``ainvoke`` (the same flow, the classifier awaited)."""
        return await run_async(self._route_flow(state, runtime))

    def _routed(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        state = request.state if isinstance(request.state, Mapping) else {}
        route = state.get("model_route")
        label = route.choice if isinstance(route, ChoiceAnswer) else route.get("choice") if route else None
        model = self.models.get(label) if isinstance(label, str) else None
        return request if model is None else request.override(model=model)

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Call the routed model (the agent's model when there is no route); a flow hook (invoke and ainvoke)."""
        return (yield self._routed(request))
