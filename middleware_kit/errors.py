"""The error tree of middleware_kit.

Every error a user can cause is a :class:`MiddlewareError` subclass that carries the culprit (``.middleware``) and the
hook involved (``.hook``), and whose message ends with how to fix it. The classes own their messages, so tests can
assert them and the engine stays free of string formatting.
"""

from __future__ import annotations

from collections.abc import Iterable

from langgraph.errors import InvalidUpdateError

__all__ = [
    "AgentArgumentError",
    "ConflictingUpdateError",
    "HookReturnError",
    "InvalidJumpError",
    "MiddlewareConfigError",
    "MiddlewareError",
    "StateSchemaConflictError",
    "UnknownStateKeyError",
    "UnknownToolError",
]


class MiddlewareError(Exception):
    """Base of every error middleware_kit raises because of how a middleware or an agent was written or called.

    Attributes:
        middleware: The name of the middleware at fault (``"create_agent"`` when the agent's own arguments are).
        hook: The hook involved (``"before_model"``, ``"wrap_tool_call"``, ...), or the setting (``"name"``,
            ``"state_schema"``) when the problem is found while the agent is built.
    """

    def __init__(self, message: str, *, middleware: str, hook: str) -> None:
        super().__init__(message)
        self.middleware = middleware
        self.hook = hook

    def __reduce__(self) -> tuple[object, tuple[str], dict[str, object]]:
        # Keep pickling (multiprocessing, LangGraph Server) working despite the keyword-only constructor.
        return (type(self)._rebuild, (str(self),), dict(self.__dict__))

    @classmethod
    def _rebuild(cls, message: str) -> MiddlewareError:
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        return err


class MiddlewareConfigError(MiddlewareError, ValueError):
    """The agent cannot work as configured: found by ``create_agent`` before anything runs wherever possible, else at
    first use (e.g. a human-in-the-loop review in an agent built without a checkpointer)."""


class HookReturnError(MiddlewareError, TypeError):
    """A hook returned a value of a type its contract does not allow."""

    @classmethod
    def for_node_hook(cls, middleware: str, hook: str, value: object) -> HookReturnError:
        return cls(
            f"{middleware}.{hook} returned {_describe(value)}; {hook} hooks must return None or a dict of state "
            f"updates. Return a dict such as {{'messages': [...]}} or None to change nothing."
            + _coroutine_hint(value, hook),
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def for_wrap_hook(cls, middleware: str, hook: str, value: object, expected: str) -> HookReturnError:
        hint = ' Did you forget "return handler(request)"?' if value is None else ""
        return cls(
            f"{middleware}.{hook} returned {_describe(value)}; it must return {expected}.{hint}"
            + _coroutine_hint(value, hook),
            middleware=middleware,
            hook=hook,
        )

    @classmethod
    def for_dynamic_prompt(cls, middleware: str, value: object) -> HookReturnError:
        return cls(
            f"The @dynamic_prompt function of {middleware} returned {_describe(value)}; it must return the system "
            f"prompt as a str or a SystemMessage (it runs as {middleware}.wrap_model_call)."
            + _coroutine_hint(value, "wrap_model_call"),
            middleware=middleware,
            hook="wrap_model_call",
        )

    @classmethod
    def for_request_hook(cls, middleware: str, hook: str, value: object) -> HookReturnError:
        return cls(
            f"{middleware}.{hook} returned {_describe(value)}; it must return a ModelRequest. Build one with "
            f"request.override(...) and return it (return the request unchanged to change nothing)."
            + _coroutine_hint(value, hook),
            middleware=middleware,
            hook=hook,
        )


class InvalidJumpError(MiddlewareError, ValueError):
    """A hook asked to jump somewhere it did not declare, or somewhere that does not exist."""


class UnknownStateKeyError(MiddlewareError, KeyError):
    """A hook returned a state key that no state schema of the agent declares."""

    def __init__(self, middleware: str, hook: str, keys: Iterable[str], declared: Iterable[str]) -> None:
        bad = sorted(keys)
        known = ", ".join(sorted(k for k in declared if k != "jump_to"))
        super().__init__(
            f"{middleware}.{hook} returned the state key(s) {bad} that no state schema declares (declared: {known}). "
            f"Declare them on a TypedDict extending AgentState and set it as the middleware's state_schema "
            f"(or pass state_schema= to the decorator or to create_agent).",
            middleware=middleware,
            hook=hook,
        )
        self.keys = tuple(bad)

    def __str__(self) -> str:  # KeyError would otherwise print the message with quotes around it
        return str(self.args[0])


class StateSchemaConflictError(MiddlewareConfigError):
    """Two state schemas declare the same field with different types or reducers."""


class ConflictingUpdateError(MiddlewareError, InvalidUpdateError):
    """One model call wrote a state key without a reducer twice (LangGraph's ``InvalidUpdateError``)."""


class UnknownToolError(MiddlewareError, ValueError):
    """A middleware offered the model a tool that the agent cannot execute."""


class AgentArgumentError(MiddlewareError, TypeError):
    """``create_agent`` was given an argument of the wrong kind (``.hook`` names the argument)."""

    def __init__(self, message: str, *, argument: str) -> None:
        super().__init__(message, middleware="create_agent", hook=argument)


def _describe(value: object) -> str:
    if value is None:
        return "None"
    return f"a {type(value).__module__}.{type(value).__qualname__} ({value!r:.80})"


def _coroutine_hint(value: object, hook: str) -> str:
    import inspect

    if inspect.iscoroutine(value):
        value.close()
        return (
            f" It returned an un-awaited coroutine: define the coroutine as the async twin 'a{hook}' "
            f"(or use 'async def' with the decorator), or await what you call inside it."
        )
    return ""
