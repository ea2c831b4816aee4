"""Errors of the fail-fast checks (issue 15): hook signatures at build, the run's context, hook values to the element.

They live apart from :mod:`middleware_kit.errors` only while that module is being edited elsewhere; each is a
:class:`~middleware_kit.errors.MiddlewareError` subclass that owns its messages (classmethods), names the culprit
(``.middleware``) and the hook (``.hook``), and ends with the fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from middleware_kit.errors import HookReturnError, MiddlewareConfigError, MiddlewareError

__all__ = ["ContextError", "HookSignatureError", "HookValueError"]


def _describe(value: object) -> str:
    return "None" if value is None else f"a {type(value).__qualname__} ({value!r:.80})"


class HookSignatureError(MiddlewareConfigError, TypeError):
    """A hook's parameters do not fit its contract (:mod:`middleware_kit.hooks`): found by ``create_agent``, before
    anything runs (as pluggy validates a plugin at register).

    Attributes:
        expected: The signature the engine calls the hook with.
        found: The hook's own signature.
    """

    def __init__(self, message: str, *, middleware: str, hook: str, expected: str, found: str) -> None:
        super().__init__(message, middleware=middleware, hook=hook)
        self.expected = expected
        self.found = found

    @classmethod
    def wrong_parameters(
        cls, middleware: str, hook: str, expected: str, found: str, problem: str
    ) -> HookSignatureError:
        return cls(
            f"{middleware}.{hook} has the signature {found}, but the engine calls it as {expected} ({problem}). "
            f"Change it to {expected}; extra parameters need defaults.",
            middleware=middleware,
            hook=hook,
            expected=expected,
            found=found,
        )

    @classmethod
    def generator_hook(cls, middleware: str, hook: str, expected: str, found: str) -> HookSignatureError:
        return cls(
            f"{middleware}.{hook} is a generator function ({found}); only wrap_model_call and wrap_tool_call may be "
            f"written as flows (generators). Write it as {expected} and return the result instead of yielding it.",
            middleware=middleware,
            hook=hook,
            expected=expected,
            found=found,
        )

    @classmethod
    def async_generator_hook(cls, middleware: str, hook: str, expected: str, found: str) -> HookSignatureError:
        return cls(
            f"{middleware}.{hook} is an async generator ({found}); hooks are never async generators. Write it as "
            f"{expected} (a flow wrap hook is a plain generator: 'def', 'response = yield request').",
            middleware=middleware,
            hook=hook,
            expected=expected,
            found=found,
        )


class ContextError(MiddlewareError, TypeError):
    """The ``context=`` of a run does not match the agent's ``context_schema``: checked once when the run starts,
    before any hook runs and before anything is written to the thread.

    Attributes:
        schema: The name of the context schema.
        field: The field at fault (None when the whole context is: missing or of the wrong type).
    """

    def __init__(self, message: str, *, schema: str, field: str | None) -> None:
        super().__init__(message, middleware="create_agent", hook="context")
        self.schema = schema
        self.field = field

    @classmethod
    def missing(cls, schema: str, required: Sequence[str]) -> ContextError:
        return cls(
            f"The agent's context_schema is {schema}, which requires the field(s) {list(required)}, but the run got "
            f"no context. Pass it: agent.invoke(..., context={schema}({required[0]}=...)) (a dict of its fields "
            f"works too).",
            schema=schema,
            field=required[0],
        )

    @classmethod
    def wrong_type(cls, schema: str, value: object) -> ContextError:
        return cls(
            f"context= is {_describe(value)}, not a {schema} (the agent's context_schema). Pass {schema}(...) or a "
            f"dict of its fields.",
            schema=schema,
            field=None,
        )

    @classmethod
    def unknown_field(cls, schema: str, field: str, declared: Sequence[str]) -> ContextError:
        close = difflib.get_close_matches(field, list(declared), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return cls(
            f"context= has the field {field!r}, which {schema} does not declare (its fields: "
            f"{', '.join(declared) or 'none'}).{hint} Remove it, or declare it on {schema}.",
            schema=schema,
            field=field,
        )

    @classmethod
    def missing_field(cls, schema: str, field: str) -> ContextError:
        return cls(
            f"context= lacks {field!r}, a required field of {schema} (the agent's context_schema). Add it: "
            f"context={{..., {field!r}: ...}} or {schema}({field}=...).",
            schema=schema,
            field=field,
        )

    @classmethod
    def invalid_field(cls, schema: str, field: str | None, detail: str) -> ContextError:
        where = f"the field {field!r}" if field else "a field"
        return cls(
            f"context= does not fit {schema} (the agent's context_schema): {where}: {detail}. Fix the value.",
            schema=schema,
            field=field,
        )


class HookValueError(HookReturnError):
    """A hook returned a container of the right type holding something its contract does not allow (a message
    that is not one, a ``ModelResponse`` whose ``result`` is a str, a ``Command`` whose ``update`` is not a dict, a
    ``ToolMessage`` answering another call). Nothing of it reaches state: the thread keeps its last good checkpoint.
    """

    @classmethod
    def not_a_message(cls, middleware: str, hook: str, where: str, value: object) -> HookValueError:
        return cls(
            f"{middleware}.{hook} returned {where} = {_describe(value)}, which is not a message. Use message "
            f"objects (AIMessage, HumanMessage, ToolMessage, ... from langchain_core.messages), a ('role', 'content') "
            f"tuple or a {{'role': ..., 'content': ...}} dict.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def result_not_a_list(cls, middleware: str, hook: str, value: object) -> HookValueError:
        hint = " (a str would be read as one message per character)" if isinstance(value, str) else ""
        return cls(
            f"{middleware}.{hook} returned ModelResponse(result={_describe(value)}){hint}; result must be a list of "
            f"messages. Return ModelResponse(result=[AIMessage(...)]) or the AIMessage itself.",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def not_a_command(cls, middleware: str, hook: str, value: object) -> HookValueError:
        return cls(
            f"{middleware}.{hook} returned ExtendedModelResponse(command={_describe(value)}); command must be None "
            f"or a langgraph.types.Command(update={{...}}).",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def bad_update(cls, middleware: str, hook: str, value: object) -> HookValueError:
        return cls(
            f"{middleware}.{hook} returned Command(update={_describe(value)}); update must be a dict of state "
            f"updates (or a list of (key, value) pairs), e.g. Command(update={{'messages': [ToolMessage(...)]}}).",
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def foreign_tool_message(
        cls, middleware: str, hook: str, found: object, expected: str, tool: str
    ) -> HookValueError:
        return cls(
            f"{middleware}.{hook} returned a ToolMessage with tool_call_id={found!r} for the call {expected!r} of "
            f"tool {tool!r}: the model would see an answer to a call it never made and no answer to its own. Build "
            f"the message with tool_call_id=request.tool_call['id'].",
            middleware=middleware,
            hook=hook,
        )
