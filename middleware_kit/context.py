"""The run's context checked once, when the run starts, against the agent's ``context_schema``.

Before any hook runs and before LangGraph writes anything to the thread, ``context=`` is checked: missing, of the
wrong type, with an unknown field or without a required one, it raises one error class,
:class:`~middleware_kit.errors.ContextError`, naming the schema and the field, with the fix. A dict is still
coerced to a dataclass or pydantic schema (as LangGraph does); a run without context gets the schema's defaults when
every field has one; a resume (``Command`` input) may come without context. An instance of the schema passes with one
``type()`` comparison.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from langgraph.types import Command
from pydantic import BaseModel, ValidationError
from typing_extensions import is_typeddict  # also knows typing_extensions.TypedDict (typing's does not on 3.11)

from middleware_kit.errors import ContextError

__all__ = ["check_context", "install_context_check"]


def check_context(schema: type[Any] | None, context: Any) -> Any:
    """The context to run with (a dict coerced to a dataclass/pydantic ``schema``); :class:`ContextError` if it does
    not fit."""
    if schema is None or type(context) is schema:
        return context
    name = schema.__qualname__
    if is_typeddict(schema):
        return _typed_dict(schema, name, context)
    if dataclasses.is_dataclass(schema):
        fields = [f for f in dataclasses.fields(schema) if f.init]
        required = [
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        return _class(schema, name, context, [f.name for f in fields], required, pydantic=False)
    if issubclass(schema, BaseModel):
        model_fields = schema.model_fields
        names = [*model_fields, *(f.alias for f in model_fields.values() if f.alias)]
        required = [n for n, f in model_fields.items() if f.is_required()]
        allows_extra = schema.model_config.get("extra") == "allow"
        return _class(schema, name, context, names, required, pydantic=True, allows_extra=allows_extra)
    if context is None:
        raise ContextError.missing(name, ["(the context object)"])
    if not isinstance(context, schema):
        raise ContextError.wrong_type(name, context)
    return context


def _typed_dict(schema: type[Any], name: str, context: Any) -> Any:
    required = _required_keys(schema)
    if context is None:
        if required:
            raise ContextError.missing(name, required)
        return {}
    if not isinstance(context, Mapping):
        raise ContextError.wrong_type(name, context)
    declared = list(getattr(schema, "__annotations__", {}))
    for key in context:
        if key not in declared:
            raise ContextError.unknown_field(name, str(key), declared)
    for key in required:
        if key not in context:
            raise ContextError.missing_field(name, key)
    return context


def _required_keys(schema: type[Any]) -> list[str]:
    """``__required_keys__``, except keys whose annotation is the string ``NotRequired[...]`` (a module with
    ``from __future__ import annotations``: the TypedDict cannot see through the string)."""
    annotations = getattr(schema, "__annotations__", {})
    required = []
    for key in sorted(getattr(schema, "__required_keys__", ())):
        text = annotations.get(key)
        text = getattr(text, "__forward_arg__", text)
        if isinstance(text, str) and text.split("[", 1)[0].rsplit(".", 1)[-1] == "NotRequired":
            continue
        required.append(key)
    return required


def _class(
    schema: type[Any],
    name: str,
    context: Any,
    declared: list[str],
    required: list[str],
    *,
    pydantic: bool,
    allows_extra: bool = False,
) -> Any:
    if context is None:
        if required:
            raise ContextError.missing(name, required)
        context = {}
    if isinstance(context, schema):
        return context
    if not isinstance(context, Mapping):
        raise ContextError.wrong_type(name, context)
    if not allows_extra:
        for key in context:
            if key not in declared:
                raise ContextError.unknown_field(name, str(key), [d for d in declared if not d.startswith("_")])
    for key in required:
        if key not in context:
            raise ContextError.missing_field(name, key)
    if pydantic:
        try:
            return schema.model_validate(dict(context))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or None
            raise ContextError.invalid_field(name, field, first["msg"]) from None
    try:
        return schema(**context)
    except (TypeError, ValueError) as exc:  # __post_init__ validation of the user's dataclass
        raise ContextError.invalid_field(name, None, str(exc)) from exc


_CHECKED: dict[type, type] = {}


def _checked(schema: type[Any] | None, input: Any, context: Any) -> Any:
    """A resume (``Command`` input) may come without context, as a reviewer's handler that never saw it would send
    it (LangGraph does not keep the context in the checkpoint); a context that is given is checked all the same."""
    if context is None and isinstance(input, Command):
        return None
    return check_context(schema, context)


def install_context_check(compiled: Any) -> None:
    """Check ``context=`` on every entry point of ``compiled`` (``invoke``/``ainvoke`` go through ``stream``/
    ``astream``) against its ``context_schema``. Swaps the class (once per base class, as the message guards do), so
    ``copy()``/``with_config()`` keep the check; a graph without a context schema is left alone."""
    if getattr(compiled, "context_schema", None) is None:
        return
    compiled.__class__ = _checked_class(type(compiled))


def _checked_class(base: type) -> type:
    if base in _CHECKED.values():
        return base
    if base in _CHECKED:
        return _CHECKED[base]

    class ContextChecked(base):  # type: ignore[misc]
        def stream(self, input: Any, config: Any = None, *, context: Any = None, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            return super().stream(input, config, context=_checked(self.context_schema, input, context), **kwargs)

        def astream(self, input: Any, config: Any = None, *, context: Any = None, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            return super().astream(input, config, context=_checked(self.context_schema, input, context), **kwargs)

    ContextChecked.__name__ = ContextChecked.__qualname__ = base.__name__
    _CHECKED[base] = ContextChecked
    return ContextChecked
