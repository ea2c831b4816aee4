"""``ModelRouterMiddleware`` and ``ModelChoice``: pick the agent's model for a run from the user's latest message.

Once per run (``before_agent``: not again when a run resumes from an interrupt), a classifier picks one of the named
``choices`` for the latest human message. The answer is stored in state under ``model_route`` (a plain mapping:
``{"choice", "probabilities", "confidence"}``, so every checkpointer can persist it) and every model call of the run
uses the chosen model. ``model_route`` of ``None`` (no human message, a low-confidence answer, or a classifier failure
with ``on_error="default"``) means the agent's own model.

The classifier may be:

- a LangChain decision model (``langchain_core.decisions.BaseDecisionModel``), asked a ``Choice`` question whose
  criteria are the choices' ``criteria`` (as LangChain 1.5);
- a chat model (a "routing model", e.g. a small fast one, or ``ScriptedChatModel`` in tests), asked to answer one
  label; its answer has no probabilities (``probabilities={}``, ``confidence=None``);
- a rule: a function ``rule(message: HumanMessage) -> label | None``.

Beyond LangChain 1.5's version: chat models and rules as classifiers; ``min_confidence`` (below it the agent's model
is used); ``on_error="default"`` to keep serving with the agent's model when the classifier fails (default
``"raise"``, as LangChain: a classifier failure ends the run rather than silently picking another model); the
routing call is tagged ``nostream`` so a chat-model router's tokens never reach the user's stream; and a
``model_routed`` event: ``{"event": "model_routed", "middleware", "route", "confidence", "reason"}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias

from langchain_core.decisions import BaseDecisionModel, Choice, ChoiceAnswer, Content
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from pydantic import JsonValue
from typing_extensions import TypedDict

from middleware_kit.drive import sync_twin
from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.flow import ModelCallFlow, ModelCallFlowHooks
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._model_arg import internal_call_config, resolve_chat_model
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import AgentState, ModelRequest

__all__ = [
    "ModelChoice",
    "ModelRoute",
    "ModelRouterMiddleware",
    "ModelRouterState",
    "RouteRule",
    "RoutingError",
]

_NAME = "ModelRouterMiddleware"
_QUESTION = "route"

RouteRule: TypeAlias = Callable[[HumanMessage], "str | None"]
"""A routing rule: the latest human message in, a choice's label (or None: the agent's model) out."""


@dataclass(frozen=True)
class ModelChoice:
    """A model available to the router and the criterion for selecting it."""

    model: str | BaseChatModel
    """A chat model, or a model name (resolved through ``middleware_kit.models`` when installed)."""
    criteria: JsonValue
    """Description of the tasks suited to the model (text, or any JSON the classifier understands)."""


class ModelRoute(TypedDict):
    """The routing answer stored in state under ``model_route``."""

    choice: str
    """The label of the chosen :class:`ModelChoice`."""
    probabilities: dict[str, float]
    """Probability of each label (empty when the classifier gives none: chat models and rules)."""
    confidence: float | None
    """The classifier's confidence in ``choice`` from 0 to 1 (None when it gives none)."""


class ModelRouterState(AgentState):
    """State of an agent with a :class:`ModelRouterMiddleware`."""

    model_route: NotRequired[ModelRoute | None]
    """This run's route; None means the agent's own model."""


class RoutingError(MiddlewareError, ValueError):
    """The classifier's answer names no choice (``on_error="raise"``)."""


async def _aroute(
    self: ModelRouterMiddleware, state: ModelRouterState, runtime: Runtime[Any]
) -> dict[str, Any] | None:
    """``ModelRouterMiddleware.abefore_agent``: classify the latest human message once per run and store the route in
    state. Written once: ``before_agent`` is this body with the classifier called by ``invoke``
    (:func:`middleware_kit.drive.sync_twin`)."""
    message = self._latest_human(state)
    if message is None:
        return self._decide(runtime, None, "no human message")
    try:
        response = None
        if self._is_model():
            response = await self.classifier.ainvoke(  # type: ignore[union-attr]
                self._classifier_input(message), config=internal_call_config(self.name, "route")
            )
        return self._after_answer(runtime, message, response)
    except GraphBubbleUp:
        raise
    except Exception as exc:
        return self._failed(runtime, exc)


if TYPE_CHECKING:

    def _route(
        self: ModelRouterMiddleware, state: ModelRouterState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """``ModelRouterMiddleware.before_agent``: the sync form of :func:`_aroute`."""

else:
    _route = sync_twin(_aroute, {"_aroute": "_route", "ainvoke": "invoke"})


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

    def __init__(
        self,
        choices: Mapping[str, ModelChoice],
        instructions: Content,
        classifier: BaseDecisionModel | BaseChatModel | str | RouteRule,
        *,
        min_confidence: float | None = None,
        on_error: Literal["raise", "default"] = "raise",
    ) -> None:
        if not isinstance(choices, Mapping) or not choices:
            raise MiddlewareConfigError(
                f"{_NAME}: choices must be a non-empty mapping of label -> ModelChoice; got {choices!r:.80}.",
                middleware=_NAME,
                hook="choices",
            )
        models: dict[str, BaseChatModel] = {}
        for label, choice in choices.items():
            if not isinstance(label, str) or not label:
                raise MiddlewareConfigError(
                    f"{_NAME}: choice labels must be non-empty strings; got {label!r}.",
                    middleware=_NAME,
                    hook="choices",
                )
            if not isinstance(choice, ModelChoice):
                raise MiddlewareConfigError(
                    f"{_NAME}: choices[{label!r}] must be a ModelChoice(model, criteria); got {type(choice).__name__}.",
                    middleware=_NAME,
                    hook="choices",
                )
            models[label] = resolve_chat_model(choice.model, middleware=_NAME, parameter=f"choices[{label!r}].model")
        self.choices: Mapping[str, ModelChoice] = MappingProxyType(dict(choices))
        self._models: Mapping[str, BaseChatModel] = MappingProxyType(models)
        if (
            not isinstance(instructions, (str, dict, list))
            or not instructions
            or (isinstance(instructions, str) and not instructions.strip())
        ):
            raise MiddlewareConfigError(
                f"{_NAME}: instructions must say what to decide, e.g. 'Which model should answer this request?'.",
                middleware=_NAME,
                hook="instructions",
            )
        self.instructions: Content = instructions
        if isinstance(classifier, (BaseDecisionModel, BaseChatModel)):
            self.classifier: BaseDecisionModel | BaseChatModel | RouteRule = classifier
        elif isinstance(classifier, str):
            self.classifier = resolve_chat_model(classifier, middleware=_NAME, parameter="classifier")
        elif callable(classifier):
            self.classifier = classifier
        else:
            raise MiddlewareConfigError(
                f"{_NAME}: classifier must be a BaseDecisionModel, a chat model, a model name or a rule "
                f"function(message) -> label | None; got {type(classifier).__name__}.",
                middleware=_NAME,
                hook="classifier",
            )
        if min_confidence is not None and (
            isinstance(min_confidence, bool)
            or not isinstance(min_confidence, (int, float))
            or not 0 <= min_confidence <= 1
        ):
            raise MiddlewareConfigError(
                f"{_NAME}: min_confidence must be a number from 0 to 1, or None; got {min_confidence!r}.",
                middleware=_NAME,
                hook="min_confidence",
            )
        self.min_confidence = min_confidence
        if on_error not in ("raise", "default"):
            raise MiddlewareConfigError(
                f"{_NAME}: on_error must be 'raise' or 'default'; got {on_error!r}.", middleware=_NAME, hook="on_error"
            )
        self.on_error: Literal["raise", "default"] = on_error

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

    def _route_of_answer(self, answer: Any) -> ModelRoute:
        if isinstance(answer, ChoiceAnswer):
            if answer.choice not in self.choices:
                raise RoutingError(
                    f"{self.name}: the classifier chose {answer.choice!r}, which is not a choice "
                    f"({sorted(self.choices)}).",
                    middleware=self.name,
                    hook="before_agent",
                )
            return ModelRoute(
                choice=answer.choice, probabilities=dict(answer.probabilities), confidence=answer.confidence
            )
        label = self._label_of_text(answer.text if isinstance(answer, BaseMessage) else answer)
        return ModelRoute(choice=label, probabilities={}, confidence=None)

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

    def _decide(self, runtime: Any, route: ModelRoute | None, reason: str) -> dict[str, Any]:
        if (
            route is not None
            and self.min_confidence is not None
            and route["confidence"] is not None
            and route["confidence"] < self.min_confidence
        ):
            reason = f"confidence {route['confidence']:.2f} is below min_confidence {self.min_confidence}"
            route = None
        emit(
            runtime,
            {
                "event": "model_routed",
                "middleware": self.name,
                "route": None if route is None else route["choice"],
                "confidence": None if route is None else route["confidence"],
                "reason": reason,
            },
        )
        return {"model_route": route}

    def _failed(self, runtime: Any, error: Exception) -> dict[str, Any]:
        if self.on_error == "raise":
            raise error
        return self._decide(runtime, None, f"classifier failed: {type(error).__name__}: {error}"[:300])

    @staticmethod
    def _latest_human(state: Mapping[str, Any]) -> HumanMessage | None:
        return next((m for m in reversed(state.get("messages", ())) if isinstance(m, HumanMessage)), None)

    # -- hooks ------------------------------------------------------------------------------------------------------
    def _classifier_input(self, message: HumanMessage) -> Any:
        """What the model classifier is invoked with (both hooks)."""
        if isinstance(self.classifier, BaseDecisionModel):
            return {"state": message, "questions": {_QUESTION: self._choice_question()}}
        return self._chat_prompt(message)

    def _after_answer(self, runtime: Any, message: HumanMessage, response: Any) -> dict[str, Any]:
        """The state update for the classifier's ``response`` (both hooks; a rule's answer is computed here)."""
        if isinstance(self.classifier, BaseDecisionModel):
            answer: Any = response.choices[_QUESTION]
        elif isinstance(self.classifier, BaseChatModel):
            answer = response
        else:
            answer = self.classifier(message)
            if answer is None:
                return self._decide(runtime, None, "the rule chose no route")
        return self._decide(runtime, self._route_of_answer(answer), "classified")

    def _is_model(self) -> bool:
        return isinstance(self.classifier, (BaseDecisionModel, BaseChatModel))

    abefore_agent = _aroute
    before_agent = _route

    def _routed(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        state = request.state if isinstance(request.state, Mapping) else {}
        route = state.get("model_route")
        if not route:
            return request
        model = self._models.get(route["choice"])
        return request if model is None else request.override(model=model)

    def model_call_flow(self, request: ModelRequest[Any]) -> ModelCallFlow:
        """Call the routed model (the agent's model when there is no route); a flow hook (invoke and ainvoke)."""
        return (yield self._routed(request))
