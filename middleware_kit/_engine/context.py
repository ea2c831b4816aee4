"""The run's context checked once, when the run starts, against the agent's ``context_schema``.

Before any hook runs and before LangGraph writes anything to the thread, ``context=`` is checked: missing, of the
wrong type, with an unknown field or without a required one, it raises one error class,
:class:`~middleware_kit.errors.ContextError`, naming the schema and the field, with the fix. A dict is still
coerced to a dataclass or pydantic schema (as LangGraph does); a run without context gets the schema's defaults when
every field has one. An instance of the schema passes with one ``type()`` comparison.

Two runs come without context and are not the user's top-level call:

- **A resume** (``Command`` input) is checked like any run: LangGraph does not keep the context in the checkpoint, so
  a schema with required fields needs it again (a :class:`ContextError` saying so, instead of an ``AttributeError``
  in the first hook that reads it).
- **A subgraph run**: an agent that is a node of a parent graph, or is invoked inside a parent's node or tool, runs
  with the parent's context (LangGraph hands the parent's runtime down). It sees it through its own schema
  (:func:`context_from_parent`): as is when it is an instance of the schema (or, for a TypedDict schema, a mapping
  with its required keys); otherwise an instance of the schema filled from the parent context's fields of the same
  names, its defaults only for the fields the parent lacks (never the defaults in place of the parent's values: tenants
  would mix), a :class:`ContextError` when the parent lacks a required one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables.config import var_child_runnable_config
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel, ValidationError
from typing_extensions import is_typeddict  # also knows typing_extensions.TypedDict (typing's does not on 3.11)

from middleware_kit.errors import ContextError

__all__ = ["check_context", "checked_context", "context_from_parent"]


def check_context(schema: type[Any] | None, context: Any) -> Any:
    """The context to run with (a dict coerced to a dataclass/pydantic ``schema``); :class:`ContextError` if it does
    not fit."""
    if schema is None or type(context) is schema:
        return context
    name = schema.__qualname__
    if is_typeddict(schema):
        return _typed_dict(schema, name, context)
    fields = _fields(schema)
    if fields is not None:
        declared, required = fields
        allows_extra = issubclass(schema, BaseModel) and schema.model_config.get("extra") == "allow"
        return _class(schema, name, context, declared, required, allows_extra=allows_extra)
    if context is None:
        raise ContextError.missing(name, ["(the context object)"])
    if not isinstance(context, schema):
        raise ContextError.wrong_type(name, context)
    return context


def _fields(schema: type[Any]) -> tuple[list[str], list[str]] | None:
    """The declared and the required fields of a dataclass, pydantic or TypedDict schema (None for another class)."""
    if is_typeddict(schema):
        return list(getattr(schema, "__annotations__", {})), _required_keys(schema)
    if dataclasses.is_dataclass(schema):
        fields = [f for f in dataclasses.fields(schema) if f.init]
        required = [
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        return [f.name for f in fields], required
    if issubclass(schema, BaseModel):
        model_fields = schema.model_fields
        names = [*model_fields, *(f.alias for f in model_fields.values() if f.alias)]
        return names, [n for n, f in model_fields.items() if f.is_required()]
    return None


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
    schema: type[Any], name: str, context: Any, declared: list[str], required: list[str], *, allows_extra: bool
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
    if issubclass(schema, BaseModel):
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


def context_from_parent(schema: type[Any], parent: Any) -> Any:
    """The context a subgraph run gets from its parent's context ``parent`` (not None): None to let LangGraph pass
    ``parent`` as is (an instance of ``schema``; for a TypedDict schema, a mapping with its required keys), else an
    instance of ``schema`` filled from ``parent``'s fields (attributes or keys) of the same names. A
    :class:`ContextError` when ``parent`` lacks a required field or a value does not fit."""
    name = schema.__qualname__
    if type(parent) is schema or (not is_typeddict(schema) and isinstance(parent, schema)):
        return None
    fields = _fields(schema)
    if fields is None:
        raise ContextError.from_parent(name, parent, None, f"it is not a {name}")
    declared, required = fields
    values = {f: _field_of(parent, f) for f in declared if _has_field(parent, f)}
    for field in required:
        if field not in values:
            raise ContextError.from_parent(name, parent, field, f"it lacks {field!r}, a required field of {name}")
    if is_typeddict(schema) and isinstance(parent, Mapping):
        return None
    try:
        return check_context(schema, values)
    except ContextError as exc:
        raise ContextError.from_parent(name, parent, exc.field, str(exc)) from None


def _has_field(value: Any, field: str) -> bool:
    return field in value if isinstance(value, Mapping) else hasattr(value, field)


def _field_of(value: Any, field: str) -> Any:
    return value[field] if isinstance(value, Mapping) else getattr(value, field)


def _parent_context(config: Any) -> Any:
    """The context of the graph this run is nested in (None when there is none): LangGraph puts the parent's
    ``Runtime`` in the ``configurable`` of the config a subgraph or a call inside a node receives (found by its type,
    not by LangGraph's private key for it)."""
    for cfg in (config, var_child_runnable_config.get()):
        if isinstance(cfg, Mapping):
            for value in (cfg.get("configurable") or {}).values():
                if isinstance(value, Runtime):
                    return value.context
    return None


def checked_context(schema: type[Any] | None, input: Any, context: Any, config: Any) -> Any:
    """``context=`` of a run, checked: without it, a subgraph run takes its parent's (:func:`context_from_parent`)
    and a resume must still fit the schema (LangGraph does not keep the context in the checkpoint)."""
    if context is not None or schema is None:
        return check_context(schema, context)
    parent = _parent_context(config)
    if parent is not None:
        return context_from_parent(schema, parent)
    if isinstance(input, Command):
        fields = _fields(schema)
        required = fields[1] if fields is not None else ["(the context object)"]
        if required:
            raise ContextError.missing_on_resume(schema.__qualname__, required)
    return check_context(schema, None)

