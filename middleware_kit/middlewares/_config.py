"""Declared configuration: each bundled middleware states the rule of every parameter once, and one small layer
checks the arguments before the constructor's body runs (DESIGN §8.5).

A middleware declares its rules next to its constructor::

    class LoopGuardMiddleware(FrozenConfig, AgentMiddleware):
        __config__ = Config(
            max_identical_calls=INT_AT_LEAST_1,
            oscillation_cycles=INT_AT_LEAST_1.or_none(),
            detect_unknown_tools=BOOL,
        )

        def __init__(self, *, max_identical_calls: int = 2, oscillation_cycles: int | None = 2, ...) -> None:
            self.max_identical_calls = max_identical_calls  # already checked
            ...

- The constructor's signature stays the one declaration of names, order, defaults and types: it is what IDEs, mypy,
  ``inspect`` and LangChain's users see, so it is written out, not generated. ``__config__`` adds only what the
  signature cannot say: the rule each value must meet. A rule naming no parameter of the constructor fails at import.
- :class:`~middleware_kit.middlewares._frozen.FrozenConfig` runs the rules (defaults included, in the declared
  order), then the relations between parameters, then the body; so validation runs once per instance, when it is
  constructed (and again when ``replace`` or a setting before adoption constructs it anew), never when an agent is
  built.
- A rule is a frozen value: a test, the words that complete "``<param>`` must be ...", and optionally a message
  template of its own. The rules that repeat across middlewares (counts, fractions, choices, functions) are defined
  here, once; every error is a :class:`~middleware_kit.errors.MiddlewareConfigError` whose ``middleware`` is the
  middleware's name and whose ``hook`` is the parameter.

Dataclasses rather than pydantic: a pydantic model would restate every name, type and default beside the signature
that must stay literal, and its ``ValidationError`` texts would have to be rewritten into ours anyway.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from langchain_core.tools import BaseTool

from middleware_kit.errors import MiddlewareConfigError

__all__ = [
    "BOOL",
    "CALLABLE",
    "DEFAULT_TEMPLATE",
    "FINITE_AT_LEAST_0",
    "FRACTION",
    "INT_AT_LEAST_0",
    "INT_AT_LEAST_1",
    "NON_EMPTY_NAME",
    "NON_EMPTY_STR",
    "POSITIVE_NUMBER",
    "STR",
    "TOOLS",
    "WITHOUT_VALUE",
    "Config",
    "Relation",
    "Rule",
    "config_error",
    "instance_of",
    "is_int",
    "is_number",
    "one_of",
    "rule",
]

DEFAULT_TEMPLATE = "{owner}: {param} must be {expected}, got {value!r}."
"""The sentence of a broken rule: who, which parameter, what it must be, what it got."""
WITHOUT_VALUE = "{owner}: {param} must be {expected}."
"""The sentence of a broken rule whose value is not worth repeating (a long prompt)."""

Relation = Callable[[str, Mapping[str, Any]], None]
"""A rule between parameters: ``(owner, arguments)``; raises :func:`config_error` when broken."""


def config_error(owner: str, param: str, message: str) -> MiddlewareConfigError:
    """The error of a broken configuration rule: ``message`` (naming ``owner`` and ``param``) from ``owner``,
    ``hook=param``."""
    return MiddlewareConfigError(message, middleware=owner, hook=param)


@dataclass(frozen=True, slots=True)
class Rule:
    """What one parameter's value must be."""

    accepts: Callable[[Any], bool]
    """The test: true when the value is acceptable."""
    expected: str
    """The words that complete "``<param>`` must be ...", e.g. ``"an int >= 1"``."""
    template: str | None = None
    """A message of its own (``{owner}``, ``{param}``, ``{expected}``, ``{value!r}``), else the config's."""

    def or_none(self, expected: str | None = None, template: str | None = None) -> Rule:
        """This rule, or None (said as ``"<expected> or None"`` unless ``expected`` is given)."""
        test = self.accepts
        return Rule(lambda v: v is None or test(v), expected or f"{self.expected} or None", template or self.template)

    def saying(self, expected: str | None = None, template: str | None = None) -> Rule:
        """The same test, worded differently."""
        return Rule(self.accepts, expected if expected is not None else self.expected, template or self.template)

    def __or__(self, other: Rule) -> Rule:
        """Either rule (said as ``"<a> or <b>"``)."""
        first, second = self.accepts, other.accepts
        return Rule(lambda v: first(v) or second(v), f"{self.expected} or {other.expected}", self.template)

    def check(self, owner: str, param: str, value: Any, template: str = DEFAULT_TEMPLATE) -> None:
        """Raise the rule's :class:`MiddlewareConfigError` unless ``value`` is acceptable."""
        if not self.accepts(value):
            text = (self.template or template).format(owner=owner, param=param, expected=self.expected, value=value)
            raise config_error(owner, param, text)


def rule(accepts: Callable[[Any], bool], expected: str, template: str | None = None) -> Rule:
    """A rule of one's own (for a test that no shared rule states)."""
    return Rule(accepts, expected, template)


def is_int(value: object) -> bool:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: object) -> bool:
    return is_number(value) and math.isfinite(value)  # type: ignore[arg-type]


def one_of(*options: str) -> Rule:
    """One of ``options`` (said as ``'a', 'b' or 'c'``)."""
    said = [repr(o) for o in options]
    expected = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} or {said[-1]}"
    allowed = frozenset(options)
    return Rule(lambda v: isinstance(v, str) and v in allowed, expected)


def instance_of(*types: type, expected: str) -> Rule:
    """An instance of one of ``types``."""
    return Rule(lambda v: isinstance(v, types), expected)


BOOL = Rule(lambda v: isinstance(v, bool), "a bool")
INT_AT_LEAST_0 = Rule(lambda v: is_int(v) and v >= 0, "an int >= 0")
INT_AT_LEAST_1 = Rule(lambda v: is_int(v) and v >= 1, "an int >= 1")
POSITIVE_NUMBER = Rule(lambda v: is_number(v) and not v <= 0, "a positive number")
FINITE_AT_LEAST_0 = Rule(lambda v: _finite(v) and v >= 0, "a finite number >= 0")
FRACTION = Rule(lambda v: is_number(v) and 0 < v <= 1, "a number in (0, 1]")
STR = Rule(lambda v: isinstance(v, str), "a str")
NON_EMPTY_NAME = Rule(lambda v: isinstance(v, str) and bool(v), "a non-empty str")
NON_EMPTY_STR = Rule(lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string")
CALLABLE = Rule(callable, "a function")
TOOLS = Rule(
    lambda v: not isinstance(v, (str, BaseTool)) and isinstance(v, Sequence), "a list of tools or tool names"
)
"""A list of tools (``BaseTool``) or tool names; a single tool or name is refused (wrap it in a list)."""


@dataclass(frozen=True, slots=True, init=False)
class Config:
    """A middleware's declared configuration: a rule per parameter, then the relations between parameters, each
    checked in the order declared (the first broken one is the error)."""

    rules: Mapping[str, Rule]
    relations: tuple[Relation, ...] = ()
    template: str = DEFAULT_TEMPLATE
    owner: Callable[[Mapping[str, Any]], str] | None = field(default=None)
    """The middleware's name in the errors, from the arguments (default: the class name)."""

    def __init__(
        self,
        *,
        relations: tuple[Relation, ...] = (),
        template: str = DEFAULT_TEMPLATE,
        owner: Callable[[Mapping[str, Any]], str] | None = None,
        **rules: Rule,
    ) -> None:
        object.__setattr__(self, "rules", MappingProxyType(dict(rules)))
        object.__setattr__(self, "relations", tuple(relations))
        object.__setattr__(self, "template", template)
        object.__setattr__(self, "owner", owner)

    def validate(self, class_name: str, arguments: Mapping[str, Any]) -> None:
        """Check ``arguments`` (every parameter, defaults included); raise the first broken rule's error."""
        owner = self.owner(arguments) if self.owner is not None else class_name
        for param, declared in self.rules.items():
            declared.check(owner, param, arguments[param], self.template)
        for relation in self.relations:
            relation(owner, arguments)

    def unknown(self, parameters: set[str]) -> list[str]:
        """The declared rules that name no parameter (a mistake in the declaration)."""
        return sorted(set(self.rules) - parameters)
