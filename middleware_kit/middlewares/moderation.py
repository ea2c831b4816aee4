"""``ModerationMiddleware``: check user input, model output and tool results with a pluggable checker.

A checker is anything with ``check(text) -> ModerationResult`` (and optionally ``async acheck(text)``). Two ship here:
:class:`KeywordModerationChecker` (offline: keywords or regexes per category) and :class:`OpenAIModerationChecker`
(OpenAI's moderation endpoint; needs the ``openai`` extra, imported only when first used).
:class:`OpenAIModerationMiddleware` has the constructor of LangChain's ``langchain_openai.middleware`` class.

What is checked, when (as in LangChain): before each model call, the newest user message (``check_input``) and the
tool results since the last model message (``check_tool_results``); after each model call, the model's message
(``check_output``). What happens to flagged content (``exit_behavior``):

- ``"end"`` (default): the run ends with an ``AIMessage`` holding the violation message (a flagged model message is
  replaced by it, its tool calls dropped, so nothing flagged reaches the user and no tool runs);
- ``"error"``: :class:`ModerationError` (``OpenAIModerationError`` for the OpenAI middleware) is raised;
- ``"replace"``: the flagged message's content is replaced by the violation message and the run continues.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime

from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit.decorators import hook_config
from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import Config, config_error, one_of, rule
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import AgentState

__all__ = [
    "DEFAULT_VIOLATION_MESSAGE",
    "KeywordModerationChecker",
    "ModerationChecker",
    "ModerationError",
    "ModerationMiddleware",
    "ModerationResult",
    "OpenAIModerationChecker",
    "OpenAIModerationError",
    "OpenAIModerationMiddleware",
]

DEFAULT_VIOLATION_MESSAGE = "I'm sorry, but I can't comply with that request. It was flagged for {categories}."
"""Placeholders: ``{categories}`` (comma-separated), ``{category_scores}`` (JSON), ``{original_content}``."""

ExitBehavior = Literal["error", "end", "replace"]
Stage = Literal["input", "output", "tool"]
_PLACEHOLDERS = {"categories": "c", "category_scores": "{}", "original_content": "o"}


@dataclass(frozen=True, slots=True)
class ModerationResult:
    """What a checker found in one text."""

    flagged: bool
    categories: tuple[str, ...] = ()
    """The flagged categories (empty when not flagged)."""
    category_scores: Mapping[str, float] = field(default_factory=dict)


@runtime_checkable
class ModerationChecker(Protocol):
    """Decides whether a text violates a policy. May also define ``async def acheck(text)``."""

    def check(self, text: str) -> ModerationResult: ...


class ModerationError(MiddlewareError, ValueError):
    """Flagged content with ``exit_behavior="error"``.

    Attributes:
        content: The flagged text.
        stage: ``"input"``, ``"output"`` or ``"tool"``.
        result: The checker's :class:`ModerationResult`.
        violation_message: The formatted violation message.
    """

    def __init__(self, *, content: str, stage: str, result: ModerationResult, violation_message: str,
                 middleware: str, hook: str) -> None:
        self.content = content
        self.stage = stage
        self.result = result
        self.violation_message = violation_message
        super().__init__(
            f"{middleware} flagged the {_STAGE_NAMES.get(stage, stage)} for "
            f"{', '.join(result.categories) or 'a policy'} "
            f"(exit_behavior='error'): {violation_message} Catch {type(self).__name__} to handle it, or use "
            f"exit_behavior='end' or 'replace' to keep the run going without raising.",
            middleware=middleware,
            hook=hook,
        )


class OpenAIModerationError(ModerationError):
    """:class:`ModerationError` raised by :class:`OpenAIModerationMiddleware` (LangChain's name)."""


_STAGE_NAMES = {"input": "user input", "output": "model output", "tool": "tool result"}


# -- checkers -------------------------------------------------------------------------------------------------------
class KeywordModerationChecker:
    """Offline checker: a category is flagged when one of its keywords (whole words, case-insensitive by default) or
    regexes occurs in the text.

    Args:
        categories: ``{"violence": ["kill", re.compile(r"...")], ...}``; a plain list means one category named
            ``"blocked"``.
        case_sensitive: Match keywords with their case (regexes keep their own flags).
    """

    def __init__(
        self,
        categories: Mapping[str, Sequence[str | re.Pattern[str]]] | Sequence[str | re.Pattern[str]],
        *,
        case_sensitive: bool = False,
    ) -> None:
        table = dict(categories) if isinstance(categories, Mapping) else {"blocked": list(categories)}
        if not table or not all(isinstance(k, str) and k for k in table):
            raise MiddlewareConfigError(
                "KeywordModerationChecker: categories must map category names to keywords or regexes, got "
                f"{categories!r}.",
                middleware="KeywordModerationChecker",
                hook="categories",
            )
        flags = 0 if case_sensitive else re.IGNORECASE
        compiled: dict[str, tuple[re.Pattern[str], ...]] = {}
        for name, items in table.items():
            if isinstance(items, (str, re.Pattern)):
                items = [items]
            patterns = []
            for item in items:
                if isinstance(item, re.Pattern):
                    patterns.append(item)
                elif isinstance(item, str) and item:
                    patterns.append(re.compile(rf"(?<!\w){re.escape(item)}(?!\w)", flags))
                else:
                    raise MiddlewareConfigError(
                        f"KeywordModerationChecker: category {name!r} holds {item!r}; use non-empty strings or "
                        f"compiled regexes.",
                        middleware="KeywordModerationChecker",
                        hook="categories",
                    )
            compiled[name] = tuple(patterns)
        self._patterns: Mapping[str, tuple[re.Pattern[str], ...]] = MappingProxyType(compiled)

    def check(self, text: str) -> ModerationResult:
        hits = {name: 1.0 for name, patterns in self._patterns.items() if any(p.search(text) for p in patterns)}
        return ModerationResult(flagged=bool(hits), categories=tuple(hits), category_scores=hits)


class OpenAIModerationChecker:
    """OpenAI's moderation endpoint. Needs the ``openai`` package (``pip install 'middleware_kit[openai]'``),
    imported when the first text is checked; clients are created then too unless you pass your own."""

    def __init__(self, model: str = "omni-moderation-latest", *, client: Any = None, async_client: Any = None) -> None:
        if not isinstance(model, str) or not model:
            raise MiddlewareConfigError(
                f"OpenAIModerationChecker: model must be a moderation model name, got {model!r}.",
                middleware="OpenAIModerationChecker",
                hook="model",
            )
        self.model = model
        self._client = client
        self._async_client = async_client

    @staticmethod
    def _openai() -> Any:
        try:
            import openai  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise MiddlewareConfigError(
                "OpenAIModerationChecker needs the openai package: install the extra with "
                "`pip install 'middleware_kit[openai]'` (or pass client=/async_client= objects with a "
                "`moderations.create` method).",
                middleware="OpenAIModerationChecker",
                hook="client",
            ) from exc
        return openai

    def _sync_client(self) -> Any:
        if self._client is None:
            self._client = self._openai().OpenAI()
        return self._client

    def _aclient(self) -> Any:
        if self._async_client is None:
            self._async_client = self._openai().AsyncOpenAI()
        return self._async_client

    def check(self, text: str) -> ModerationResult:
        return _from_openai(self._sync_client().moderations.create(model=self.model, input=text))

    async def acheck(self, text: str) -> ModerationResult:
        return _from_openai(await self._aclient().moderations.create(model=self.model, input=text))


def _from_openai(response: Any) -> ModerationResult:
    result = response.results[0]
    categories = _as_dict(result.categories)
    scores = _as_dict(getattr(result, "category_scores", None) or {})
    flagged = tuple(name for name, value in categories.items() if value)
    return ModerationResult(
        flagged=bool(getattr(result, "flagged", bool(flagged))),
        categories=flagged,
        category_scores={k: float(v) for k, v in scores.items() if isinstance(v, (int, float))},
    )


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dict(dump(by_alias=True))
    return dict(vars(value))


# -- the middleware -------------------------------------------------------------------------------------------------
def _text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class _Violation:
    index: int
    message: BaseMessage
    text: str
    result: ModerationResult


def _formattable(owner: str, args: Mapping[str, Any]) -> None:
    given = args["violation_message"]
    try:
        (DEFAULT_VIOLATION_MESSAGE if given is None else given).format(**_PLACEHOLDERS)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise config_error(
            owner,
            "violation_message",
            f"{owner}: violation_message {given!r} cannot be formatted ({type(exc).__name__}: {exc}). Its "
            f"placeholders are {{categories}}, {{category_scores}} and {{original_content}}; write {{{{ and }}}} for "
            f"literal braces.",
        ) from None


class ModerationMiddleware(FrozenConfig, AgentMiddleware):
    """Moderate user input, model output and tool results with ``checker`` (see the module docstring).

    Args:
        checker: A :class:`ModerationChecker` (``check(text)``, optionally ``async acheck(text)``).
        check_input: Check the newest user message before each model call. Default True.
        check_output: Check the model's message after each model call. Default True.
        check_tool_results: Check tool results before the model reads them. Default False.
        exit_behavior: ``"end"`` (default), ``"error"`` or ``"replace"``.
        violation_message: Template with ``{categories}``, ``{category_scores}``, ``{original_content}``
            (default :data:`DEFAULT_VIOLATION_MESSAGE`).
    """

    error_class: type[ModerationError] = ModerationError
    __config__ = Config(
        checker=rule(
            lambda v: callable(getattr(v, "check", None)),
            "have a check(text) -> ModerationResult method (e.g. KeywordModerationChecker or OpenAIModerationChecker)",
            "{owner}: {param} must {expected}, got {value!r}.",
        ),
        exit_behavior=one_of("error", "end", "replace"),
        relations=(_formattable,),
    )

    def __init__(
        self,
        checker: ModerationChecker,
        *,
        check_input: bool = True,
        check_output: bool = True,
        check_tool_results: bool = False,
        exit_behavior: ExitBehavior = "end",
        violation_message: str | None = None,
    ) -> None:
        template = DEFAULT_VIOLATION_MESSAGE if violation_message is None else violation_message
        self.checker = checker
        self.check_input = bool(check_input)
        self.check_output = bool(check_output)
        self.check_tool_results = bool(check_tool_results)
        # The output check judges the whole answer: no stream carries it before the check passed.
        self.stream_holdback = "message" if check_output else None
        self.exit_behavior: ExitBehavior = exit_behavior
        self.violation_message = template
        acheck = getattr(checker, "acheck", None)
        self._acheck = acheck if acheck is not None and inspect.iscoroutinefunction(acheck) else None

    # -- hooks: one body, _moderating, run by the sync and the async driver -------------------------------------
    @hook_config(can_jump_to=["end"])
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return run_sync(self._moderating(state, runtime, "before_model"))

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await run_async(self._moderating(state, runtime, "before_model"))

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return run_sync(self._moderating(state, runtime, "after_model"))

    @hook_config(can_jump_to=["end"])
    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await run_async(self._moderating(state, runtime, "after_model"))

    def _moderating(self, state: AgentState[Any], runtime: Any, hook: str) -> Steps[dict[str, Any] | None]:
        """Check each target text (the checker's ``acheck`` under ``ainvoke`` when it has one, else its ``check``,
        inline as under ``invoke``), then act on the first violation."""
        targets = self._targets(state, before=hook == "before_model")
        results: list[ModerationResult] = []
        for _, _, text, _ in targets:
            results.append((yield Step(self.checker.check, self._acheck, text, blocking=False)))
        return self._outcome(targets, results, runtime, hook)

    def _targets(self, state: AgentState[Any], *, before: bool) -> list[tuple[int, BaseMessage, str, Stage]]:
        """``(index, message, text, stage)`` of the messages this hook checks (non-empty texts only)."""
        messages: Sequence[AnyMessage] = state.get("messages", ())
        found: list[tuple[int, BaseMessage, str, Stage]] = []
        if before:
            if self.check_input:
                for i in range(len(messages) - 1, -1, -1):
                    if isinstance(messages[i], HumanMessage):
                        found.append((i, messages[i], _text_of(messages[i]), "input"))
                        break
            if self.check_tool_results:
                for i in range(len(messages) - 1, -1, -1):
                    message = messages[i]
                    if isinstance(message, AIMessage):
                        break
                    if isinstance(message, ToolMessage):
                        found.append((i, message, _text_of(message), "tool"))
                found.sort(key=lambda item: item[0])
        elif self.check_output and messages and isinstance(messages[-1], AIMessage):
            found.append((len(messages) - 1, messages[-1], _text_of(messages[-1]), "output"))
        return [item for item in found if item[2].strip()]

    def _format(self, text: str, result: ModerationResult) -> str:
        return self.violation_message.format(
            categories=", ".join(result.categories) or "policy violation",
            category_scores=json.dumps(dict(result.category_scores), sort_keys=True),
            original_content=text,
        )

    def _outcome(
        self,
        targets: list[tuple[int, BaseMessage, str, Stage]],
        results: list[ModerationResult],
        runtime: Any,
        hook: str,
    ) -> dict[str, Any] | None:
        violations = [
            (stage, _Violation(index, message, text, result))
            for (index, message, text, stage), result in zip(targets, results, strict=True)
            if result.flagged
        ]
        if not violations:
            return None
        stage, first = violations[0]
        notice = self._format(first.text, first.result)
        for stage_i, violation in violations:
            emit(runtime, {
                "event": "moderation_flagged",
                "middleware": self.name,
                "hook": hook,
                "stage": stage_i,
                "categories": list(violation.result.categories),
                "exit_behavior": self.exit_behavior,
            })
        if self.exit_behavior == "error":
            raise self.error_class(
                content=first.text,
                stage=stage,
                result=first.result,
                violation_message=notice,
                middleware=self.name,
                hook=hook,
            )
        if self.exit_behavior == "replace":
            return {"messages": [self._replaced(v.message, self._format(v.text, v.result)) for _, v in violations]}
        # "end": a flagged model message is replaced (its tool calls dropped); otherwise the notice is appended.
        if stage == "output":
            replaced = AIMessage(content=notice, id=first.message.id, name=getattr(first.message, "name", None))
            return {"messages": [replaced], "jump_to": "end"}
        return {"messages": [AIMessage(content=notice)], "jump_to": "end"}

    @staticmethod
    def _replaced(message: BaseMessage, notice: str) -> BaseMessage:
        return message.model_copy(update={"content": notice})


class OpenAIModerationMiddleware(ModerationMiddleware):
    """:class:`ModerationMiddleware` with :class:`OpenAIModerationChecker`, under LangChain's constructor
    (``langchain_openai.middleware.OpenAIModerationMiddleware``). Needs the ``openai`` extra at first use; raises
    :class:`OpenAIModerationError` with ``exit_behavior="error"``."""

    error_class = OpenAIModerationError

    def __init__(
        self,
        *,
        model: str = "omni-moderation-latest",
        check_input: bool = True,
        check_output: bool = True,
        check_tool_results: bool = False,
        exit_behavior: ExitBehavior = "end",
        violation_message: str | None = None,
        client: Any = None,
        async_client: Any = None,
    ) -> None:
        super().__init__(
            OpenAIModerationChecker(model, client=client, async_client=async_client),
            check_input=check_input,
            check_output=check_output,
            check_tool_results=check_tool_results,
            exit_behavior=exit_behavior,
            violation_message=violation_message,
        )
        self.model = model
