"""``SummarizationMiddleware``: summarize old history when the context grows, without breaking the conversation.

It is a ``before_model`` hook, as in LangChain: when the trigger fires it asks the summarizer for a summary of the
older messages and returns the state update ``{"messages": [RemoveMessage(REMOVE_ALL_MESSAGES), summary, *kept]}``
(the kept messages are state's own), so every later ``before_model`` hook and the model see ``[summary, *kept]``.
What it measures is what the model call will send: the messages, plus the agent's system prompt and the bound
tools' schemas, read from :func:`middleware_kit.agent_defaults.current_agent` (outside an agent, e.g. the hook
called directly, only the messages count). The ``before_model`` hooks and the model call share one graph node, so if
the summarizer or the model fails, nothing is written.

Beyond LangChain v1: a default trigger that fires (``DEFAULT_TRIGGER``), exact offline tiktoken counting with a
per-message memo (:mod:`middleware_kit.middlewares._tokens`), cuts that never orphan a tool call and never drop the
newest human message, rolling summaries (the previous summary is folded in as such), ``trigger``/``keep`` callables
of the runtime, ``on_failure="skip"``, progress events on the custom stream, and a summarizer call tagged
``nostream`` so its tokens stay out of ``stream_mode="messages"``.

Module globals looked up at call time, for tests to patch: :data:`count_tokens_approximately` (used by
``token_counter="approximate"``), :data:`init_chat_model` (resolves a model string such as ``"openai:gpt-4o-mini"``;
by default :func:`middleware_kit.models.resolve_model`) and :func:`resolve_model` (turns ``model`` into a chat model,
through ``init_chat_model`` for a string).

LangChain 1.5's deprecated ``max_tokens_before_summary=`` and ``messages_to_keep=`` are accepted with its
``DeprecationWarning`` and mean ``trigger=("tokens", n)`` and ``keep=("messages", n)``.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    get_buffer_string,
)
from langchain_core.messages.utils import count_tokens_approximately as _approximate
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from middleware_kit import models
from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit._engine.internal_calls import ainvoke_internal, internal_call_metadata, invoke_internal
from middleware_kit.agent_defaults import AgentDefaults, current_agent
from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import INT_AT_LEAST_1, Config, one_of, rule
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._stream import emit
from middleware_kit.middlewares._tokens import TiktokenCounter, encoding_for_model
from middleware_kit.types import ModelRequest

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "DEFAULT_TRIGGER",
    "DEFAULT_TRIGGER_WITHOUT_PROFILE",
    "SUMMARIZER_TAG",
    "SUMMARY_PREFIX",
    "SUMMARY_SOURCE",
    "ContextSize",
    "ContextFraction",
    "ContextMessages",
    "ContextTokens",
    "SummarizationMiddleware",
    "TokenCounter",
    "TriggerClause",
    "count_tokens_approximately",
    "init_chat_model",
    "is_summary",
    "resolve_model",
]

count_tokens_approximately: Callable[..., int] = _approximate
"""LangChain's estimate, used by ``token_counter="approximate"``. Looked up at call time, so tests may patch it."""
init_chat_model: Callable[..., BaseChatModel] = models.resolve_model
"""Resolves a model string (``"openai:gpt-4o-mini"``) through its provider package. Looked up at call time, so tests
may patch it (``monkeypatch.setattr(summarization, "init_chat_model", lambda spec: fake)``)."""

_DEFAULT_MESSAGES_TO_KEEP = 20
"""The default ``keep=("messages", 20)``. LangChain's name: libraries built on it (deepagents) import it."""
_DEFAULT_TRIM_TOKEN_LIMIT = 4000
"""The default ``trim_tokens_to_summarize``. LangChain's name: libraries built on it (deepagents) import it."""

ContextFraction: TypeAlias = "tuple[Literal['fraction'], float]"
"""``("fraction", f)``: a share of the model's ``profile["max_input_tokens"]`` (LangChain's name)."""
ContextTokens: TypeAlias = "tuple[Literal['tokens'], int]"
"""``("tokens", n)`` (LangChain's name)."""
ContextMessages: TypeAlias = "tuple[Literal['messages'], int]"
"""``("messages", n)`` (LangChain's name)."""
TokenCounter: TypeAlias = "Callable[[Sequence[BaseMessage]], int]"
"""A ``token_counter``: counts the tokens of a list of messages (LangChain's name)."""
ContextSize: TypeAlias = "tuple[Literal['tokens', 'messages', 'fraction'], int | float]"
"""``("tokens", n)``, ``("messages", n)`` or ``("fraction", f)`` (of the model's ``profile["max_input_tokens"]``)."""
TriggerClause: TypeAlias = "dict[str, int | float]"
"""Several conditions that must all hold (AND): ``{"tokens": 50_000, "messages": 40}``."""
TriggerSpec: TypeAlias = "ContextSize | TriggerClause | Sequence[ContextSize | TriggerClause]"
"""A condition, an AND clause, or a list of them (OR)."""

DEFAULT_TRIGGER: ContextSize = ("fraction", 0.75)
"""The default trigger when the model's profile gives ``max_input_tokens``: 75% of the context window."""
DEFAULT_TRIGGER_WITHOUT_PROFILE: ContextSize = ("tokens", 100_000)
"""The default trigger when the model has no profile: 100k tokens."""
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"
"""Start of the summary message's content (LangChain's text)."""
SUMMARY_SOURCE = "summarization"
"""``additional_kwargs["lc_source"]`` of the summary message and ``metadata["lc_source"]`` of the summarizer's call
(LangChain's marks)."""
SUMMARIZER_TAG = "middleware_kit:summarizer"
"""Tag of the summarizer's model call (with LangGraph's ``nostream``, which keeps it out of the messages stream)."""
_SUMMARY_MARK = "middleware_kit_summary"
"""The mark of summaries written by middleware_kit before 1.5 compatibility (still recognized)."""
_NO_DEFAULTS = AgentDefaults()

DEFAULT_SUMMARY_PROMPT = """<role>
Context Extraction Assistant
</role>

<primary_objective>
Your sole objective in this task is to extract the highest quality/most relevant context from the conversation history below.
</primary_objective>

<objective_information>
You're nearing the total number of input tokens you can accept, so you must extract the highest quality/most relevant pieces of information from your conversation history.
This context will then overwrite the conversation history presented below. Because of this, ensure the context you extract is only the most important information to your overall goal.
</objective_information>

<instructions>
The conversation history below will be replaced with the context you extract in this step. Because of this, you must do your very best to extract and record all of the most important context from the conversation history.
You want to ensure that you don't repeat any actions you've already completed, so the context you extract from the conversation history should be focused on the most important information to your overall goal.
</instructions>

The user will message you with the full message history you'll be extracting context from, to then replace. Carefully read over it all, and think deeply about what information is most important to your overall goal that should be saved:

With all of this in mind, please carefully read over the entire conversation history, and extract the most important and relevant context to replace it so that you can free up space in the conversation history.
Respond ONLY with the extracted context. Do not include any additional information, or text before or after the extracted context.

<messages>
Messages to summarize:
{messages}
</messages>"""  # noqa: E501
"""LangChain's summary prompt (the model reads the same text). ``{messages}`` receives the transcript of the older
messages; on a rolling summary it starts with the previous summary (see ``summary_prompt``)."""

_KINDS = ("tokens", "messages", "fraction")
Summarizer: TypeAlias = (
    "str | BaseChatModel | Callable[[list[AnyMessage]], str | Awaitable[str]] | Runnable[Any, Any]"
)


def resolve_model(model: Any) -> BaseChatModel:
    """Turns the ``model`` argument into a chat model: an instance as it is, a string (``"openai:gpt-4o-mini"``)
    through :data:`init_chat_model`. Looked up at call time; tests may patch it. Anything else that can be invoked
    (a test double such as ``MagicMock(spec=BaseChatModel)``, which libraries built on LangChain pass) is taken as
    it is, as LangChain does; other values are refused."""
    if isinstance(model, BaseChatModel):
        return model
    if isinstance(model, str):
        return init_chat_model(model)
    if callable(getattr(model, "invoke", None)) and callable(getattr(model, "ainvoke", None)):
        return cast(BaseChatModel, model)
    raise MiddlewareConfigError(
        f"SummarizationMiddleware: model must be a chat model instance or a model string such as "
        f"'openai:gpt-4o-mini', got {type(model).__name__} ({model!r:.60}). Pass e.g. "
        f"ChatOpenAI(model='gpt-4o-mini').",
        middleware="SummarizationMiddleware",
        hook="model",
    )


def is_summary(message: BaseMessage) -> bool:
    """True for a summary message written by this middleware (or by LangChain's: ``lc_source="summarization"``)."""
    if not isinstance(message, HumanMessage):
        return False
    kwargs = message.additional_kwargs
    return kwargs.get("lc_source") == SUMMARY_SOURCE or bool(kwargs.get(_SUMMARY_MARK))


# -- trigger / keep validation ---------------------------------------------------------------------------------
def _config_error(param: str, message: str) -> MiddlewareConfigError:
    """A constructor error: LangChain's sentence first, then ours (which class and parameter, how to fix)."""
    return MiddlewareConfigError(f"{message} (SummarizationMiddleware, {param}.)", middleware="SummarizationMiddleware",
                                 hook=param)


def _check_size(kind: Any, value: Any, param: str) -> tuple[str, float]:
    if kind not in _KINDS:
        raise _config_error(param, f"Unsupported context size type {kind} for {param}. Use one of {list(_KINDS)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _config_error(
            param, f"{param} values must be numbers, got {value!r}. Pass ({kind!r}, <number>)"
        )
    if not math.isfinite(value):
        raise _config_error(param, f"{param} values must be finite numbers, got {value!r}")
    if kind == "fraction":
        if not 0 < value <= 1:
            raise _config_error(param, f"Fractional {param} values must be between 0 and 1, got {value}")
        return kind, float(value)
    if value != int(value) or isinstance(value, float):
        raise _config_error(
            param, f"{param} thresholds must be integers, got {value!r}. Pass ({kind!r}, {int(value)}) or use a "
            f"'fraction'"
        )
    if kind == "messages" and param == "keep":
        if value < 0:  # ours: ("messages", 0) keeps nothing verbatim (LangChain requires > 0)
            raise _config_error(param, f"{param} thresholds must be greater than or equal to 0, got {value}")
    elif value <= 0:
        raise _config_error(param, f"{param} thresholds must be greater than 0, got {value}")
    return kind, float(value)


class _ConfigTypeError(MiddlewareConfigError, TypeError):
    """A constructor argument of the wrong type (a ``TypeError``, as in LangChain, and a ``MiddlewareConfigError``)."""


def _check_clause_value(kind: Any, value: Any) -> tuple[str, float]:
    """One condition of a dict clause, checked with LangChain 1.5's sentences (no silent coercion)."""
    if kind not in _KINDS:
        raise _config_error("trigger", f"Unsupported trigger metric: {kind!r}. Use one of {list(_KINDS)}")
    if isinstance(value, bool):
        raise _config_error("trigger", f"{kind} trigger value must be numeric, got {value!r}")
    if kind == "fraction" and not isinstance(value, (int, float)):
        raise _config_error("trigger", f"Fraction trigger values must be numeric, got {value!r}")
    if kind != "fraction" and not isinstance(value, int):
        raise _config_error("trigger", f"{kind} trigger values must be integers, got {value!r}")
    return _check_size(kind, value, "trigger")


def _parse_clause(spec: Mapping[Any, Any]) -> tuple[tuple[str, float], ...]:
    if not spec:
        raise _config_error(
            "trigger", "trigger clause must specify at least one of 'tokens', 'messages', 'fraction', e.g. "
            "{'tokens': 50_000}"
        )
    return tuple(_check_clause_value(k, v) for k, v in spec.items())


def _parse_trigger(spec: Any) -> tuple[tuple[tuple[str, float], ...], ...]:
    """OR of AND clauses; an empty list has none (never summarizes)."""
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
        return ((_check_size(spec[0], spec[1], "trigger"),),)
    if isinstance(spec, Mapping):
        return (_parse_clause(spec),)
    if isinstance(spec, list):
        clauses: list[tuple[tuple[str, float], ...]] = []
        for item in spec:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                clauses.append((_check_size(item[0], item[1], "trigger"),))
            elif isinstance(item, Mapping):
                clauses.append(_parse_clause(item))
            else:
                raise _ConfigTypeError(
                    f"Unsupported trigger item type: {type(item)}. A trigger list holds (kind, value) tuples or dict "
                    f"clauses (SummarizationMiddleware, trigger.)",
                    middleware="SummarizationMiddleware",
                    hook="trigger",
                )
        return tuple(clauses)
    raise _ConfigTypeError(
        f"Unsupported trigger type: {type(spec)}. Pass a (kind, value) tuple, a dict clause (AND), a list of them "
        f"(OR; [] never summarizes), or a function of the runtime returning one (SummarizationMiddleware, trigger.)",
        middleware="SummarizationMiddleware",
        hook="trigger",
    )


def _parse_keep(spec: Any) -> tuple[str, float]:
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
        return _check_size(spec[0], spec[1], "keep")
    if isinstance(spec, Mapping) and len(spec) == 1:  # LangChain 1.5's dict form: keep={"messages": 20}
        ((kind, value),) = spec.items()
        return _check_size(kind, value, "keep")
    raise _config_error(
        "keep",
        f"keep must be a (kind, value) tuple such as ('messages', 20) or ('tokens', 3000), a one-key dict such as "
        f"{{'messages': 20}}, or a function of the runtime returning one; got {spec!r}",
    )


def _deprecated(message: str) -> None:
    """A ``DeprecationWarning`` pointing at the user's call (the first frame outside middleware_kit)."""
    level, frame = 2, sys._getframe(1)  # stacklevel 2: our caller
    while frame is not None and frame.f_globals.get("__name__", "").startswith("middleware_kit."):
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    warnings.warn(message, DeprecationWarning, stacklevel=level)


def _max_input_tokens(model: Any) -> int | None:
    profile = getattr(model, "profile", None)
    value = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _uses_fraction(trigger: Any, keep: Any) -> bool:
    return any(k == "fraction" for clause in trigger for k, _ in clause) or keep[0] == "fraction"


# -- the plan of one summarization -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Plan:
    previous: str | None
    """The previous summary's text, folded in (not summarized as a user turn)."""
    to_summarize: list[AnyMessage]
    kept: list[AnyMessage]
    tokens_before: int


def _safe_cut(messages: Sequence[AnyMessage], cut: int) -> int:
    """Move ``cut`` back so the kept part does not start with a ``ToolMessage`` (a call stays with its answers)."""
    cut = max(0, min(cut, len(messages)))
    while 0 < cut < len(messages) and isinstance(messages[cut], ToolMessage):
        cut -= 1  # back to the AIMessage that made the call
    return cut


def _newest_human(messages: Sequence[AnyMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage) and not is_summary(messages[i]):
            return i
    return None


def _legacy_arguments(trigger: Any, keep: Any, deprecated_kwargs: Mapping[str, Any]) -> tuple[Any, Any]:
    """LangChain's deprecated ``max_tokens_before_summary=`` / ``messages_to_keep=`` as ``trigger`` / ``keep``."""
    unknown = sorted(set(deprecated_kwargs) - {"max_tokens_before_summary", "messages_to_keep"})
    if unknown:
        raise MiddlewareConfigError(
            f"SummarizationMiddleware got unexpected keyword argument(s) {unknown}. Use trigger=..., keep=..., "
            f"token_counter=..., summary_prompt=..., trim_tokens_to_summarize=..., summarizer=... or on_failure=.",
            middleware="SummarizationMiddleware",
            hook=unknown[0],
        )
    if "max_tokens_before_summary" in deprecated_kwargs:
        value = deprecated_kwargs["max_tokens_before_summary"]
        _deprecated("max_tokens_before_summary is deprecated. Use trigger=('tokens', value) instead.")
        if trigger is None and value is not None:
            trigger = ("tokens", value)
    if "messages_to_keep" in deprecated_kwargs:
        value = deprecated_kwargs["messages_to_keep"]
        _deprecated("messages_to_keep is deprecated. Use keep=('messages', value) instead.")
        if keep == ("messages", 20) and value is not None:
            keep = ("messages", value)
    return trigger, keep


def _summarized_model(model: Any) -> BaseChatModel:
    """The ``model`` argument as a chat model; an error names the middleware and the argument."""
    try:
        return resolve_model(model)
    except MiddlewareConfigError as error:
        if error.middleware == "SummarizationMiddleware":
            raise
        raise MiddlewareConfigError(
            f"{error} (SummarizationMiddleware, model={model!r}.)", middleware="SummarizationMiddleware",
            hook="model"
        ) from error


def _check_window(
    trigger: tuple[tuple[tuple[str, float], ...], ...] | None, keep: tuple[str, float] | None, window: int | None
) -> None:
    """Fractions are of the model's window: without one (no profile), only absolute sizes work."""
    if trigger is not None and keep is not None and window is None and _uses_fraction(trigger, keep):
        raise _config_error(
            "trigger" if any(k == "fraction" for clause in trigger for k, _ in clause) else "keep",
            "Model profile information is required to use fractional token limits, and is unavailable for the "
            "specified model. Please use absolute token counts instead, or pass "
            "ChatModel(..., profile={'max_input_tokens': ...}) with the model's maximum input tokens",
        )


def _summary_writer(summarizer: Any, model: BaseChatModel) -> tuple[Any, BaseChatModel]:
    """``(summarizer, summary_model)``: a model string (resolved through :data:`init_chat_model`) or a chat model
    writes the summaries with ``summary_prompt`` in place of ``model`` (no custom summarizer then); a function or
    another Runnable is the summarizer and ``model`` stays the summary model (for its profile)."""
    if isinstance(summarizer, str):
        summarizer = init_chat_model(summarizer)
    if isinstance(summarizer, BaseChatModel):
        return None, summarizer
    if summarizer is not None and not callable(summarizer) and not isinstance(summarizer, Runnable):
        raise _config_error(
            "summarizer",
            f"summarizer must be a chat model, a model string such as 'openai:gpt-4o-mini', a function (messages) -> "
            f"str or a Runnable, got {summarizer!r}",
        )
    return summarizer, model


def _approximately(messages: Sequence[BaseMessage], **kwargs: Any) -> int:
    """``token_counter="approximate"``: :data:`count_tokens_approximately`, looked up at each call."""
    return int(count_tokens_approximately(messages, **kwargs))


def _counter_of(token_counter: Any, tiktoken: TiktokenCounter | None) -> Callable[..., int]:
    if tiktoken is not None:
        return tiktoken
    if token_counter == "approximate":
        return _approximately
    return cast("Callable[..., int]", token_counter)  # a function (the declared rule)


_THEIRS = "{param} must be {expected}, got {value!r} (SummarizationMiddleware, {param}.)"
"""LangChain's sentence first, then ours (which class and parameter), as :func:`_config_error` words it."""


class SummarizationMiddleware(FrozenConfig, AgentMiddleware):
    """Summarize older messages when the context grows past ``trigger``, keeping the recent ones (``keep``).

    Args:
        model: The chat model that writes summaries (see :func:`resolve_model`); its name picks the tiktoken
            encoding and its ``profile["max_input_tokens"]`` is what ``"fraction"`` is a fraction of.
        trigger: When to summarize: ``("tokens", n)``, ``("messages", n)``, ``("fraction", f)`` (inclusive), a dict
            clause (all must hold), a list of those (any), or a function of the runtime returning one. Default
            :data:`DEFAULT_TRIGGER` (75% of the window) when the model has a profile, else
            :data:`DEFAULT_TRIGGER_WITHOUT_PROFILE` (100k tokens). Measured on the whole request: messages, system
            prompt and bound tools.
        keep: How much recent history to keep verbatim: ``("messages", n)`` (default 20), ``("tokens", n)`` or
            ``("fraction", f)`` (or the one-key dict form, ``{"messages": 20}``), or a function of the runtime
            returning one. The cut moves back as needed so a tool
            call stays with its answers and the newest human message is kept.
        token_counter: ``"tiktoken"`` (default: exact, offline, memoized), ``"approximate"`` (LangChain's
            estimate, :data:`count_tokens_approximately`), or any ``(messages) -> int``.
        encoding: The tiktoken encoding (default: from the model's name, see ``encoding_for_model``).
        summary_prompt: The summarizer's prompt; must contain ``{messages}`` (``{previous_summary}`` is optional;
            without it the previous summary is put before the messages).
        trim_tokens_to_summarize: At most this many tokens of the older messages go to the summarizer (the newest
            of them); None: all.
        summarizer: Who writes the summary instead of ``model`` (which still gives the profile and the counts): a
            chat model, or a model string resolved through :data:`init_chat_model` (prompted with ``summary_prompt``;
            it becomes ``summary_model``), or ``(messages) -> str`` (sync, async or a Runnable; ``summary_prompt`` is
            not used, and a previous summary reaches it as a leading ``SystemMessage``).
        on_failure: ``"error"`` (default): a failing summarizer raises and history stays untouched. ``"skip"``: this
            model call goes ahead unsummarized and a ``summarization_failed`` event is written to the custom stream.
        max_tokens_before_summary: Deprecated (LangChain's old name): ``trigger=("tokens", n)``. Warns.
        messages_to_keep: Deprecated (LangChain's old name): ``keep=("messages", n)``. Warns.

    Invalid values raise ``MiddlewareConfigError`` (a ``ValueError``) whose message starts with LangChain's sentence.
    The configuration is frozen (``mw.replace(keep=("messages", 5))`` makes a changed copy); ``trigger`` and ``keep``
    are copies of what was passed.
    """

    __config__ = Config(
        template=_THEIRS,
        owner=lambda _: "SummarizationMiddleware",
        summary_prompt=rule(
            lambda v: isinstance(v, str) and "{messages}" in v,
            "contain '{messages}' (where the messages to summarize go)",
            "{param} must {expected} (SummarizationMiddleware, {param}.)",
        ),
        trim_tokens_to_summarize=INT_AT_LEAST_1.or_none("a positive int or None"),
        on_failure=one_of("error", "skip"),
        token_counter=rule(
            lambda v: v in ("tiktoken", "approximate") if isinstance(v, str) else callable(v),
            "'tiktoken', 'approximate' or a function",
        ),
    )

    def __init__(
        self,
        model: Any,
        *,
        trigger: TriggerSpec | Callable[[Any], TriggerSpec] | None = None,
        keep: ContextSize | TriggerClause | Callable[[Any], ContextSize] = ("messages", _DEFAULT_MESSAGES_TO_KEEP),
        token_counter: Literal["tiktoken", "approximate"] | Callable[[Sequence[BaseMessage]], int] = "tiktoken",
        encoding: str | None = None,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        trim_tokens_to_summarize: int | None = _DEFAULT_TRIM_TOKEN_LIMIT,
        summarizer: Summarizer | None = None,
        on_failure: Literal["error", "skip"] = "error",
        **deprecated_kwargs: Any,
    ) -> None:
        super().__init__()
        trigger, keep = _legacy_arguments(trigger, keep, deprecated_kwargs)
        self.model = _summarized_model(model)
        self._window = _max_input_tokens(self.model)
        if trigger is None:
            trigger = DEFAULT_TRIGGER if self._window is not None else DEFAULT_TRIGGER_WITHOUT_PROFILE
        self.trigger = trigger
        self.keep = keep
        self._trigger = None if callable(trigger) else _parse_trigger(trigger)
        self._keep = None if callable(keep) else _parse_keep(keep)
        _check_window(self._trigger, self._keep, self._window)
        self.summary_prompt = summary_prompt
        self.trim_tokens_to_summarize = trim_tokens_to_summarize
        self.summarizer, self.summary_model = _summary_writer(summarizer, self.model)
        self.on_failure = on_failure
        self.encoding = encoding or encoding_for_model(
            getattr(self.model, "model_name", None) or getattr(self.model, "model", None)
        )
        self._tiktoken: TiktokenCounter | None = TiktokenCounter(self.encoding) if token_counter == "tiktoken" else None
        self.token_counter: Callable[..., int] = _counter_of(token_counter, self._tiktoken)
        """Counts a list of messages: ``mw.token_counter(messages)``. Settable before an agent adopts the middleware
        (``mw.token_counter = my_counter``), as in LangChain."""

    # -- counting ------------------------------------------------------------------------------------------------
    def _count(self, messages: Sequence[BaseMessage], *, whole: bool = True) -> int:
        """Tokens of ``messages``. LangChain's estimate scales by the provider's reported usage when counting the
        whole conversation (``whole``), not when counting parts of it (the cut)."""
        counter = self.token_counter
        if counter is _approximately or counter is count_tokens_approximately:
            return int(counter(messages, use_usage_metadata_scaling=whole))
        return int(counter(messages))

    def _count_one(self, message: BaseMessage) -> int:
        if self._tiktoken is not None:
            return self._tiktoken.count_message(message)
        return self._count([message], whole=False)

    def _request_tokens(self, request: ModelRequest[Any], messages: Sequence[BaseMessage]) -> int:
        system = [request.system_message] if request.system_message is not None else []
        total = self._count([*system, *messages])
        if request.tools:
            if self._tiktoken is not None:
                total += self._tiktoken.count_tools(request.tools)
            else:
                total += sum(self._count([SystemMessage(str(_schema(t)))], whole=False) for t in request.tools)
        return total

    # -- deciding ------------------------------------------------------------------------------------------------
    def _window_of(self, request: ModelRequest[Any]) -> int | None:
        return _max_input_tokens(request.model) or self._window

    def _limit(self, kind: str, value: float, window: int | None, param: str) -> float:
        if kind != "fraction":
            return value
        if window is None:
            raise ValueError(f"{self.name}: {param} uses 'fraction' but the model has no profile['max_input_tokens'].")
        return value * window

    def _plan(self, request: ModelRequest[Any]) -> _Plan | None:
        runtime = request.runtime
        trigger = self._trigger if self._trigger is not None else _parse_trigger(self.trigger(runtime))  # type: ignore[operator]
        keep = self._keep if self._keep is not None else _parse_keep(self.keep(runtime))  # type: ignore[operator]
        messages = list(request.messages)
        window = self._window_of(request)
        tokens: int | None = None

        def holds(kind: str, value: float) -> bool:
            nonlocal tokens
            limit = self._limit(kind, value, window, "trigger")
            if kind == "messages":
                return len(messages) >= limit
            if tokens is None:
                tokens = self._request_tokens(request, messages)
            return tokens >= limit

        if not any(all(holds(k, v) for k, v in clause) for clause in trigger):
            return None
        if tokens is None:
            tokens = self._request_tokens(request, messages)
        kind, value = keep
        if kind == "messages":
            cut = len(messages) - int(value)
        else:
            budget = self._limit(kind, value, window, "keep")
            cut, used = len(messages), 0
            while cut > 0:
                cost = self._count_one(messages[cut - 1])
                if used + cost > budget:
                    break
                used += cost
                cut -= 1
        cut = _safe_cut(messages, cut)
        older, kept = messages[:cut], messages[cut:]
        human = _newest_human(messages)
        if human is not None and human < cut:
            # The newest human turn is never summarized away: it stays, right after the summary (a long tool loop
            # after one request is summarized around it).
            older, kept = [*messages[:human], *messages[human + 1 : cut]], [messages[human], *kept]
        previous = None
        if older and is_summary(older[0]):
            previous = str(older[0].content).removeprefix(SUMMARY_PREFIX)
            older = older[1:]
        if not older:
            return None  # nothing new to summarize
        return _Plan(previous, older, kept, tokens)

    # -- LangChain's private helpers, for libraries built on it ----------------------------------------------------
    # deepagents builds LangChain's SummarizationMiddleware as a helper and calls these; each is a thin adapter over
    # the logic above, with LangChain 1.5's meaning (the whole-request trigger of _plan is ours; these count what the
    # caller passes).
    @property
    def _trigger_clauses(self) -> list[dict[str, float]]:
        """The trigger as LangChain's clauses: ``[{"tokens": 3000}, {"messages": 10, "tokens": 500}]`` (any clause,
        all of its thresholds); empty for a trigger given as a function."""
        return [dict(clause) for clause in self._trigger or ()]

    def _get_profile_limits(self, model: BaseChatModel | None = None) -> int | None:
        """``profile["max_input_tokens"]`` of ``model`` (default: this middleware's), or None."""
        return _max_input_tokens(model if model is not None else self.model)

    def _partial_token_counter(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a part of the conversation (no usage-metadata scaling)."""
        return self._count(messages, whole=False)

    def _should_summarize_based_on_reported_tokens(self, messages: Sequence[BaseMessage], threshold: float) -> bool:
        """Whether the newest ``AIMessage``'s reported usage (``usage_metadata["total_tokens"]``) reaches
        ``threshold``."""
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        usage = getattr(last, "usage_metadata", None) or {}
        return bool(usage) and float(usage.get("total_tokens", 0)) >= threshold

    def _should_summarize(self, messages: Sequence[BaseMessage], total_tokens: int) -> bool:
        """Whether a trigger clause holds for ``messages`` counted as ``total_tokens`` (or as their reported usage)."""
        window = self._get_profile_limits()
        for clause in self._trigger_clauses:
            if all(self._clause_holds(kind, value, messages, total_tokens, window) for kind, value in clause.items()):
                return True
        return False

    def _clause_holds(
        self, kind: str, value: float, messages: Sequence[BaseMessage], total: int, window: int | None
    ) -> bool:
        if kind == "messages":
            return len(messages) >= value
        if kind == "fraction":
            if window is None:
                return False
            value = max(int(window * value), 1)
        return total >= value or self._should_summarize_based_on_reported_tokens(messages, value)

    def _determine_cutoff_index(self, messages: Sequence[AnyMessage]) -> int:
        """Where to cut ``messages`` for ``keep`` (a tool call stays with its answers)."""
        kind, value = self._keep if self._keep is not None else ("messages", _DEFAULT_MESSAGES_TO_KEEP)
        window = self._get_profile_limits()
        if kind != "messages" and (kind == "tokens" or window is not None):
            budget, cut, used = self._limit(kind, value, window, "keep"), len(messages), 0
            while cut > 0 and used + (cost := self._count_one(messages[cut - 1])) <= budget:
                used += cost
                cut -= 1
            return _safe_cut(messages, cut)
        keep = int(value) if kind == "messages" else _DEFAULT_MESSAGES_TO_KEEP
        return _safe_cut(messages, len(messages) - keep)

    @staticmethod
    def _partition_messages(
        conversation_messages: Sequence[AnyMessage], cutoff_index: int
    ) -> tuple[list[AnyMessage], list[AnyMessage]]:
        """``(to summarize, to keep)``."""
        return list(conversation_messages[:cutoff_index]), list(conversation_messages[cutoff_index:])

    def _create_summary(self, messages_to_summarize: Sequence[AnyMessage]) -> str:
        """The summary of ``messages_to_summarize`` (LangChain's text for none)."""
        if not messages_to_summarize:
            return "No previous conversation history."
        return run_sync(self._summarize(_Plan(None, list(messages_to_summarize), [], 0)))

    async def _acreate_summary(self, messages_to_summarize: Sequence[AnyMessage]) -> str:
        """Async twin of :meth:`_create_summary` (the same steps)."""
        if not messages_to_summarize:
            return "No previous conversation history."
        return await run_async(self._summarize(_Plan(None, list(messages_to_summarize), [], 0)))

    # -- summarizing ---------------------------------------------------------------------------------------------
    def _trimmed(self, messages: list[AnyMessage]) -> list[AnyMessage]:
        if self.trim_tokens_to_summarize is None:
            return messages
        start, used = len(messages), 0
        while start > 0:
            used += self._count_one(messages[start - 1])
            if used > self.trim_tokens_to_summarize and start < len(messages):
                break
            start -= 1
        return messages[start:]

    def _summarizer_input(self, plan: _Plan) -> tuple[Any, RunnableConfig | None]:
        messages = self._trimmed(plan.to_summarize)
        if self.summarizer is not None:
            lead = [SystemMessage(f"Summary of the earlier conversation:\n{plan.previous}")] if plan.previous else []
            return [*lead, *messages], None
        previous = plan.previous or "(none)"
        text = get_buffer_string(messages)
        if "{previous_summary}" in self.summary_prompt:
            prompt = self.summary_prompt.replace("{previous_summary}", previous).replace("{messages}", text)
        else:
            if plan.previous:
                text = f"Previous summary (fold it into yours):\n{plan.previous}\n\n{text}"
            prompt = self.summary_prompt.replace("{messages}", text)
        return [HumanMessage(prompt)], {
            "tags": [TAG_NOSTREAM, SUMMARIZER_TAG], "metadata": _summary_metadata(),
            "run_name": f"{self.name}.summarize",
        }

    def _summary_text(self, result: Any) -> str:
        text = result.text if isinstance(result, BaseMessage) else result
        if not isinstance(text, str):
            raise TypeError(f"{self.name}: the summarizer returned {type(result).__name__}; it must return a str.")
        if not text.strip():
            raise ValueError(f"{self.name}: the summarizer returned an empty summary; history was left untouched.")
        return text.strip()

    def _summarize(self, plan: _Plan) -> Steps[str]:
        """The summary, as steps (the summarizer's call is the one whose mode differs)."""
        payload, config = self._summarizer_input(plan)
        summarizer = self.summary_model if self.summarizer is None else self.summarizer
        if isinstance(summarizer, Runnable):
            if self.summarizer is not None:
                config = {"tags": [TAG_NOSTREAM, SUMMARIZER_TAG], "metadata": _summary_metadata()}
            site = f"{self.name}.before_model"
            result = yield Step(
                functools.partial(invoke_internal, summarizer, config=config, site=site),
                functools.partial(ainvoke_internal, summarizer, config=config, site=site),
                payload,
            )
        else:
            result = summarizer(payload)
            if inspect.isawaitable(result):
                result = yield _AWAIT.with_args(result)
        return self._summary_text(result)

    def _summary_message(self, text: str) -> HumanMessage:
        return HumanMessage(content=SUMMARY_PREFIX + text, additional_kwargs={"lc_source": SUMMARY_SOURCE})

    def _started(self, request: ModelRequest[Any], plan: _Plan) -> None:
        emit(request.runtime, {
            "event": "summarization_started", "middleware": self.name, "tokens_before": plan.tokens_before,
            "messages_before": len(request.messages), "messages_to_summarize": len(plan.to_summarize),
        })

    def _failed(self, request: ModelRequest[Any], error: Exception) -> None:
        if self.on_failure == "error" or isinstance(error, GraphBubbleUp):
            raise error
        emit(request.runtime, {
            "event": "summarization_failed", "middleware": self.name, "error": type(error).__name__,
            "message": str(error), "action": "skipped",
        })

    def _apply(self, request: ModelRequest[Any], plan: _Plan, text: str) -> dict[str, Any]:
        summary = self._summary_message(text)
        messages = [summary, *plan.kept]
        emit(request.runtime, {
            "event": "summarization_finished", "middleware": self.name, "tokens_before": plan.tokens_before,
            "tokens_after": self._request_tokens(request, messages), "messages_after": len(messages),
        })
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]}

    # -- the hooks -----------------------------------------------------------------------------------------------
    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Summarize when the trigger fires: ``{"messages": [RemoveMessage(REMOVE_ALL_MESSAGES), summary, *kept]}``,
        else ``None``."""
        return run_sync(self._summarizing(state, runtime))

    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async twin of :meth:`before_model` (an async summarizer is awaited on the loop)."""
        return await run_async(self._summarizing(state, runtime))

    def request_for(self, state: Any, runtime: Runtime[Any] | None) -> ModelRequest[Any]:
        """What the model call would start from with ``state``'s messages: the agent's system message, tools and
        model (:func:`~middleware_kit.agent_defaults.current_agent`); outside an agent, the messages alone (and this
        middleware's model, for its profile). This is what the trigger and the counts measure."""
        messages = state.get("messages") if isinstance(state, Mapping) else None
        if not isinstance(messages, (list, tuple)):
            raise MiddlewareError(
                f"{self.name}.before_model: the state has no 'messages' list (got {type(messages).__name__}). "
                f"Run it in an agent, or pass a state such as {{'messages': [...]}}.",
                middleware=self.name,
                hook="before_model",
            )
        defaults = current_agent() or _NO_DEFAULTS
        return defaults.request(messages, state=state, runtime=runtime, model=self.model)

    def _summarizing(self, state: Any, runtime: Runtime[Any] | None) -> Steps[dict[str, Any] | None]:
        """Both hooks' one body, as steps a sync or an async driver runs (:mod:`middleware_kit._engine.drive`): the
        summarizer's call (it may be async) is the step whose mode differs."""
        request = self.request_for(state, runtime)
        plan = self._plan(request)
        if plan is None:
            return None
        self._started(request, plan)
        try:
            text = yield from self._summarize(plan)
        except Exception as error:
            self._failed(request, error)
            return None
        return self._apply(request, plan, text)


def _summary_metadata() -> dict[str, Any]:
    """The summarizer call's metadata: LangChain's ``lc_source`` and the internal-call marker (which keeps the call
    out of ``stream_events(version="v3")``'s ``run.messages``)."""
    return {"lc_source": SUMMARY_SOURCE, **internal_call_metadata()}


def _schema(tool: Any) -> Any:
    return tool if isinstance(tool, dict) else convert_to_openai_tool(tool)


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


_AWAIT = Step.twin(None, _awaited)
"""A step awaiting a user summarizer's awaitable: on the loop under ``ainvoke``, driven to completion under
``invoke``."""
