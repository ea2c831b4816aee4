"""Merging state schemas: ``AgentState``, ``create_agent(state_schema=...)`` and every middleware's ``state_schema``.

All schemas merge into one TypedDict (plus derived input and output schemas); a schema may replace AgentState's own
declaration of ``messages`` (a ``DeltaChannel``) or ``structured_response``. Two schemas that declare the same key
with different types or reducers is a build-time error naming both owners.
"""

from __future__ import annotations

import contextlib
import typing
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, Required, TypeVar, get_args, get_origin, get_type_hints

from langgraph.channels import BaseChannel, DeltaChannel
from typing_extensions import TypedDict, is_typeddict

from middleware_kit.errors import MiddlewareConfigError, StateSchemaConflictError
from middleware_kit.types import AgentState, OmitFromSchema

__all__ = ["MergedSchema", "merge_state_schemas"]


@dataclass(frozen=True, slots=True)
class MergedSchema:
    """The merged state schema of an agent and its derived input/output schemas."""

    state: type[Any]
    input: type[Any]
    output: type[Any]
    keys: frozenset[str]
    """Every declared key: a hook may return exactly these."""
    owners: dict[str, str]
    """Which schema owner declared each key first (for error messages and the plan)."""


def _strip_required(tp: Any) -> Any:
    while get_origin(tp) in (Required, NotRequired, typing.Required, typing.NotRequired):
        tp = get_args(tp)[0]
    return tp


def _normalize(tp: Any) -> Any:
    """TypeVars (``AgentState[ResponseT]``) become ``Any``; our ``OmitFromSchema`` markers move to the front.

    LangGraph takes only the *last* ``Annotated`` item as a reducer, so ``Annotated[list, operator.add,
    PrivateStateAttr]`` would silently become a plain overwrite channel. The markers are ours and their position
    means nothing, so they go first and the reducer stays last.
    """
    if isinstance(tp, TypeVar):
        return Any
    if get_origin(tp) is Annotated:
        base, *meta = get_args(tp)
        markers = [m for m in meta if isinstance(m, OmitFromSchema)]
        others = [m for m in meta if not isinstance(m, OmitFromSchema)]
        return Annotated[(_normalize(base), *markers, *others)]
    return tp


def _guarded(tp: Any, guard: Callable[[Any], Any]) -> Any:
    """``Annotated[base, ...]`` with ``guard`` applied to every write before the reducer LangGraph reads (a channel
    item wherever it stands, else the last item); a ``DeltaChannel`` gets each write of its batches guarded."""
    base, *meta = get_args(tp)
    at = next((i for i, item in enumerate(meta) if isinstance(item, BaseChannel)), len(meta) - 1)
    item = meta[at]
    if isinstance(item, DeltaChannel):
        batch = item.reducer

        def guarded_batch(state: Any, writes: Sequence[Any]) -> Any:
            return batch(state, [guard(write) for write in writes])

        meta[at] = DeltaChannel(guarded_batch, item.typ, snapshot_frequency=item.snapshot_frequency)
    elif callable(item) and not isinstance(item, (BaseChannel, type)):
        reducer = item

        def guarded(left: Any, right: Any) -> Any:
            return reducer(left, guard(right))

        meta[at] = guarded
    return Annotated[(base, *meta)]


def _omit(tp: Any) -> OmitFromSchema | None:
    if get_origin(tp) is Annotated:
        for meta in get_args(tp)[1:]:
            if isinstance(meta, OmitFromSchema):
                return meta
    return None


_HINTS: weakref.WeakKeyDictionary[type[Any], dict[str, Any]] = weakref.WeakKeyDictionary()
"""A schema class's normalized hints, worked out once per class: every middleware of an agent shares
``AgentState``, and a LangGraph Server factory builds an agent per run (``get_type_hints`` dominated the build)."""


def _schema_hints(owner: str, schema: type[Any]) -> dict[str, Any]:
    """``schema``'s keys and their declarations (callers must not mutate the result: it is shared). Only a schema
    that resolves is remembered; the errors name ``owner``, so they are raised anew for each."""
    try:
        cached = _HINTS.get(schema)
    except TypeError:  # not weak-referenceable
        cached = None
    if cached is not None:
        return cached
    if not (is_typeddict(schema) or isinstance(schema, type)):
        raise MiddlewareConfigError.schema_not_a_typeddict(owner, schema)
    try:
        hints = get_type_hints(schema, include_extras=True)
    except NameError as exc:
        raise MiddlewareConfigError.schema_unresolvable(owner, schema, exc) from exc
    if "messages" not in hints:
        raise MiddlewareConfigError.schema_without_messages(owner, schema)
    normalized = {key: _normalize(_strip_required(tp)) for key, tp in hints.items()}
    with contextlib.suppress(TypeError):
        _HINTS[schema] = normalized
    return normalized


_OVERRIDABLE = frozenset({"messages", "structured_response"})
"""``AgentState`` keys whose declaration is a default another schema may replace (``jump_to`` is the engine's)."""


def merge_state_schemas(
    sources: Sequence[tuple[str, type[Any]]],
    *,
    name: str = "Agent",
    messages_guard: Callable[[Any], Any] | None = None,
) -> MergedSchema:
    """Merge ``(owner, schema)`` pairs, first declaration first. ``AgentState`` is always included.

    ``messages`` and ``structured_response`` as ``AgentState`` declares them are defaults: a schema may declare
    them otherwise (``messages`` on a ``DeltaChannel``, a precise ``structured_response`` type) and its declaration
    wins; a schema that inherits the default then changes nothing. Two schemas declaring a key differently (other
    than the default) is an error naming both. ``messages_guard`` (the agent's message guards) is applied to every
    write to ``messages`` before its reducer, so the graph input is guarded before the first checkpoint.
    """
    defaults = _schema_hints("AgentState", AgentState)
    fields: dict[str, Any] = dict(defaults)
    owners = dict.fromkeys(defaults, "AgentState")
    origin: dict[str, type[Any]] = dict.fromkeys(defaults, AgentState)
    merged = {id(AgentState)}
    for owner, schema in sources:
        if id(schema) in merged:  # merging a schema again changes nothing (most middlewares share AgentState)
            continue
        merged.add(id(schema))
        for key, tp in _schema_hints(owner, schema).items():
            if key not in fields or (owners[key] == "AgentState" and key in _OVERRIDABLE):
                if key in fields and tp == defaults[key]:
                    continue
                fields[key], owners[key], origin[key] = tp, owner, schema
            elif fields[key] != tp and not (key in _OVERRIDABLE and tp == defaults[key]):
                raise StateSchemaConflictError(
                    f"State key {key!r} is declared twice with different types or reducers: "
                    f"{owners[key]} ({origin[key].__qualname__}) declares {fields[key]!r}, "
                    f"{owner} ({schema.__qualname__}) declares {tp!r}. Rename one of the keys, or declare it "
                    f"with the same type and reducer in both schemas.",
                    middleware=owner,
                    hook="state_schema",
                )
    if messages_guard is not None and get_origin(fields["messages"]) is Annotated:
        fields["messages"] = _guarded(fields["messages"], messages_guard)
    input_fields = {k: v for k, v in fields.items() if not ((o := _omit(v)) and o.input)}
    output_fields = {k: v for k, v in fields.items() if not ((o := _omit(v)) and o.output)}
    state = TypedDict(f"{name}State", fields, total=False)  # type: ignore[misc]
    return MergedSchema(
        state=state,
        input=TypedDict(f"{name}Input", input_fields, total=False),  # type: ignore[operator]
        output=TypedDict(f"{name}Output", output_fields, total=False),  # type: ignore[operator]
        keys=frozenset(fields),
        owners=owners,
    )
