"""Structured output: ``response_format=ToolStrategy(schema)`` (or a bare schema) and how a model's answer is parsed.

The strategy turns each schema into a *structured tool*: offered to the model together with the regular tools, never
executed by the tool node. When the model calls it, the innermost model handler parses the arguments into the
schema and answers the call with a ``ToolMessage`` in the same step, so pairing holds and the response the wrappers
see is ``ModelResponse(result=[AIMessage, ToolMessage], structured_response=...)``. The run then ends, after any
regular tools the same ``AIMessage`` called have run (LangChain v1's rule); the graph recognises that answer by
:func:`is_structured_answer`.

Everything that can be computed from the schema (tool definitions, parsers) is computed once, when the strategy is
built; an agent without a ``response_format`` never touches this module per call.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar, Union, get_args, get_origin, overload

from langchain_core.exceptions import LangChainException
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, TypeAdapter
from typing_extensions import is_typeddict

from middleware_kit.errors import AgentArgumentError, MiddlewareError
from middleware_kit.types import ModelResponse

__all__ = [
    "STRUCTURED_OUTPUT_ERROR_TEMPLATE",
    "MultipleStructuredOutputsError",
    "StructuredOutputError",
    "StructuredOutputValidationError",
    "ToolStrategy",
    "is_structured_answer",
    "parse_model_output",
    "to_strategy",
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

    def __init__(self, tool_name: str, source: Exception, *, ai_message: AIMessage | None = None) -> None:
        super().__init__(
            f"Failed to parse structured output for tool '{tool_name}': {source}.", ai_message=ai_message
        )
        self.tool_name = tool_name
        self.source = source


class MultipleStructuredOutputsError(StructuredOutputError):
    """The model called more than one structured tool in one message (``tool_names``)."""

    def __init__(self, tool_names: Sequence[str], *, ai_message: AIMessage | None = None) -> None:
        super().__init__(
            f"Model incorrectly returned multiple structured responses ({', '.join(tool_names)}) when only one is "
            f"expected.",
            ai_message=ai_message,
        )
        self.tool_names = list(tool_names)


# -- schemas --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _SchemaSpec:
    """One schema as a structured tool: its definition for ``bind_tools`` and how to parse its arguments."""

    name: str
    tool: dict[str, Any]
    """The OpenAI-format tool definition bound on the model."""
    parse: Callable[[dict[str, Any]], Any]


def _is_schema(schema: object) -> bool:
    if isinstance(schema, dict):
        return True
    if not isinstance(schema, type):
        return False
    return issubclass(schema, BaseModel) or dataclasses.is_dataclass(schema) or is_typeddict(schema)


def _variants(schema: object) -> tuple[object, ...]:
    if get_origin(schema) in (Union, types.UnionType):
        return tuple(get_args(schema))
    return (schema,)


def _spec(schema: object) -> _SchemaSpec:
    if isinstance(schema, dict):
        title = schema.get("title")
        if not isinstance(title, str) or not title:
            raise AgentArgumentError(
                "A JSON schema used as response_format needs a 'title' (it names the structured tool the model "
                "calls), and should have a 'description'.",
                argument="response_format",
            )
        frozen = dict(schema)
        return _SchemaSpec(title, convert_to_openai_tool(frozen), lambda args: args)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        model = schema
        return _SchemaSpec(schema.__name__, convert_to_openai_tool(schema), model.model_validate)
    cls = typing.cast(type[Any], schema)
    adapter: TypeAdapter[Any] = TypeAdapter(cls)
    return _SchemaSpec(cls.__name__, convert_to_openai_tool(cls), adapter.validate_python)


# -- the strategy ---------------------------------------------------------------------------------------------
class ToolStrategy(Generic[SchemaT]):
    """Structured output through tool calling: the model answers by calling a tool shaped like ``schema``.

    Args:
        schema: A pydantic model (parsed into an instance), a dataclass (an instance), a ``TypedDict`` (a dict), a
            JSON schema ``dict`` with a ``title`` (the arguments as a dict), or a ``Union`` of those (one tool per
            variant; the one the model calls is parsed).
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
    schema_specs: tuple[_SchemaSpec, ...]
    tools: tuple[dict[str, Any], ...]
    """The structured tools' definitions, bound on the model after the regular tools."""

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
        bad = [v for v in variants if not _is_schema(v)]
        if bad:
            raise AgentArgumentError(
                f"ToolStrategy(schema={schema!r}): a schema is a pydantic model, a dataclass, a TypedDict, a JSON "
                f"schema dict with a 'title', or a Union of those; got {bad[0]!r}.",
                argument="response_format",
            )
        self.schema = schema
        self.tool_message_content = tool_message_content
        self.handle_errors = handle_errors
        self.schema_specs = tuple(_spec(v) for v in variants)
        self.tools = tuple(spec.tool for spec in self.schema_specs)
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


def _for_model(exc: Exception) -> str:
    """The error as the model reads it: LangChain's sentence for ours (no developer advice), ``str`` for others."""
    return exc.reason if isinstance(exc, StructuredOutputError) else str(exc)


def to_strategy(response_format: Any) -> ToolStrategy[Any] | None:
    """``response_format`` as a :class:`ToolStrategy`: a strategy as is, a bare schema wrapped, None as None."""
    if response_format is None or isinstance(response_format, ToolStrategy):
        return response_format
    if all(_is_schema(v) for v in _variants(response_format)):
        if isinstance(response_format, dict):
            return ToolStrategy(response_format)
        return _cached_strategy(response_format)
    raise AgentArgumentError(
        f"response_format={response_format!r} is not supported: pass ToolStrategy(schema) or a schema (a pydantic "
        f"model, a dataclass, a TypedDict, or a JSON schema dict with a 'title'). ProviderStrategy is not "
        f"available in middleware_kit (see docs/migration.md).",
        argument="response_format",
    )


@functools.lru_cache(maxsize=64)
def _cached_strategy(schema: Any) -> ToolStrategy[Any]:
    """A bare schema set by a wrapper on every call is converted once (classes and unions are hashable)."""
    return ToolStrategy(schema)


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


def parse_model_output(message: Any, strategy: ToolStrategy[Any]) -> ModelResponse[Any]:
    """The response of one model call under ``strategy``: the model's message, the answers to its structured calls,
    and the parsed object when exactly one structured call parsed. Raises when ``handle_errors`` says so."""
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
        parsed = by_name[call["name"]].parse(call["args"])
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
