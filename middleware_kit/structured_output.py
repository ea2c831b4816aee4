"""Structured output: ``response_format=ToolStrategy(schema)``, ``ProviderStrategy(schema)`` or a bare schema (an
``AutoStrategy``), and how a model's answer is parsed.

The strategy turns each schema into a *structured tool*: offered to the model together with the regular tools, never
executed by the tool node. When the model calls it, the innermost model handler parses the arguments into the
schema and answers the call with a ``ToolMessage`` in the same step, so pairing holds and the response the wrappers
see is ``ModelResponse(result=[AIMessage, ToolMessage], structured_response=...)``. The run then ends, after any
regular tools the same ``AIMessage`` called have run (LangChain v1's rule); the graph recognises that answer by
:func:`is_structured_answer`.

A ``ProviderStrategy`` binds the provider's native JSON mode instead and parses the model's final text. A bare
schema is an ``AutoStrategy``: each model call picks the provider strategy when :func:`supports_provider_strategy`
says the (possibly middleware-swapped) model has native structured output, else the tool strategy.

Everything that can be computed from the schema (tool definitions, parsers) is computed once, when the strategy is
built; an agent without a ``response_format`` never touches this module per call.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Self, TypeAlias, TypeVar, Union, get_args, get_origin, overload

from langchain_core.exceptions import LangChainException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, TypeAdapter
from typing_extensions import is_typeddict

from middleware_kit.errors import AgentArgumentError, MiddlewareError
from middleware_kit.types import ModelResponse

__all__ = [
    "STRUCTURED_OUTPUT_ERROR_TEMPLATE",
    "AutoStrategy",
    "MultipleStructuredOutputsError",
    "OutputToolBinding",
    "ProviderStrategy",
    "ProviderStrategyBinding",
    "ResponseFormat",
    "SchemaKind",
    "StructuredOutputError",
    "StructuredOutputValidationError",
    "ToolStrategy",
    "declared_format",
    "effective_strategy",
    "is_structured_answer",
    "parse_model_output",
    "setup_strategy",
    "structured_holdback",
    "supports_provider_strategy",
    "tool_strategy_for",
]

SchemaT = TypeVar("SchemaT")

STRUCTURED_OUTPUT_ERROR_TEMPLATE = "Error: {error}\n Please fix your mistakes."
"""The error ``ToolMessage`` the model gets when ``handle_errors=True`` (LangChain v1's wording)."""

_MARKER = "middleware_kit_structured_response"
"""Key in the answering ``ToolMessage.response_metadata``: this call produced the structured response (routing ends
the run on it). ``response_metadata`` is never sent to a provider."""

HandleErrors: TypeAlias = (
    "bool | str | type[Exception] | tuple[type[Exception], ...] | Callable[[Exception], str]"
)
"""``True``: the model gets the error and retries; ``False``: the error is raised; a ``str``: that message is sent;
exception types: those are sent, others raised; a function ``(exception) -> str``: its result is sent."""


# -- errors ---------------------------------------------------------------------------------------------------
class StructuredOutputError(MiddlewareError, LangChainException):
    """The model's structured answer could not be used. ``ai_message`` is the model's message.

    Raised only with ``ToolStrategy(handle_errors=False)`` (or for errors it does not handle); ``.middleware`` is
    ``"create_agent"`` and ``.hook`` is ``"response_format"``.
    """

    def __init__(self, message: str, *, ai_message: AIMessage | None = None) -> None:
        super().__init__(
            f"{message} Fix: let the model retry with ToolStrategy(schema, handle_errors=True) (the default), or "
            f"handle this error around invoke.",
            middleware="create_agent",
            hook="response_format",
        )
        self.ai_message = ai_message
        self.reason = message
        """LangChain's sentence alone, without the developer's fix: what the model reads when it may retry."""


class StructuredOutputValidationError(StructuredOutputError):
    """The arguments of the structured tool call do not match the schema (``tool_name``, ``source``: the cause)."""

    def __init__(self, tool_name: str, source: Exception, ai_message: AIMessage | None = None) -> None:
        super().__init__(
            f"Failed to parse structured output for tool '{tool_name}': {source}.", ai_message=ai_message
        )
        self.tool_name = tool_name
        self.source = source


class MultipleStructuredOutputsError(StructuredOutputError):
    """The model called more than one structured tool in one message (``tool_names``)."""

    def __init__(self, tool_names: Sequence[str], ai_message: AIMessage | None = None) -> None:
        super().__init__(
            f"Model incorrectly returned multiple structured responses ({', '.join(tool_names)}) when only one is "
            f"expected.",
            ai_message=ai_message,
        )
        self.tool_names = list(tool_names)


# -- schemas ---------------------------------------------------------------------------------------------------
SchemaKind = Literal["pydantic", "dataclass", "typeddict", "json_schema"]
"""What a schema is: decides how arguments are parsed (a JSON schema's are returned as they are)."""


def _kind(schema: object) -> SchemaKind | None:
    if isinstance(schema, dict):
        return "json_schema"
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return "pydantic"
    if isinstance(schema, type) and dataclasses.is_dataclass(schema):
        return "dataclass"
    if is_typeddict(schema):
        return "typeddict"
    return None


def _anonymous_name(schema: dict[str, Any]) -> str:
    """A JSON schema without a ``title``: a name derived from its content, the same in every process and call."""
    digest = hashlib.sha1(json.dumps(schema, sort_keys=True, default=repr).encode(), usedforsecurity=False)
    return f"response_format_{digest.hexdigest()[:8]}"


class _SchemaSpec(Generic[SchemaT]):
    """One schema of a structured-output strategy: its name, description, kind, JSON schema and parser.

    Args:
        schema: A pydantic model, a dataclass, a ``TypedDict`` or a JSON schema ``dict``.
        name: The structured tool's name; default: the class name, or the JSON schema's ``title`` (a name derived
            from the schema when it has none).
        description: Default: the class docstring, or the JSON schema's ``description``.
        strict: Ask the provider for strict schema enforcement (``ProviderStrategy``).
    """

    __slots__ = ("_adapter", "description", "json_schema", "name", "schema", "schema_kind", "strict")

    schema: Any
    name: str
    description: str
    schema_kind: SchemaKind
    json_schema: dict[str, Any]
    strict: bool | None

    def __init__(
        self, schema: Any, *, name: str | None = None, description: str | None = None, strict: bool | None = None
    ) -> None:
        kind = _kind(schema)
        if kind is None:
            raise ValueError(
                f"Unsupported schema type: {type(schema)}. Supported types: Pydantic models, dataclasses, "
                f"TypedDicts, and JSON schema dicts."
            )
        self.schema = schema
        self.schema_kind = kind
        self.strict = strict
        self._adapter: TypeAdapter[Any] | None = None
        if isinstance(schema, dict):
            self.json_schema = schema
            self.name = name or str(schema.get("title") or _anonymous_name(schema))
            self.description = description or str(schema.get("description", ""))
            return
        self._adapter = TypeAdapter(schema)
        self.json_schema = self._adapter.json_schema()
        self.name = name or schema.__name__
        self.description = description or getattr(schema, "__doc__", None) or ""

    def __repr__(self) -> str:
        return f"_SchemaSpec(schema={self.schema!r}, name={self.name!r})"

    def validate(self, data: Any) -> Any:
        """``data`` as the schema's type (a JSON schema's data as it is); the schema's own error if it does not fit
        (what the model reads when it may retry)."""
        return data if self._adapter is None else self._adapter.validate_python(data)

    def parse(self, data: Any) -> Any:
        """:meth:`validate`, its error a ``ValueError`` naming the schema (LangChain's bindings' behaviour)."""
        try:
            return self.validate(data)
        except Exception as exc:  # pydantic.ValidationError, TypeError: anything the schema rejects
            raise ValueError(f"Failed to parse data to {self.name}: {exc}") from exc


def _variants(schema: object) -> tuple[object, ...]:
    """The leaf schemas of a ``Union`` (or ``A | B``) and of a JSON schema's ``oneOf``."""
    if get_origin(schema) in (Union, types.UnionType):
        return tuple(leaf for arg in get_args(schema) for leaf in _variants(arg))
    if isinstance(schema, dict) and "oneOf" in schema:
        return tuple(leaf for sub in schema["oneOf"] for leaf in _variants(sub))
    return (schema,)


@dataclass
class OutputToolBinding(Generic[SchemaT]):
    """A schema of a :class:`ToolStrategy` as the tool the model is offered, and how its arguments are parsed."""

    schema: Any
    """The schema (pydantic model, dataclass, ``TypedDict`` or JSON schema dict)."""
    schema_kind: SchemaKind
    tool: BaseTool
    """The structured tool bound on the model (never executed: the agent answers it)."""

    @classmethod
    def from_schema_spec(cls, schema_spec: _SchemaSpec[SchemaT]) -> Self:
        """The binding of ``schema_spec``: a tool with its name, description and JSON schema."""
        tool = StructuredTool(
            name=schema_spec.name, description=schema_spec.description, args_schema=schema_spec.json_schema
        )
        return cls(schema=schema_spec.schema, schema_kind=schema_spec.schema_kind, tool=tool)

    def parse(self, tool_args: dict[str, Any]) -> Any:
        """The tool call's arguments as the schema's type; ``ValueError`` when they do not fit."""
        return _SchemaSpec(self.schema, name=self.tool.name).parse(tool_args)


@dataclass
class ProviderStrategyBinding(Generic[SchemaT]):
    """A :class:`ProviderStrategy` schema and how the model's JSON text is parsed."""

    schema: Any
    schema_kind: SchemaKind

    @classmethod
    def from_schema_spec(cls, schema_spec: _SchemaSpec[SchemaT]) -> Self:
        return cls(schema=schema_spec.schema, schema_kind=schema_spec.schema_kind)

    def parse(self, response: AIMessage) -> Any:
        """The message's text, read as JSON, as the schema's type; ``ValueError`` when it is not valid."""
        text = _text_of(response)
        try:
            data = json.loads(text)
        except Exception as exc:  # json.JSONDecodeError, TypeError
            schema_name = getattr(self.schema, "__name__", "response_format")
            raise ValueError(
                f"Native structured output expected valid JSON for {schema_name}, but parsing failed: {exc}."
            ) from exc
        return _SchemaSpec(self.schema).parse(data)


def _text_of(message: AIMessage) -> str:
    """The text of a message: its string content, or its text blocks joined."""
    if isinstance(message.content, str):
        return message.content
    parts: list[str] = []
    for block in message.content:
        if not isinstance(block, dict):
            parts.append(str(block))
        elif block.get("type") == "text" and "text" in block:
            parts.append(str(block["text"]))
        elif isinstance(block.get("content"), str):
            parts.append(block["content"])
    return "".join(parts)


# -- the strategies -------------------------------------------------------------------------------------------
class ToolStrategy(Generic[SchemaT]):
    """Structured output through tool calling: the model answers by calling a tool shaped like ``schema``.

    Args:
        schema: A pydantic model (parsed into an instance), a dataclass (an instance), a ``TypedDict`` (a dict), a
            JSON schema ``dict`` (the arguments as they are, not validated), or a ``Union`` of those (or a JSON
            schema with ``oneOf``): one tool per variant; the one the model calls is parsed.
        tool_message_content: The content of the ``ToolMessage`` answering the structured call; default
            ``"Returning structured response: {the parsed object}"``.
        handle_errors: What to do when the arguments do not parse or several structured tools are called at
            once: ``True`` (default) sends the model an error ``ToolMessage`` and lets it retry; ``False`` raises
            :class:`StructuredOutputValidationError` / :class:`MultipleStructuredOutputsError`; a ``str`` is the
            message sent; exception types: only those are sent (others raise); a function ``(exception) -> str``
            makes the message.
    """

    __slots__ = ("_by_name", "handle_errors", "schema", "schema_specs", "tool_message_content", "tools")

    schema: Any
    tool_message_content: str | None
    handle_errors: Any
    schema_specs: tuple[_SchemaSpec[Any], ...]
    tools: tuple[BaseTool, ...]
    """The structured tools, bound on the model after the regular tools."""

    @overload
    def __init__(
        self: ToolStrategy[SchemaT],
        schema: type[SchemaT],
        *,
        tool_message_content: str | None = None,
        handle_errors: HandleErrors = True,
    ) -> None: ...

    @overload
    def __init__(
        self: ToolStrategy[Any],
        schema: Any,
        *,
        tool_message_content: str | None = None,
        handle_errors: HandleErrors = True,
    ) -> None: ...

    def __init__(
        self,
        schema: Any,
        *,
        tool_message_content: str | None = None,
        handle_errors: HandleErrors = True,
    ) -> None:
        variants = _variants(schema)
        bad = [v for v in variants if _kind(v) is None]
        if bad:
            raise AgentArgumentError(
                f"ToolStrategy(schema={schema!r}): a schema is a pydantic model, a dataclass, a TypedDict, a JSON "
                f"schema dict, or a Union of those; got {bad[0]!r}.",
                argument="response_format",
            )
        self.schema = schema
        self.tool_message_content = tool_message_content
        self.handle_errors = handle_errors
        self.schema_specs = tuple(_SchemaSpec(v) for v in variants)
        self.tools = tuple(OutputToolBinding.from_schema_spec(spec).tool for spec in self.schema_specs)
        self._by_name = {spec.name: spec for spec in self.schema_specs}

    @property
    def tool_names(self) -> frozenset[str]:
        """The names of the structured tools."""
        return frozenset(self._by_name)

    def __repr__(self) -> str:
        return f"ToolStrategy(schema={self.schema!r})"

    def error_message(self, exc: Exception) -> str | None:
        """The message for the model, or None when ``exc`` must be raised (``handle_errors`` decides)."""
        handle = self.handle_errors
        if handle is True:
            return STRUCTURED_OUTPUT_ERROR_TEMPLATE.format(error=_for_model(exc))
        if handle is False or handle is None:
            return None
        if isinstance(handle, str):
            return handle
        if isinstance(handle, type) and issubclass(handle, BaseException):
            return STRUCTURED_OUTPUT_ERROR_TEMPLATE.format(error=_for_model(exc)) if isinstance(exc, handle) else None
        if isinstance(handle, tuple):
            return STRUCTURED_OUTPUT_ERROR_TEMPLATE.format(error=_for_model(exc)) if isinstance(exc, handle) else None
        if callable(handle):
            return str(handle(exc))
        return None


class ProviderStrategy(Generic[SchemaT]):
    """Structured output through the provider's native JSON mode: the model answers with JSON text.

    The model is bound with ``response_format={"type": "json_schema", "json_schema": {...}}`` (OpenAI's form, which
    LangChain's provider packages translate); its text answer is parsed into ``schema``. A text that does not parse
    raises :class:`StructuredOutputValidationError` (there is no tool call to answer with an error, so no retry).

    Args:
        schema: A pydantic model, a dataclass, a ``TypedDict`` or a JSON schema ``dict``.
        strict: Ask the provider to enforce the schema strictly.
    """

    __slots__ = ("schema", "schema_spec")

    schema: Any
    schema_spec: _SchemaSpec[SchemaT]

    def __init__(self, schema: type[SchemaT] | dict[str, Any], *, strict: bool | None = None) -> None:
        self.schema = schema
        self.schema_spec = _SchemaSpec(schema, strict=strict)

    def __repr__(self) -> str:
        return f"ProviderStrategy(schema={self.schema!r})"

    def to_model_kwargs(self) -> dict[str, Any]:
        """The keyword arguments bound on the model to ask for this schema."""
        spec = self.schema_spec
        json_schema: dict[str, Any] = {"name": spec.name, "schema": spec.json_schema}
        if spec.strict:
            json_schema["strict"] = True
        return {"response_format": {"type": "json_schema", "json_schema": json_schema}}


class AutoStrategy(Generic[SchemaT]):
    """A bare schema given as ``response_format``: each model call uses :class:`ProviderStrategy` when the model
    supports native structured output (its profile, or a known model name), else :class:`ToolStrategy`."""

    __slots__ = ("schema",)

    schema: Any

    def __init__(self, schema: type[SchemaT] | dict[str, Any]) -> None:
        self.schema = schema

    def __repr__(self) -> str:
        return f"AutoStrategy(schema={self.schema!r})"


def structured_holdback(response_format: object) -> Literal["message"] | None:
    """The stream hold-back of a ``response_format`` (as ``AgentMiddleware.stream_holdback``): ``"message"`` where
    validation *rejects* an answer (a ``ProviderStrategy``, which raises on an answer that does not parse; an
    ``AutoStrategy``, which may become one; a ``ToolStrategy`` whose ``handle_errors`` lets some error raise:
    ``False``, an exception type or a tuple of them), so no stream carries an answer the run then refuses. None for a
    ``ToolStrategy`` that handles every error (``True``, a message, a function): a bad answer is kept in the
    conversation with the error the model reads, and is streamed as it is stored."""
    if isinstance(response_format, (ProviderStrategy, AutoStrategy)):
        return "message"
    if isinstance(response_format, ToolStrategy):
        handle = response_format.handle_errors
        every = handle is True or isinstance(handle, str) or (callable(handle) and not isinstance(handle, type))
        return None if every else "message"
    return None


ResponseFormat: TypeAlias = ToolStrategy[SchemaT] | ProviderStrategy[SchemaT] | AutoStrategy[SchemaT]
"""A ``response_format`` strategy; subscriptable at run time (``ResponseFormat[Weather]``), as libraries built on
LangChain use it in their own annotations."""


def _for_model(exc: Exception) -> str:
    """The error as the model reads it: LangChain's sentence for ours (no developer advice), ``str`` for others."""
    return exc.reason if isinstance(exc, StructuredOutputError) else str(exc)


def declared_format(response_format: Any) -> ToolStrategy[Any] | ProviderStrategy[Any] | AutoStrategy[Any] | None:
    """``create_agent(response_format=...)`` as a strategy: a strategy as is, a bare schema (or a ``Union`` of
    schemas) as an :class:`AutoStrategy`, None as None; anything else is an error naming the argument."""
    if response_format is None or isinstance(response_format, (ToolStrategy, ProviderStrategy, AutoStrategy)):
        return response_format
    if all(_kind(v) is not None for v in _variants(response_format)):
        return AutoStrategy(response_format)
    raise AgentArgumentError(
        f"response_format={response_format!r} is not supported: pass ToolStrategy(schema), ProviderStrategy(schema) "
        f"or a schema (a pydantic model, a dataclass, a TypedDict, or a JSON schema dict).",
        argument="response_format",
    )


def setup_strategy(declared: Any) -> ToolStrategy[Any] | None:
    """The tool strategy a declared format may use (an :class:`AutoStrategy` falls back to it): its tool names are
    reserved when the agent is built."""
    if isinstance(declared, ToolStrategy):
        return declared
    if isinstance(declared, AutoStrategy):
        return tool_strategy_for(declared.schema)
    return None


def tool_strategy_for(schema: Any) -> ToolStrategy[Any]:
    """``ToolStrategy(schema)``, built once per hashable schema (a wrapper may set the same one on every call)."""
    try:
        return _cached_strategy(schema)
    except TypeError:  # a JSON schema dict: not hashable, its name is derived from its content anyway
        return ToolStrategy(schema)


@functools.lru_cache(maxsize=64)
def _cached_strategy(schema: Any) -> ToolStrategy[Any]:
    return ToolStrategy(schema)


def effective_strategy(
    response_format: Any, model: Any, tools: Sequence[Any], supports_provider: Callable[..., bool]
) -> ToolStrategy[Any] | ProviderStrategy[Any] | None:
    """The strategy of one model call: an :class:`AutoStrategy` (or a bare schema a wrapper set) becomes a
    :class:`ProviderStrategy` when ``supports_provider(model, tools=tools)``, else a :class:`ToolStrategy`."""
    if response_format is None or isinstance(response_format, (ToolStrategy, ProviderStrategy)):
        return response_format
    schema = response_format.schema if isinstance(response_format, AutoStrategy) else declared_format(
        response_format
    ).schema  # type: ignore[union-attr]
    if len(_variants(schema)) == 1 and supports_provider(model, tools=list(tools)):
        return ProviderStrategy(schema)
    return tool_strategy_for(schema)


# -- which models have native structured output ---------------------------------------------------------------
_ANY = r"(?:$|[-/:])"
"""After the family name: the end, or a variant (``-mini``), a route (``/``) or a version (``:``)."""
_DATED = r"(?:-\d{4}-\d{2}-\d{2})?(?:$|[/:])"
"""Only a dated snapshot of the family (``gpt-5.4-2026-03-05``), not a variant (``gpt-5.4-pro``)."""
_CLAUDE = r"(?:-\d{8})?(?:-v\d(?::\d)?)?(?:$|[/:])"
"""An Anthropic snapshot date, then a Bedrock version (``-v1:0``)."""

_NATIVE_OUTPUT_FAMILIES: tuple[tuple[str, str], ...] = (
    *((family, _ANY) for family in ("gpt-4.1", "gpt-4o", "gpt-5", "gpt-5.1", "gpt-5.2-chat", "gpt-5.2-codex")),
    *((family, _ANY) for family in ("gpt-5.3", "gpt-5.4-mini", "gpt-5.4-nano", "gpt-5.5", "grok-build")),
    *((f"gpt-6-{name}", _ANY) for name in ("astra", "luna", "sol")),
    ("gpt-5.2", _DATED),
    ("gpt-5.4", _DATED),
    *((f"claude-{name}-5", _CLAUDE) for name in ("fable", "mythos")),
    *((f"claude-{name}", _CLAUDE) for name in ("haiku-4-5", "opus-4-5", "opus-4-6", "opus-4-7", "opus-4-8")),
    *((f"claude-{name}", _CLAUDE) for name in ("sonnet-4-5", "sonnet-4-6")),
    ("grok-4", r"(?:$|[-.:/])"),
)
"""Model families known to support native structured output, for models without profile data, with what may follow
the family name. A family name starts the model name or follows a provider prefix (``openai:``, ``openai/``,
``us.anthropic.``)."""


@functools.cache
def _native_output_names() -> re.Pattern[str]:
    families = "|".join(f"{re.escape(family)}{tail}" for family, tail in _NATIVE_OUTPUT_FAMILIES)
    return re.compile(rf"(?:^|[/:.])(?:{families})")


def supports_provider_strategy(model: Any, tools: Sequence[Any] | None = None) -> bool:
    """Whether ``model`` (a chat model or a model name) supports native structured output (:class:`ProviderStrategy`).

    A chat model whose profile says ``structured_output`` does, except a Gemini model before the 3 series when
    ``tools`` are given (it cannot combine both); otherwise the model's name is matched against known families.
    """
    name: Any = model
    if isinstance(model, BaseChatModel):
        name = getattr(model, "model_name", None) or getattr(model, "model", None) or getattr(model, "model_id", "")
        profile = model.profile
        if profile is not None and profile.get("structured_output"):
            lowered = name.lower() if isinstance(name, str) else ""
            if not (tools and "gemini" in lowered and "gemini-3" not in lowered):
                return True
    if not isinstance(name, str) or not name:
        return False
    return _native_output_names().search(name.lower()) is not None


# -- parsing a model's answer ---------------------------------------------------------------------------------
def is_structured_answer(message: BaseMessage) -> bool:
    """True for the ``ToolMessage`` that answered a structured call whose arguments parsed."""
    return isinstance(message, ToolMessage) and bool(message.response_metadata.get(_MARKER))


def _answer(call: ToolCall, content: str, *, ok: bool) -> ToolMessage:
    return ToolMessage(
        content=content,
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="success" if ok else "error",
        response_metadata={_MARKER: True} if ok else {},
    )


def parse_model_output(message: Any, strategy: ToolStrategy[Any] | ProviderStrategy[Any]) -> ModelResponse[Any]:
    """The response of one model call under ``strategy``: the model's message, the answers to its structured calls,
    and the parsed object when exactly one structured call parsed. Raises when ``handle_errors`` says so."""
    if isinstance(strategy, ProviderStrategy):
        return _parse_native(message, strategy)
    if not isinstance(message, AIMessage) or not message.tool_calls:
        return ModelResponse(result=[message])
    by_name = strategy._by_name
    calls = [c for c in message.tool_calls if c["name"] in by_name]
    if not calls:
        return ModelResponse(result=[message])
    if len(calls) > 1:
        error: Exception = MultipleStructuredOutputsError([c["name"] for c in calls], ai_message=message)
        text = strategy.error_message(error)
        if text is None:
            raise error
        return ModelResponse(result=[message, *(_answer(c, text, ok=False) for c in calls)])
    call = calls[0]
    try:
        parsed = by_name[call["name"]].validate(call["args"])
    except Exception as exc:  # pydantic.ValidationError, TypeError, ...: anything the schema rejects
        error = StructuredOutputValidationError(call["name"], exc, ai_message=message)
        text = strategy.error_message(error)
        if text is None:
            raise error from exc
        return ModelResponse(result=[message, _answer(call, text, ok=False)])
    content = strategy.tool_message_content
    if content is None:
        content = f"Returning structured response: {parsed}"
    return ModelResponse(result=[message, _answer(call, content, ok=True)], structured_response=parsed)


def _parse_native(message: Any, strategy: ProviderStrategy[Any]) -> ModelResponse[Any]:
    """A :class:`ProviderStrategy` answer: the JSON text of a message without tool calls, parsed (a message calling
    tools is not the answer yet)."""
    if not isinstance(message, AIMessage) or message.tool_calls:
        return ModelResponse(result=[message])
    try:
        parsed = ProviderStrategyBinding.from_schema_spec(strategy.schema_spec).parse(message)
    except Exception as exc:  # ValueError from the JSON or the schema
        name = getattr(strategy.schema_spec.schema, "__name__", "response_format")
        raise StructuredOutputValidationError(name, exc, message) from exc
    return ModelResponse(result=[message], structured_response=parsed)
