"""The reviewer's reply, defined once: one pydantic ``TypeAdapter`` per pending review gives both the validation of
the resume value and the JSON schema clients see as ``Interrupt.response_schema``.

The adapter is assembled from the public decision TypedDicts of :mod:`.types` (closed: unknown keys are refused),
restricted to the decision types allowed for each reviewed call; an edit's arguments are checked against the
tool's argument schema. Pydantic's errors are translated into one :class:`InvalidResumeError` that names the call,
the allowed decisions and the fix, starting with LangChain's sentence where LangChain has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NotRequired, Union, cast, get_type_hints

from langchain_core.messages import ToolCall
from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    create_model,
    with_config,
)
from pydantic_core import core_schema
from typing_extensions import TypedDict

from middleware_kit.middlewares.human_in_the_loop.policy import describe_value
from middleware_kit.middlewares.human_in_the_loop.types import (
    DECISION_TYPEDDICTS,
    DECISION_TYPES,
    DecisionType,
    EditedAction,
    GrantRequest,
    InvalidResumeError,
)

__all__ = ["Gate", "Outcome", "ResumeFormat", "iso_utc"]

_LEGACY = {"accept": "approve", "ignore": "reject", "response": "respond"}


def iso_utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Gate:
    """One call under review."""

    call: ToolCall
    allowed: tuple[DecisionType, ...]
    description: str
    args_schema: dict[str, Any] | type[Any] | None
    on_timeout: Mapping[str, Any]
    """The decision this call gets when its approval expires."""
    late_timeout: float | None = None
    """For a call first decided in ``after_model`` (not recorded when the model answered): its ``timeout``, counted
    from now."""

    @property
    def label(self) -> str:
        return f"'{self.call['name']}' (call id {self.call['id']!r})"


@dataclass(frozen=True, slots=True)
class Outcome:
    """A decision for one gate, ready to apply."""

    gate: Gate
    kind: DecisionType
    call: ToolCall
    """The call to run (the reviewer's for ``edit``)."""
    message: str | None
    expired: bool = False
    reviewer: str | None = None
    """Who the resume value says decided (the decision's ``reviewer``, else the value's)."""
    grant: Mapping[str, Any] | None = None
    """The "always allow" grant the reviewer asked for with an approval (a ``GrantRequest``)."""
    granted_by: Any = None
    """The standing grant (a :class:`middleware_kit.ledger.grants.Grant`) that approved this call without review."""


@with_config(ConfigDict(extra="forbid"))
class ExpireRequest(TypedDict):
    """``{"expired": True}``: resolve an approval whose deadline has passed with its ``on_timeout`` decisions
    (what :func:`expire_pending_approvals` sends). Refused before the deadline."""

    expired: Literal[True]


# -- edited arguments -------------------------------------------------------------------------------------------------
_JSON_TYPES: Mapping[str, Any] = {
    "string": str, "integer": int, "number": float, "boolean": bool, "array": list[Any], "object": dict[str, Any],
    "null": type(None),
}
_BOUNDS = {
    "minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt", "exclusiveMaximum": "lt", "minLength": "min_length",
    "maxLength": "max_length", "pattern": "pattern", "multipleOf": "multiple_of", "minItems": "min_length",
    "maxItems": "max_length",
}


def _python_type(prop: Any) -> Any:
    """The Python type pydantic validates one JSON-schema property with (top-level keywords; nested → Any)."""
    if not isinstance(prop, Mapping):
        return Any
    if "enum" in prop and isinstance(prop["enum"], list) and prop["enum"]:
        return Literal[tuple(prop["enum"])]
    if "const" in prop:
        return Literal[prop["const"]]
    options = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(options, list) and options:
        return Union[tuple(_python_type(o) for o in options)]  # noqa: UP007 - built from a runtime tuple
    kind = prop.get("type")
    if isinstance(kind, list):
        return Union[tuple(_JSON_TYPES.get(k, Any) for k in kind)]  # noqa: UP007
    base = _JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any
    constraints = {_BOUNDS[k]: v for k, v in prop.items() if k in _BOUNDS and not isinstance(v, bool)}
    return Annotated[base, Field(**constraints)] if constraints else base


def json_schema_model(schema: Mapping[str, Any]) -> TypeAdapter[Any]:
    """A pydantic validator for a tool's argument JSON schema (its properties, ``required`` and
    ``additionalProperties``); what it does not express, the tool validates when it runs."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    fields: dict[str, Any] = {}
    for index, (name, prop) in enumerate(props.items()):
        default = ... if name in required else None
        fields[f"f{index}"] = (_python_type(prop), Field(default, alias=str(name)))
    closed = schema.get("additionalProperties") is False
    model = create_model("Args", __config__=ConfigDict(extra="forbid" if closed else "allow"), **fields)
    return TypeAdapter(model)


def _args_problems(args: Mapping[str, Any], schema: dict[str, Any] | type[Any]) -> list[str]:
    adapter = json_schema_model(schema) if isinstance(schema, dict) else TypeAdapter(schema)
    try:
        adapter.validate_python(dict(args))
    except ValidationError as exc:
        return [f"args.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
    return []


def _derive(typed: Any, type_name: str, **overrides: Any) -> Any:
    """``typed`` (a closed public TypedDict) with some field types replaced: the shape stays defined once."""
    hints = get_type_hints(typed, include_extras=True)
    fields = {
        key: overrides.get(key, hint) if key in typed.__required_keys__ else NotRequired[overrides.get(key, hint)]
        for key, hint in hints.items()
    }
    config = getattr(typed, "__pydantic_config__", None) or ConfigDict(extra="forbid")
    return with_config(config)(TypedDict(type_name, fields))  # type: ignore[operator]


# -- the format of one pending review ----------------------------------------------------------------------------------
def _decision_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, Mapping) else None
    return kind if isinstance(kind, str) else None


def _shape_tag(value: Any) -> str | None:
    if isinstance(value, (list, tuple)):
        return "list"
    return "by_id" if isinstance(value, Mapping) else None


def _top_tag(per_call: bool) -> Callable[[Any], str | None]:
    def tag(value: Any) -> str | None:
        if not isinstance(value, Mapping):
            return None
        if "expired" in value:
            return "expired"
        if "decisions" in value or not per_call:
            return "decisions"
        return "decision" if "type" in value else None

    return tag


class ResumeFormat:
    """Validation and JSON schema of the answer to one interrupt (``gates``: the calls it asks about)."""

    def __init__(
        self,
        *,
        owner: str,
        gates: Sequence[Gate],
        tools: Mapping[str, dict[str, Any]] | None,
        per_call: bool,
        deadline: float | None,
        clock: Callable[[], float],
        tenant: str | None = None,
    ) -> None:
        self.owner, self.gates, self.tools, self.per_call = owner, tuple(gates), tools, per_call
        self.deadline, self.clock, self.tenant = deadline, clock, tenant
        decisions = [self._decision_type(g) for g in self.gates]
        by_id = with_config(ConfigDict(extra="forbid"))(
            TypedDict("DecisionsById", {str(g.call["id"]): d for g, d in zip(self.gates, decisions, strict=True)})  # type: ignore[operator]
        )
        listed = tuple.__class_getitem__(tuple(decisions))
        response = with_config(ConfigDict(extra="forbid"))(
            TypedDict(  # type: ignore[operator]
                "HITLResponse",
                {"decisions": Annotated[
                    Union[Annotated[listed, Tag("list")], Annotated[by_id, Tag("by_id")]],  # noqa: UP007
                    Discriminator(_shape_tag),
                ], "reviewer": NotRequired[str]},
            )
        )
        options: list[Any] = [
            Annotated[response, Tag("decisions")],
            Annotated[ExpireRequest, AfterValidator(self._check_expired), Tag("expired")],
        ]
        if per_call:
            options.append(Annotated[decisions[0], Tag("decision")])
        self.type: Any = Annotated[Union[tuple(options)], Discriminator(_top_tag(per_call))]  # noqa: UP007
        """The reply's type: what :attr:`adapter` validates."""
        self.shown: Any = decisions[0] if per_call else self.type
        """What clients see as the interrupt's ``response_schema``: in per-call mode one decision (LangChain 1.5's
        schema; the batched form and ``{"expired": True}`` are accepted too, but not advertised)."""
        self.adapter: TypeAdapter[Any] = TypeAdapter(cast(Any, self.type))

    # -- building ---------------------------------------------------------------------------------------------------
    def _decision_type(self, gate: Gate) -> Any:
        options: list[Any] = []
        for kind in gate.allowed:
            typed: Any = DECISION_TYPEDDICTS[kind]
            if kind == "edit":
                edited = self._edited_action_type(gate)
                typed = Annotated[_derive(typed, "EditDecision", edited_action=edited),
                                  AfterValidator(self._edit_checker(gate))]
            elif kind == "approve":
                typed = Annotated[typed, AfterValidator(self._grant_checker(gate))]
            options.append(Annotated[typed, Tag(kind)])
        return Annotated[Union[tuple(options)], Discriminator(_decision_tag)]  # noqa: UP007

    def _edited_action_type(self, gate: Gate) -> Any:
        """``EditedAction`` for ``gate``. Per call (as LangChain 1.5): the tool is pinned and its own argument schema
        is shown as a definition named after the tool; batched: the arguments' schema inline."""
        name = gate.call["name"]
        tool_schema = (self.tools or {}).get(name)
        pinned = NotRequired[Literal[name]]
        if self.per_call and tool_schema is not None:
            return _derive(EditedAction, "EditedAction", name=pinned, args=_named_args(name, tool_schema))
        if self.per_call:
            return _derive(EditedAction, "EditedAction", name=pinned,
                           args=Annotated[dict[str, Any], WithJsonSchema(self._shown_args_schema(gate))])
        args = Annotated[dict[str, Any], WithJsonSchema(self._shown_args_schema(gate))]
        return _derive(EditedAction, "EditedAction", args=args)

    def _shown_args_schema(self, gate: Gate) -> dict[str, Any]:
        if isinstance(gate.args_schema, dict):
            return gate.args_schema
        if isinstance(gate.args_schema, type):
            return TypeAdapter(gate.args_schema).json_schema()
        return (self.tools or {}).get(gate.call["name"]) or {"type": "object"}

    def _edit_checker(self, gate: Gate) -> Callable[[Any], Any]:
        def check(decision: Any) -> Any:
            action = decision["edited_action"]
            name = action.get("name", gate.call["name"])
            schema: dict[str, Any] | type[Any] | None
            if name == gate.call["name"] and gate.args_schema is not None:
                schema = gate.args_schema
            elif self.tools is not None and name in self.tools:
                schema = self.tools[name]
            elif self.tools is not None and name != gate.call["name"]:
                raise ValueError(
                    f"the edit of {gate.label} calls the tool '{name}', which the model was not offered; the tools "
                    f"are: {', '.join(sorted(self.tools)) or 'none'}."
                )
            else:  # a tool this middleware did not see (added by a wrapper inside it): the tool node validates it
                schema = None
            problems = _args_problems(action["args"], schema) if schema is not None else []
            if problems:
                raise ValueError(
                    f"the edited arguments for {gate.label} do not match the arguments of '{name}': "
                    f"{'; '.join(problems[:5])}."
                )
            return decision

        return check

    def _grant_checker(self, gate: Gate) -> Callable[[Any], Any]:
        def check(decision: Any) -> Any:
            grant = decision.get("grant")
            if grant is not None and grant.get("scope") == "tenant" and self.tenant is None:
                raise ValueError(
                    f"the approval of {gate.label} asks for a tenant-wide grant, but the run has no tenant: give "
                    f"{self.owner}(..., tenant='tenant_id') (the key of runtime.context naming the tenant) and run "
                    f"with that context, or use 'scope': 'thread'."
                )
            return decision

        return check

    def _check_expired(self, value: Any) -> Any:
        if self.deadline is None:
            raise ValueError("nothing here can expire: no reviewed tool has a 'timeout' in interrupt_on.")
        now = self.clock()
        if now < self.deadline:
            raise ValueError(
                f"the approval has not expired yet: it expires at {iso_utc(self.deadline)} "
                f"({self.deadline - now:.0f}s from now). Send the reviewer's decisions instead."
            )
        return value

    def json_schema(self) -> dict[str, Any]:
        return self.adapter.json_schema()

    # -- validating ---------------------------------------------------------------------------------------------------
    def validate(self, value: Any) -> Any:
        """The validated resume value, or :class:`InvalidResumeError` naming what is wrong and how to fix it."""
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            errors = exc.errors()
            if self.per_call and errors and all(e["loc"][:1] == ("decision",) for e in errors):
                raise self._decision_validation_error(value, errors) from None
            raise self._translate(value, exc) from None

    def validate_in_pydantic(self, value: Any) -> Any:
        """:meth:`validate` as a pydantic validator function: pydantic would merge the line errors of a
        ``ValidationError`` raised here into its own, losing ours, so it travels inside a ``ValueError``."""
        try:
            return self.validate(value)
        except InvalidDecisionError as exc:
            raise CarriedError(exc) from None

    def _decision_validation_error(self, value: Any, errors: list[Any]) -> InvalidDecisionError:
        """A per-call answer that is not one of the call's decisions: pydantic's errors (as LangChain 1.5 raises
        them, located in the decision), under a title naming the middleware, the call and the fix."""
        gate = self.gates[0]
        title = (
            f"{self.owner}.after_model: the answer for {gate.label} (allowed: {_quote(gate.allowed)}; nothing was "
            f"saved: resume the same interrupt again with a corrected decision)"
        )
        details: list[Any] = [
            {"type": e["type"], "loc": tuple(e["loc"][1:]), "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e
                                                                                   else {})}
            for e in errors
        ]
        error = InvalidDecisionError.from_exception_data(title, details)
        error.middleware, error.hook = self.owner, "after_model"
        error.tool_name, error.tool_call_id, error.allowed_decisions = gate.call["name"], gate.call["id"], gate.allowed
        return error

    def outcomes(self, validated: Any) -> list[Outcome]:
        """One :class:`Outcome` per gate, from a value :meth:`validate` accepted."""
        if isinstance(validated, Mapping) and validated.get("expired") is True:
            return [expired_outcome(g) for g in self.gates]
        reviewer = None
        if isinstance(validated, Mapping) and "decisions" in validated:
            given, reviewer = validated["decisions"], validated.get("reviewer")
            chosen = [given[str(g.call["id"])] for g in self.gates] if isinstance(given, Mapping) else list(given)
        else:
            chosen = [validated]
        return [_outcome(g, d, reviewer) for g, d in zip(self.gates, chosen, strict=True)]

    # -- errors ------------------------------------------------------------------------------------------------------
    def _invalid(self, message: str, gate: Gate | None = None, sentence: str | None = None) -> InvalidResumeError:
        return InvalidResumeError(
            message,
            middleware=self.owner,
            tool_name=gate.call["name"] if gate else None,
            tool_call_id=gate.call["id"] if gate else None,
            allowed_decisions=gate.allowed if gate else (),
            langchain_sentence=sentence,
        )

    def _listing(self) -> str:
        return ", ".join(g.label for g in self.gates)

    def _translate(self, value: Any, exc: ValidationError) -> InvalidResumeError:
        errors = exc.errors()
        error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = list(error["loc"])
        kind, ctx = error["type"], error.get("ctx") or {}
        if not loc:  # the value as a whole
            return self._invalid(self._shape_hint(value))
        top = loc.pop(0)
        if top == "expired":
            return self._invalid(str(ctx.get("error", error["msg"])))
        gate: Gate | None = None
        if top == "decisions":
            if loc[:1] == ["reviewer"]:
                given_reviewer = describe_value(value["reviewer"])
                return self._invalid(f"'reviewer' (who decided) must be a str; got {given_reviewer}.")
            if loc[:1] != ["decisions"]:
                return self._invalid(f"the resume value has unknown key(s) "
                                     f"{sorted(set(value) - {'decisions', 'reviewer'})}; it takes 'decisions' (and "
                                     f"'reviewer': who decided, a str).")
            loc.pop(0)  # the 'decisions' key
            decisions = value.get("decisions")
            if not loc:
                return self._invalid(
                    f"'decisions' must be a list (in the order of action_requests) or a dict keyed by tool call id; "
                    f"got {describe_value(decisions)}."
                )
            shape = loc.pop(0)
            if shape == "list" and len(decisions) != len(self.gates):
                return self._invalid(
                    f"got {len(decisions)} decision(s) for {len(self.gates)} reviewed call(s) ({self._listing()}); "
                    f"give exactly one per call, in the order of action_requests (or a dict keyed by tool call id).",
                    sentence=f"Number of human decisions ({len(decisions)}) does not match number of hanging tool "
                    f"calls ({len(self.gates)}).",
                )
            if shape == "by_id":
                by_id = {str(g.call["id"]): g for g in self.gates}
                strangers = sorted(str(k) for k in decisions if str(k) not in by_id)
                if strangers:
                    return self._invalid(
                        f"unknown tool call id(s) {strangers} in 'decisions'; the reviewed calls are: "
                        f"{self._listing()}."
                    )
                missing = [g.label for i, g in by_id.items() if i not in decisions]
                if missing:
                    return self._invalid(f"no decision for {', '.join(missing)}; give one for every reviewed call.")
                gate = by_id[str(loc.pop(0))]
                decision = decisions[str(gate.call["id"])]
            else:
                index = int(loc.pop(0))
                gate, decision = self.gates[index], decisions[index]
        else:  # per-call: one decision
            gate, decision = self.gates[0], value
        return self._decision_error(gate, decision, loc, kind, ctx, error["msg"])

    def _shape_hint(self, value: Any) -> str:
        example = ", ".join("{'type': 'approve'}" for _ in self.gates)
        if self.per_call:
            gate = self.gates[0]
            return (
                f"the resume value for {gate.label} must be a dict: one decision such as {{'type': "
                f"'{gate.allowed[0]}'}}, or {{'decisions': [decision]}}; got {describe_value(value)}. Allowed types "
                f"for this tool: {_quote(gate.allowed)}."
            )
        return (
            f"the resume value must be a dict {{'decisions': [...]}} with one decision per reviewed call "
            f"({len(self.gates)}: {self._listing()}), in order, or {{'decisions': {{call_id: decision}}}}; got "
            f"{describe_value(value)}. Example: Command(resume={{'decisions': [{example}]}})."
        )

    def _decision_error(
        self, gate: Gate, decision: Any, loc: list[Any], kind: str, ctx: Mapping[str, Any], msg: str
    ) -> InvalidResumeError:
        allowed = _quote(gate.allowed)
        if (not loc and kind == "union_tag_not_found") or not isinstance(decision, Mapping):
            return self._invalid(
                f"the decision for {gate.label} must be a dict with a 'type', such as {{'type': '{gate.allowed[0]}'}};"
                f" got {describe_value(decision)}. Allowed types for this tool: {allowed}.",
                gate,
            )
        given = decision.get("type")
        if not loc and kind == "union_tag_invalid":
            legacy = f" ('{given}' is called '{_LEGACY[given]}' now.)" if given in _LEGACY else ""
            known = "" if given in DECISION_TYPES else f" '{given}' is not a decision type."
            return self._invalid(
                f"allowed for {gate.label}: {allowed}.{known}{legacy}",
                gate,
                sentence=f"Unexpected human decision: {decision}. Decision type '{given}' is not allowed "
                f"for tool '{gate.call['name']}'. Expected one of {list(gate.allowed)} based on the tool's "
                f"configuration.",
            )
        loc = loc[1:]  # the decision tag
        path = ".".join(str(p) for p in loc)
        if kind == "extra_forbidden":
            hint = " (LangChain renamed 'arguments' to 'args')" if loc[-1:] == ["arguments"] else ""
            nested: dict[str, Any] = {"edited_action": EditedAction, "grant": GrantRequest}
            inner = nested.get(str(loc[0])) if len(loc) > 1 else None
            where = f"'{loc[0]}'" if inner is not None else f"the '{given}' decision"
            owner = inner if inner is not None else DECISION_TYPEDDICTS[cast(DecisionType, given)]
            keys = sorted(owner.__annotations__)
            return self._invalid(
                f"{where} for {gate.label} has unexpected key(s) ['{loc[-1]}']{hint}; it takes {keys}.", gate
            )
        if kind == "value_error":
            return self._invalid(str(ctx.get("error", msg)), gate)
        if loc == ["edited_action", "name"] and kind == "literal_error":
            return self._invalid(
                f"in per-call mode an edit runs the reviewed tool: 'edited_action.name' of the edit of {gate.label} "
                f"must be '{gate.call['name']}' (or left out); got {describe_value(decision['edited_action']['name'])}"
                f". To run another tool, reject the call with a message saying which.",
                gate,
            )
        if given == "respond" and loc == ["message"]:
            return self._invalid(
                f"the 'respond' decision for {gate.label} needs a 'message' (str): it becomes the tool's result; "
                f"{path}: {msg}.",
                gate,
            )
        if loc == ["edited_action"]:
            return self._invalid(
                f"the 'edit' decision for {gate.label} needs 'edited_action': {{'name': ..., 'args': {{...}}}}; {msg}.",
                gate,
            )
        return self._invalid(f"the '{given}' decision for {gate.label} is invalid at '{path}': {msg}.", gate)


class InvalidDecisionError(ValidationError, InvalidResumeError):
    """A per-call answer that is not one of the reviewed call's decisions: pydantic's ``ValidationError`` (what
    LangChain 1.5 raises) and an :class:`InvalidResumeError`. Nothing was saved: the interrupt is still pending."""

    def __init__(self, *args: Any) -> None:  # built by ``from_exception_data``
        pass


class CarriedError(ValueError):
    """Carries an :class:`InvalidDecisionError` out of a pydantic validator function (see ``validate_in_pydantic``)."""

    def __init__(self, error: InvalidDecisionError) -> None:
        super().__init__(str(error))
        self.error = error


def _named_args(name: str, schema: Mapping[str, Any]) -> Any:
    """An arguments type shown as the definition ``name`` with the tool's own JSON schema; it takes any object (the
    arguments are checked against the tool's schema after)."""

    def core(_cls: type, _source: Any, _handler: Any) -> core_schema.CoreSchema:
        return core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema(), ref=f"{name}:args")

    def shown(_cls: type, _core: Any, _handler: Any) -> dict[str, Any]:
        return dict(schema)

    return type(name, (), {"__get_pydantic_core_schema__": classmethod(core),
                           "__get_pydantic_json_schema__": classmethod(shown)})


def _quote(items: Sequence[str]) -> str:
    return ", ".join(f"'{i}'" for i in items)


def _outcome(gate: Gate, decision: Mapping[str, Any], reviewer: str | None = None) -> Outcome:
    kind = cast(DecisionType, decision["type"])
    who = decision.get("reviewer", reviewer)
    if kind != "edit":
        return Outcome(gate, kind, gate.call, decision.get("message"), reviewer=who, grant=decision.get("grant"))
    action = decision["edited_action"]
    call = ToolCall(name=action.get("name", gate.call["name"]), args=dict(action["args"]), id=gate.call["id"],
                    type="tool_call")
    return Outcome(gate, "edit", call, None, reviewer=who)


def expired_outcome(gate: Gate) -> Outcome:
    """The ``on_timeout`` decision of ``gate``, marked expired."""
    decision = gate.on_timeout
    return Outcome(gate, cast(DecisionType, decision["type"]), gate.call, decision.get("message"), expired=True)
