"""``HumanInTheLoopMiddleware``: a human approves, edits, rejects or answers tool calls before they run.

API-compatible with LangChain v1's middleware of the same name (``interrupt_on``, ``InterruptOnConfig``, batched and
per-call modes, the ``action_requests``/``review_configs`` payload and the ``{"decisions": [...]}`` resume), built so
that approvals survive restarts and bad input. How it works:

1. **Gating is decided once, when the model answers.** The middleware's ``wrap_model_call`` evaluates the policies
   (``interrupt_on``, ``when``, ``description``: they receive the tool call, state and runtime) for the calls of the
   new ``AIMessage`` and records the outcome, with the JSON schemas of the offered tools, in a private state key that
   the checkpointer saves with the message. LangGraph does not restore ``runtime.context`` on resume (the reviewer is
   often someone else, with another context), so re-evaluating an "admins auto-approve" policy on resume could change
   which calls are under review; reading the recorded outcome cannot. A call the record does not cover (a wrapper
   outside this one added or changed it) is evaluated in ``after_model``, as LangChain does.
2. **The interrupt lives in ``after_model``**, declared ``may_interrupt=True``, so it has a graph node of its own:
   resuming re-runs that node only, never the model. Batched mode raises one interrupt for every reviewed call of the
   turn; ``interrupt_mode="per_call"`` one per call. No tool of the turn runs before every decision is in.
3. **Validation that loses nothing.** The resume value is validated *inside* LangGraph's ``interrupt()`` through its
   ``response_schema`` hook (LangGraph >= 1.2.15), before LangGraph records it. A malformed resume raises
   :class:`InvalidResumeError`, nothing is saved, the interrupt stays pending, and the next resume on the thread is
   validated afresh. (When a node raises *after* ``interrupt()`` returned, LangGraph has already saved the value: every
   later resume of that interrupt replays the bad one. That is the poisoned thread of LangChain's middleware, and why
   nothing is checked after ``interrupt()`` returns.) Edited arguments are checked against the tool's argument schema
   recorded in step 1 (or ``InterruptOnConfig["args_schema"]``), so a bad edit fails before anything runs.
4. **The model sees what ran.** An edited call replaces the original in the ``AIMessage`` (same id, same position;
   the tool node runs exactly what the history shows), the original request is kept in the message's
   ``response_metadata["human_review"]``, and the tool's ``ToolMessage`` starts with a note naming the tool and the
   arguments that ran and the ones that were requested. A rejected call keeps its place and gets an error
   ``ToolMessage`` telling the model not to retry it, so tool-call pairing holds.

``interrupt`` is a module global looked up at call time: tests may patch
``middleware_kit.middlewares.human_in_the_loop.interrupt``; a patched function is called with the payload only and
its return value is validated the same way.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Required, TypeAlias, cast

import langgraph.errors as _langgraph_errors
from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphInterrupt
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt
from pydantic import PlainValidator, TypeAdapter, ValidationError, WithJsonSchema
from typing_extensions import TypedDict

from middleware_kit.decorators import hook_config
from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.hooks import AsyncModelHandler, ModelHandler, ToolResult
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._stream import emit
from middleware_kit.pairing import last_ai_index, pending_tool_calls
from middleware_kit.types import (
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    ToolCallRequest,
)

__all__ = [
    "Action",
    "ActionRequest",
    "ApproveDecision",
    "Decision",
    "DecisionType",
    "EditDecision",
    "HITLRequest",
    "HITLResponse",
    "HumanInTheLoopMiddleware",
    "HumanInTheLoopState",
    "InterruptOnConfig",
    "InvalidResumeError",
    "RejectDecision",
    "RespondDecision",
    "ReviewConfig",
]

# -- the public types (LangChain v1's names and shapes) ----------------------------------------------------------

DecisionType: TypeAlias = Literal["approve", "edit", "reject", "respond"]
"""What a reviewer may decide for one call."""
_DECISION_TYPES: tuple[DecisionType, ...] = ("approve", "edit", "reject", "respond")
_DECISION_KEYS: Mapping[str, frozenset[str]] = {
    "approve": frozenset({"type"}),
    "edit": frozenset({"type", "edited_action"}),
    "reject": frozenset({"type", "message"}),
    "respond": frozenset({"type", "message"}),
}


class Action(TypedDict):
    """A tool call as a reviewer sees or edits it."""

    name: str
    """The tool's name."""
    args: dict[str, Any]
    """The arguments."""


class ActionRequest(TypedDict):
    """One call under review, in the interrupt's ``action_requests``."""

    name: str
    """The tool's name."""
    args: dict[str, Any]
    """The arguments the model asked for."""
    description: NotRequired[str]
    """What the reviewer is asked (``InterruptOnConfig["description"]`` or ``description_prefix`` + tool + args)."""
    id: NotRequired[str]
    """The tool call's id (ours): the key to resume by id, ``{"decisions": {id: decision}}``."""


class ReviewConfig(TypedDict):
    """How one call may be decided, in the interrupt's ``review_configs`` (same order as ``action_requests``)."""

    action_name: str
    """The tool's name."""
    allowed_decisions: list[DecisionType]
    """The decision types the reviewer may choose."""
    args_schema: NotRequired[dict[str, Any]]
    """JSON schema of the arguments, when ``InterruptOnConfig`` gives one and edits are allowed (for edit forms)."""


class HITLRequest(TypedDict):
    """The value of the interrupt: what a UI renders."""

    action_requests: list[ActionRequest]
    review_configs: list[ReviewConfig]


class ApproveDecision(TypedDict):
    """Run the call as the model asked."""

    type: Literal["approve"]


class EditDecision(TypedDict):
    """Run the reviewer's version of the call instead (validated against the tool's argument schema first)."""

    type: Literal["edit"]
    edited_action: Action
    """The call to run: ``{"name", "args"}`` (``name`` may be left out to keep the tool)."""


class RejectDecision(TypedDict):
    """Do not run the call; the model gets an error ``ToolMessage`` telling it not to retry."""

    type: Literal["reject"]
    message: NotRequired[str]
    """Why, for the model."""


class RespondDecision(TypedDict):
    """Do not run the call; the reviewer's message is the tool's result."""

    type: Literal["respond"]
    message: str


Decision: TypeAlias = ApproveDecision | EditDecision | RejectDecision | RespondDecision
"""One reviewer decision."""


class HITLResponse(TypedDict):
    """The resume value: one decision per reviewed call, in ``action_requests`` order, or keyed by tool-call id."""

    decisions: list[Decision] | dict[str, Decision]


DescriptionFactory: TypeAlias = Callable[[ToolCall, Any, Any], str]
"""``description(tool_call, state, runtime) -> str``."""
WhenPredicate: TypeAlias = Callable[..., bool]
"""``when(request: ToolCallRequest) -> bool`` (LangChain) or ``when(tool_call, state, runtime) -> bool``."""
InterruptOnPolicy: TypeAlias = Callable[[ToolCall, Any, Any], "bool | InterruptOnConfig | None"]
"""``interrupt_on(tool_call, state, runtime)``: True/config = review, False/None = run without review."""


class InterruptOnConfig(TypedDict, total=False):
    """How the calls of one tool are reviewed."""

    allowed_decisions: Required[list[DecisionType]]
    """The decision types a reviewer may choose: any of ``approve``, ``edit``, ``reject``, ``respond``."""
    description: str | DescriptionFactory
    """What the reviewer is asked: a string, or ``description(tool_call, state, runtime) -> str``."""
    when: WhenPredicate
    """Review only when this returns True. It receives the call, state and runtime (``runtime.context`` for
    per-tenant rules): ``when(request)`` with a ``ToolCallRequest`` (as LangChain), or ``when(tool_call, state,
    runtime)``. Evaluated once, when the model answers: the decision survives restarts."""
    args_schema: dict[str, Any] | type[Any]
    """The arguments' schema for edits: a JSON schema (shown to the reviewer in ``review_configs``) or a pydantic
    model, TypedDict or dataclass. Without it, edits are checked against the tool's own argument schema."""


class InvalidResumeError(MiddlewareError, ValueError):
    """The value a run was resumed with is not a valid answer to the pending review. Nothing was recorded: the
    interrupt is still pending, and the thread can be resumed again with a corrected value.

    Attributes:
        tool_name: The tool of the decision at fault (None when the problem is the value as a whole).
        tool_call_id: Its call id (None likewise).
        allowed_decisions: The decision types allowed for that call (empty when the value as a whole is at fault).
    """

    def __init__(
        self,
        message: str,
        *,
        middleware: str,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        allowed_decisions: Sequence[str] = (),
    ) -> None:
        super().__init__(
            f"{middleware}: {message} The interrupt is still pending: resume the thread again with a corrected value.",
            middleware=middleware,
            hook="after_model",
        )
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.allowed_decisions = tuple(allowed_decisions)


# -- state: the review decided when the model answered -------------------------------------------------------------

_PENDING = "human_in_the_loop_pending"


class _FrozenReview(TypedDict):
    allowed_decisions: list[DecisionType]
    description: str
    args_schema: dict[str, Any] | None


class _FrozenCall(TypedDict):
    name: str
    args: dict[str, Any]
    review: _FrozenReview | None
    """None: runs without review."""


class _Pending(TypedDict):
    calls: dict[str, _FrozenCall]
    """By tool-call id."""
    tools: dict[str, dict[str, Any]] | None
    """Argument JSON schema of every tool the model was offered (only when some call may be edited)."""


def _merge_pending(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Per middleware name: a value replaces that middleware's entry, None removes it."""
    merged = dict(left) if left else {}
    for name, value in (right or {}).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


class HumanInTheLoopState(AgentState):
    """State of :class:`HumanInTheLoopMiddleware`: one private key, checkpointed, never in input or output."""

    human_in_the_loop_pending: NotRequired[Annotated[dict[str, Any], PrivateStateAttr, _merge_pending]]
    """Per middleware name, how the calls of the newest ``AIMessage`` are reviewed (cleared once decided)."""


# -- helpers ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Gate:
    """One call under review."""

    call: ToolCall
    allowed: tuple[DecisionType, ...]
    description: str
    args_schema: dict[str, Any] | type[Any] | None

    @property
    def label(self) -> str:
        return f"'{self.call['name']}' (call id {self.call['id']!r})"


@dataclass(frozen=True, slots=True)
class _Outcome:
    """A validated decision for one gate."""

    gate: _Gate
    kind: DecisionType
    call: ToolCall
    """The call to run (the reviewer's for ``edit``)."""
    message: str | None


_REAL_INTERRUPT = interrupt
_HAS_RESPONSE_SCHEMA = "response_schema" in inspect.signature(interrupt).parameters
_mark_invalid_resume: Callable[[BaseException], None] | None = getattr(
    _langgraph_errors, "_mark_invalid_resume", None
)


def _describe_value(value: object) -> str:
    return f"a {type(value).__name__} ({value!r:.60})"


def _quote(items: Sequence[str]) -> str:
    return ", ".join(f"'{i}'" for i in items)


def _jsonable(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False, sort_keys=True)


def _tool_schema(tool: BaseTool) -> dict[str, Any]:
    """The argument schema the model was given (injected arguments excluded)."""
    try:
        params = convert_to_openai_tool(tool)["function"].get("parameters")
    except Exception:  # an exotic tool: accept any arguments rather than refuse every edit
        return {}
    return dict(params) if isinstance(params, dict) else {}


def _schema_json(schema: dict[str, Any] | type[Any] | None) -> dict[str, Any] | None:
    if schema is None or isinstance(schema, dict):
        return schema
    return TypeAdapter(schema).json_schema()


# -- a small JSON-schema checker (enough for tool argument schemas; unknown keywords are ignored) -------------------

_JSON_TYPES: Mapping[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, Mapping),
    "array": lambda v: isinstance(v, (list, tuple)),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


_BOUNDS: Mapping[str, Callable[[float, float], bool]] = {
    ">=": lambda v, b: v >= b,
    "<=": lambda v, b: v <= b,
    ">": lambda v, b: v > b,
    "<": lambda v, b: v < b,
}


def _resolve_ref(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#"):
        return {}
    node: Any = root
    for part in ref.lstrip("#").strip("/").split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return {}
        node = node[part]
    return node if isinstance(node, Mapping) else {}


def _json_schema_errors(
    value: Any, schema: Mapping[str, Any], *, root: Mapping[str, Any] | None = None, path: str = "args"
) -> list[str]:
    """Why ``value`` does not match ``schema`` (empty when it does). Checks the keywords tool schemas use: ``$ref``,
    ``type``, ``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``, ``items``,
    ``prefixItems``, ``anyOf``/``oneOf``/``allOf``, lengths, ``pattern`` and numeric bounds."""
    root = schema if root is None else root
    if not isinstance(schema, Mapping):
        return []
    errors: list[str] = []
    if "$ref" in schema:
        errors += _json_schema_errors(value, _resolve_ref(str(schema["$ref"]), root), root=root, path=path)
    if "allOf" in schema:
        for sub in schema["allOf"]:
            errors += _json_schema_errors(value, sub, root=root, path=path)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            matches = [not _json_schema_errors(value, sub, root=root, path=path) for sub in schema[key]]
            if key == "anyOf" and not any(matches):
                errors.append(f"{path}: {_jsonable(value)} matches none of the allowed shapes")
            if key == "oneOf" and sum(matches) != 1:
                errors.append(f"{path}: {_jsonable(value)} must match exactly one of the allowed shapes")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: must be {_jsonable(schema['const'])}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: must be one of {_jsonable(schema['enum'])}, not {_jsonable(value)}")
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_JSON_TYPES.get(t, lambda v: True)(value) for t in names):
            errors.append(f"{path}: must be of type {' or '.join(names)}, not {_jsonable(value)}")
            return errors
    if isinstance(value, Mapping):
        props: Mapping[str, Any] = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                errors.append(f"{path}.{name}: required, missing")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                errors += _json_schema_errors(item, props[name], root=root, path=f"{path}.{name}")
            elif extra is False:
                errors.append(f"{path}.{name}: unexpected (allowed: {', '.join(props) or 'none'})")
            elif isinstance(extra, Mapping):
                errors += _json_schema_errors(item, extra, root=root, path=f"{path}.{name}")
    elif isinstance(value, (list, tuple)):
        prefix = schema.get("prefixItems") or (schema["items"] if isinstance(schema.get("items"), list) else [])
        for i, item in enumerate(value):
            if i < len(prefix):
                errors += _json_schema_errors(item, prefix[i], root=root, path=f"{path}[{i}]")
            elif isinstance(schema.get("items"), Mapping):
                errors += _json_schema_errors(item, schema["items"], root=root, path=f"{path}[{i}]")
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: needs at least {schema['minItems']} item(s)")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: takes at most {schema['maxItems']} item(s)")
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: needs at least {schema['minLength']} character(s)")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: takes at most {schema['maxLength']} character(s)")
        if "pattern" in schema and re.search(str(schema["pattern"]), value) is None:
            errors.append(f"{path}: must match the pattern {schema['pattern']!r}")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, sign in (("minimum", ">="), ("maximum", "<="), ("exclusiveMinimum", ">"), ("exclusiveMaximum", "<")):
            bound = schema.get(key)
            if isinstance(bound, (int, float)) and not isinstance(bound, bool) and not _BOUNDS[sign](value, bound):
                errors.append(f"{path}: must be {sign} {bound}, not {value}")
        step = schema.get("multipleOf")
        if isinstance(step, (int, float)) and step and not math.isclose(value / step, round(value / step)):
            errors.append(f"{path}: must be a multiple of {step}")
    return errors


# -- the middleware --------------------------------------------------------------------------------------------------


class HumanInTheLoopMiddleware(AgentMiddleware[HumanInTheLoopState, Any]):
    """Pause before gated tool calls run, until a human approves, edits, rejects or answers each of them.

    Args:
        interrupt_on: Per tool name: ``True`` (review; every decision type allowed), ``False`` (never review), or an
            :class:`InterruptOnConfig`. Tools not listed run without review. Or a callable
            ``interrupt_on(tool_call, state, runtime) -> bool | InterruptOnConfig | None`` deciding per call.
        description_prefix: Starts the default description of a reviewed call (followed by the tool and its args).
        interrupt_mode: ``"batched"`` (one interrupt for every reviewed call of a model turn, resumed with
            ``{"decisions": [...]}``) or ``"per_call"`` (one interrupt per reviewed call, resumed with one decision;
            with several pending interrupts, ``Command(resume={interrupt.id: decision})``).
        name: The middleware's name (needed to list two instances in one agent).

    Needs a checkpointer (``create_agent(checkpointer=...)``; LangGraph Server supplies one). See
    ``docs/middlewares/human_in_the_loop.md``.
    """

    state_schema = HumanInTheLoopState

    def __init__(
        self,
        interrupt_on: Mapping[str, bool | InterruptOnConfig] | InterruptOnPolicy,
        *,
        description_prefix: str = "Tool execution requires approval",
        interrupt_mode: Literal["batched", "per_call"] = "batched",
        name: str | None = None,
    ) -> None:
        if name is not None:
            self.name = name
        if interrupt_mode not in ("batched", "per_call"):
            raise self._config_error(
                f"interrupt_mode={interrupt_mode!r}; it must be 'batched' (one interrupt per model turn) or "
                f"'per_call' (one interrupt per reviewed call).",
                "interrupt_mode",
            )
        if not isinstance(description_prefix, str):
            raise self._config_error(
                f"description_prefix must be a str; got {_describe_value(description_prefix)}.", "description_prefix"
            )
        self.description_prefix = description_prefix
        self.interrupt_mode: Literal["batched", "per_call"] = interrupt_mode
        self._policy: InterruptOnPolicy | None = None
        self.interrupt_on: dict[str, InterruptOnConfig] = {}
        """The resolved configuration per tool name (tools listed as False or absent are never reviewed)."""
        if callable(interrupt_on) and not isinstance(interrupt_on, Mapping):
            self._policy = interrupt_on
        elif isinstance(interrupt_on, Mapping):
            for tool_name, value in interrupt_on.items():
                config = self._resolve(value, f"interrupt_on[{tool_name!r}]")
                if config is not None:
                    self.interrupt_on[str(tool_name)] = config
        else:
            raise self._config_error(
                f"interrupt_on must be a dict of tool name -> bool | InterruptOnConfig, or a callable "
                f"(tool_call, state, runtime) -> bool | InterruptOnConfig | None; got {_describe_value(interrupt_on)}.",
                "interrupt_on",
            )

    # -- configuration -------------------------------------------------------------------------------------------
    def _config_error(self, message: str, hook: str) -> MiddlewareConfigError:
        return MiddlewareConfigError(f"{self.name}: {message}", middleware=self.name, hook=hook)

    def _resolve(self, value: object, where: str) -> InterruptOnConfig | None:
        """A validated config, or None for "run without review"."""
        if value is None or value is False:
            return None
        if value is True:
            return InterruptOnConfig(allowed_decisions=list(_DECISION_TYPES))
        if not isinstance(value, Mapping):
            raise self._config_error(
                f"{where} is {_describe_value(value)}; use True, False or an InterruptOnConfig dict such as "
                f"{{'allowed_decisions': ['approve', 'reject']}}.",
                "interrupt_on",
            )
        unknown = sorted(set(value) - (InterruptOnConfig.__required_keys__ | InterruptOnConfig.__optional_keys__))
        if unknown:
            raise self._config_error(
                f"{where} has unknown key(s) {unknown}; the keys are: allowed_decisions, description, when, "
                f"args_schema.",
                "interrupt_on",
            )
        allowed = value.get("allowed_decisions")
        if (
            not isinstance(allowed, (list, tuple))
            or not allowed
            or any(d not in _DECISION_TYPES for d in allowed)
        ):
            raise self._config_error(
                f"{where}['allowed_decisions'] is {allowed!r}; it must be a non-empty list of "
                f"{_quote(_DECISION_TYPES)} (use False to never review the tool).",
                "interrupt_on",
            )
        description = value.get("description")
        if description is not None and not (isinstance(description, str) or callable(description)):
            raise self._config_error(
                f"{where}['description'] must be a str or a callable (tool_call, state, runtime) -> str; got "
                f"{_describe_value(description)}.",
                "interrupt_on",
            )
        when = value.get("when")
        if when is not None and _when_arity(when) is None:
            raise self._config_error(
                f"{where}['when'] must be a callable taking a ToolCallRequest, or (tool_call, state, runtime); got "
                f"{_describe_value(when)}.",
                "interrupt_on",
            )
        schema = value.get("args_schema")
        if schema is not None and not isinstance(schema, (dict, type)):
            raise self._config_error(
                f"{where}['args_schema'] must be a JSON schema dict or a pydantic model/TypedDict/dataclass; got "
                f"{_describe_value(schema)}.",
                "interrupt_on",
            )
        config = cast(InterruptOnConfig, dict(value))
        config["allowed_decisions"] = list(dict.fromkeys(allowed))
        return config

    def _may_review(self, call: ToolCall) -> bool:
        return self._policy is not None or call["name"] in self.interrupt_on

    def _review_of(self, call: ToolCall, state: Any, runtime: Any) -> _FrozenReview | None:
        """Evaluate the policy for one call: None = run without review."""
        if self._policy is not None:
            config = self._resolve(self._policy(call, state, runtime), f"interrupt_on({call['name']!r} call)")
        else:
            config = self.interrupt_on.get(call["name"])
        if config is None:
            return None
        when = config.get("when")
        if when is not None:
            if _when_arity(when) == 1:
                request = ToolCallRequest(call, None, state, cast(Any, runtime))
                gated = when(request)
            else:
                gated = when(call, state, runtime)
            if not gated:
                return None
        description = config.get("description")
        if callable(description):
            text = description(call, state, runtime)
        elif isinstance(description, str):
            text = description
        else:
            text = f"{self.description_prefix}\n\nTool: {call['name']}\nArgs: {call['args']}"
        schema = config.get("args_schema")
        return _FrozenReview(
            allowed_decisions=list(config["allowed_decisions"]),
            description=str(text),
            args_schema=_schema_json(schema) if "edit" in config["allowed_decisions"] else None,
        )

    # -- wrap_model_call: decide the reviews while the context is at hand -------------------------------------------
    def _record(self, request: ModelRequest[Any], response: ModelResponse[Any]) -> Any:
        index = last_ai_index(response.result)
        if index < 0:
            return response
        message = response.result[index]
        tool_calls = message.tool_calls if isinstance(message, AIMessage) else []
        calls = [c for c in tool_calls if c.get("id") and self._may_review(c)]
        if not calls:
            return response
        state = dict(request.state) if isinstance(request.state, Mapping) else {}
        state["messages"] = [*state.get("messages", ()), *response.result]
        frozen: dict[str, _FrozenCall] = {}
        for call in calls:
            review = self._review_of(call, state, request.runtime)
            frozen[str(call["id"])] = _FrozenCall(name=call["name"], args=dict(call["args"]), review=review)
        editable = any(f["review"] is not None and "edit" in f["review"]["allowed_decisions"] for f in frozen.values())
        tools = {t.name: _tool_schema(t) for t in request.tools if isinstance(t, BaseTool)} if editable else None
        pending = _Pending(calls=frozen, tools=tools)
        return ExtendedModelResponse(model_response=response, command=Command(update={_PENDING: {self.name: pending}}))

    def wrap_model_call(self, request: ModelRequest[Any], handler: ModelHandler) -> Any:
        """Decide, for each call of the model's answer, whether it is reviewed (recorded in state)."""
        return self._record(request, handler(request))

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncModelHandler) -> Any:
        """Async twin of :meth:`wrap_model_call`."""
        return self._record(request, await handler(request))

    # -- after_model: ask, validate, apply ---------------------------------------------------------------------------
    def _gates(self, state: Any, runtime: Any) -> tuple[list[_Gate], dict[str, dict[str, Any]] | None, bool]:
        """The calls under review, the offered tools' schemas, and whether a recorded review must be cleared."""
        messages: Sequence[AnyMessage] = state.get("messages") or ()
        index = last_ai_index(messages)
        if index < 0 or not getattr(messages[index], "tool_calls", None):
            record = None
            calls: list[ToolCall] = []
        else:
            record = (state.get(_PENDING) or {}).get(self.name)
            calls = pending_tool_calls(messages)
        frozen: Mapping[str, _FrozenCall] = record["calls"] if record else {}
        gates = []
        for call in calls:
            known = frozen.get(str(call.get("id")))
            if known is not None and known["name"] == call["name"] and known["args"] == call["args"]:
                review = known["review"]
            else:  # added or changed after this middleware's wrap_model_call saw the answer: decide now
                review = self._review_of(call, state, runtime) if self._may_review(call) else None
            if review is None:
                continue
            config = self.interrupt_on.get(call["name"]) if self._policy is None else None
            static = config.get("args_schema") if config is not None else None
            schema = static if isinstance(static, type) else review["args_schema"]
            gates.append(_Gate(call, tuple(review["allowed_decisions"]), review["description"], schema))
        clear = (state.get(_PENDING) or {}).get(self.name) is not None
        return gates, (record["tools"] if record else None), clear

    def _review(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        gates, tools, clear = self._gates(state, runtime)
        cleared = {_PENDING: {self.name: None}} if clear else {}
        if not gates:
            return cleared or None
        if self.interrupt_mode == "batched":
            outcomes = self._ask(
                gates,
                lambda value: self._parse_batched(value, gates, tools),
                _batched_schema(gates, tools),
                runtime,
            )
        else:
            outcomes = []
            for gate in gates:
                outcomes += self._ask([gate], self._one_parser(gate, tools), _per_call_schema(gate, tools), runtime)
        self._emit(runtime, "decisions_received", gates, outcomes)
        return {**self._apply(state, outcomes), **cleared}

    @hook_config(may_interrupt=True)
    def after_model(self, state: HumanInTheLoopState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Interrupt for the gated calls of the newest ``AIMessage``; apply the decisions once they are valid."""
        return self._review(state, runtime)

    @hook_config(may_interrupt=True)
    async def aafter_model(
        self, state: HumanInTheLoopState, runtime: Runtime[Any] | None
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`after_model` (no I/O: the same code)."""
        return self._review(state, runtime)

    def _request(self, gates: Sequence[_Gate]) -> HITLRequest:
        actions: list[ActionRequest] = []
        configs: list[ReviewConfig] = []
        for gate in gates:
            actions.append(
                ActionRequest(
                    name=gate.call["name"],
                    args=dict(gate.call["args"]),
                    description=gate.description,
                    id=str(gate.call["id"]),
                )
            )
            config = ReviewConfig(action_name=gate.call["name"], allowed_decisions=list(gate.allowed))
            if gate.args_schema is not None and "edit" in gate.allowed:
                config["args_schema"] = _schema_json(gate.args_schema) or {}
            configs.append(config)
        return HITLRequest(action_requests=actions, review_configs=configs)

    def _ask(
        self,
        gates: Sequence[_Gate],
        parse: Callable[[Any], list[_Outcome]],
        schema: dict[str, Any],
        runtime: Any,
    ) -> list[_Outcome]:
        """Interrupt with the request for ``gates``; return the validated decisions. Validation runs inside
        LangGraph's ``interrupt()``, before the value is recorded, so a bad value leaves the interrupt pending."""
        ask = interrupt  # looked up now: tests patch the module global
        request = self._request(gates)
        try:
            if ask is not _REAL_INTERRUPT:
                return parse(ask(request))
            _require_checkpointer(self.name)
            if not _HAS_RESPONSE_SCHEMA:  # LangGraph < 1.2: validated after the value is recorded
                return parse(ask(request))
            validator = Annotated[Any, PlainValidator(parse), WithJsonSchema(schema)]
            try:
                return cast(list[_Outcome], ask(request, response_schema=cast(Any, validator)))
            except ValidationError as exc:
                raise _unwrap(exc) from None
        except GraphInterrupt:
            self._emit(runtime, "awaiting_approval", gates, None, request)
            raise

    def _emit(
        self,
        runtime: Any,
        event: str,
        gates: Sequence[_Gate],
        outcomes: Sequence[_Outcome] | None,
        request: HITLRequest | None = None,
    ) -> None:
        payload: dict[str, Any] = {"middleware": self.name, "event": event, "interrupt_mode": self.interrupt_mode}
        if request is not None:
            payload["action_requests"] = request["action_requests"]
            payload["review_configs"] = request["review_configs"]
        if outcomes is not None:
            payload["decisions"] = [
                {"id": o.gate.call["id"], "name": o.gate.call["name"], "type": o.kind} for o in outcomes
            ]
        emit(runtime, payload)

    # -- parsing the resume value ----------------------------------------------------------------------------------
    def _invalid(self, message: str, gate: _Gate | None = None) -> InvalidResumeError:
        return InvalidResumeError(
            message,
            middleware=self.name,
            tool_name=gate.call["name"] if gate else None,
            tool_call_id=gate.call["id"] if gate else None,
            allowed_decisions=gate.allowed if gate else (),
        )

    def _parse_batched(
        self, value: Any, gates: Sequence[_Gate], tools: Mapping[str, Any] | None
    ) -> list[_Outcome]:
        listing = ", ".join(g.label for g in gates)
        example = ", ".join("{'type': 'approve'}" for _ in gates)
        if not isinstance(value, Mapping) or "decisions" not in value:
            raise self._invalid(
                f"the resume value must be a dict {{'decisions': [...]}} with one decision per reviewed call "
                f"({len(gates)}: {listing}), in order, or {{'decisions': {{call_id: decision}}}}; got "
                f"{_describe_value(value)}. Example: Command(resume={{'decisions': [{example}]}})."
            )
        unknown = sorted(set(value) - {"decisions"})
        if unknown:
            raise self._invalid(f"the resume value has unknown key(s) {unknown}; it takes only 'decisions'.")
        decisions = value["decisions"]
        if isinstance(decisions, Mapping):
            by_id = {str(g.call["id"]): g for g in gates}
            strangers = sorted(str(k) for k in decisions if str(k) not in by_id)
            if strangers:
                raise self._invalid(
                    f"unknown tool call id(s) {strangers} in 'decisions'; the reviewed calls are: {listing}."
                )
            missing = [g.label for i, g in by_id.items() if i not in {str(k) for k in decisions}]
            if missing:
                raise self._invalid(f"no decision for {', '.join(missing)}; give one for every reviewed call.")
            given = {str(k): v for k, v in decisions.items()}
            return [self._decision(given[str(g.call["id"])], g, tools) for g in gates]
        if not isinstance(decisions, (list, tuple)):
            raise self._invalid(
                f"'decisions' must be a list (in the order of action_requests) or a dict keyed by tool call id; "
                f"got {_describe_value(decisions)}."
            )
        if len(decisions) != len(gates):
            raise self._invalid(
                f"got {len(decisions)} decision(s) for {len(gates)} reviewed call(s) ({listing}); give exactly one "
                f"per call, in the order of action_requests (or a dict keyed by tool call id)."
            )
        return [self._decision(d, g, tools) for d, g in zip(decisions, gates, strict=True)]

    def _one_parser(self, gate: _Gate, tools: Mapping[str, Any] | None) -> Callable[[Any], list[_Outcome]]:
        """Per-call mode: one decision, or ``{"decisions": [decision]}`` / ``{"decisions": {call_id: decision}}``."""

        def parse(value: Any) -> list[_Outcome]:
            if not isinstance(value, Mapping):
                raise self._invalid(
                    f"the resume value for {gate.label} must be a dict: one decision such as "
                    f"{{'type': '{gate.allowed[0]}'}}, or {{'decisions': [decision]}}; got {_describe_value(value)}. "
                    f"Allowed types for this tool: {_quote(gate.allowed)}.",
                    gate,
                )
            if "decisions" in value and "type" not in value:
                return self._parse_batched(value, [gate], tools)
            return [self._decision(value, gate, tools)]

        return parse

    def _decision(self, decision: Any, gate: _Gate, tools: Mapping[str, Any] | None) -> _Outcome:
        allowed = _quote(gate.allowed)
        if not isinstance(decision, Mapping):
            raise self._invalid(
                f"the decision for {gate.label} must be a dict such as {{'type': '{gate.allowed[0]}'}}; got "
                f"{_describe_value(decision)}. Allowed types for this tool: {allowed}.",
                gate,
            )
        kind = decision.get("type")
        if kind not in _DECISION_TYPES:
            legacy = {"accept": "approve", "ignore": "reject", "response": "respond"}
            hint = f" ('{kind}' is called '{legacy[kind]}' now.)" if kind in legacy else ""
            raise self._invalid(
                f"the decision for {gate.label} has type {kind!r}, which is not a decision type; allowed for this "
                f"tool: {allowed}.{hint}",
                gate,
            )
        if kind not in gate.allowed:
            raise self._invalid(
                f"decision type '{kind}' is not allowed for {gate.label}; allowed for this tool: {allowed}.", gate
            )
        extra = sorted(set(decision) - _DECISION_KEYS[kind])
        if extra:
            raise self._invalid(
                f"the '{kind}' decision for {gate.label} has unexpected key(s) {extra}; it takes "
                f"{sorted(_DECISION_KEYS[kind])}.",
                gate,
            )
        message = decision.get("message")
        if kind == "respond" and not isinstance(message, str):
            raise self._invalid(
                f"the 'respond' decision for {gate.label} needs a 'message' (str): it becomes the tool's result.", gate
            )
        if kind == "reject" and message is not None and not isinstance(message, str):
            raise self._invalid(
                f"the 'message' of the 'reject' decision for {gate.label} must be a str; got "
                f"{_describe_value(message)}.",
                gate,
            )
        if kind != "edit":
            return _Outcome(gate, kind, gate.call, message)
        return _Outcome(gate, "edit", self._edited_call(decision.get("edited_action"), gate, tools), None)

    def _edited_call(self, action: Any, gate: _Gate, tools: Mapping[str, Any] | None) -> ToolCall:
        if not isinstance(action, Mapping):
            raise self._invalid(
                f"the 'edit' decision for {gate.label} needs 'edited_action': {{'name': ..., 'args': {{...}}}}; "
                f"got {_describe_value(action)}.",
                gate,
            )
        unknown = sorted(set(action) - {"name", "args"})
        if unknown:
            hint = " (LangChain renamed 'arguments' to 'args')" if "arguments" in unknown else ""
            raise self._invalid(
                f"'edited_action' for {gate.label} has unknown key(s) {unknown}{hint}; it takes 'name' and 'args'.",
                gate,
            )
        name = action.get("name", gate.call["name"])
        args = action.get("args")
        if not isinstance(name, str) or not name:
            raise self._invalid(f"'edited_action.name' for {gate.label} must be a tool name; got {name!r}.", gate)
        if not isinstance(args, Mapping):
            raise self._invalid(
                f"'edited_action.args' for {gate.label} must be a dict of arguments; got {_describe_value(args)}.",
                gate,
            )
        if name == gate.call["name"] and gate.args_schema is not None:
            problems = _problems(dict(args), gate.args_schema)
        elif tools is not None and name in tools:
            problems = _json_schema_errors(dict(args), tools[name])
        elif tools is not None and name != gate.call["name"]:
            raise self._invalid(
                f"the edit of {gate.label} calls the tool '{name}', which the model was not offered; the tools "
                f"are: {', '.join(sorted(tools)) or 'none'}.",
                gate,
            )
        else:  # a tool this middleware did not see (added by a wrapper inside it): the tool node validates it
            problems = []
        if problems:
            raise self._invalid(
                f"the edited arguments for {gate.label} do not match the arguments of '{name}': "
                f"{'; '.join(problems[:5])}.",
                gate,
            )
        return ToolCall(name=name, args=dict(args), id=gate.call["id"], type="tool_call")

    # -- applying the decisions ---------------------------------------------------------------------------------
    def _apply(self, state: Any, outcomes: Sequence[_Outcome]) -> dict[str, Any]:
        messages = state["messages"]
        ai = cast(AIMessage, messages[last_ai_index(messages)])
        by_id = {o.gate.call["id"]: o for o in outcomes}
        calls: list[ToolCall] = []
        answers: list[ToolMessage] = []
        record: dict[str, Any] = {}
        edits: dict[str, ToolCall] = {}
        for call in ai.tool_calls:
            outcome = by_id.get(call["id"])
            if outcome is None:
                calls.append(call)
                continue
            entry: dict[str, Any] = {"decision": outcome.kind, "middleware": self.name}
            calls.append(outcome.call)
            if outcome.kind == "edit":
                entry["requested"] = {"name": call["name"], "args": call["args"]}
                edits[str(call["id"])] = outcome.call
            elif outcome.kind == "reject":
                answers.append(_rejection(call, outcome.message))
            elif outcome.kind == "respond":
                answers.append(
                    ToolMessage(
                        content=outcome.message or "", name=call["name"], tool_call_id=call["id"] or "",
                        status="success",
                    )
                )
            record[str(call["id"])] = entry
        metadata = dict(ai.response_metadata)
        metadata["human_review"] = {**(metadata.get("human_review") or {}), **record}
        update: dict[str, Any] = {"tool_calls": calls, "response_metadata": metadata}
        if edits and isinstance(ai.content, list):
            update["content"] = _rewrite_blocks(ai.content, edits)
        return {"messages": [ai.model_copy(update=update), *answers]}

    # -- after_tool: tell the model what ran --------------------------------------------------------------------
    def _annotate(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        call_id = request.tool_call.get("id")
        entry = _review_entry(request.state, call_id)
        if entry is None or entry.get("decision") != "edit" or entry.get("middleware") != self.name:
            return None
        requested = entry.get("requested") or {}
        note = (
            f"[A human reviewer edited this call before it ran. It ran as {request.tool_call['name']}"
            f"({_jsonable(request.tool_call['args'])}) instead of the requested {requested.get('name')}"
            f"({_jsonable(requested.get('args'))}). It has run: do not repeat the requested call.]\n"
        )
        if isinstance(result, ToolMessage):
            return _with_note(result, note)
        if isinstance(result, Command) and isinstance(result.update, dict):
            written = result.update.get("messages")
            if isinstance(written, list):
                patched = [
                    _with_note(m, note) if isinstance(m, ToolMessage) and m.tool_call_id == call_id else m
                    for m in written
                ]
                return Command(
                    graph=result.graph, update={**result.update, "messages": patched}, resume=result.resume,
                    goto=result.goto,
                )
        return None

    def after_tool(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        """Prefix the result of an edited call with what ran and what was requested."""
        return self._annotate(request, result)

    async def aafter_tool(self, request: ToolCallRequest, result: ToolResult) -> ToolResult | None:
        """Async twin of :meth:`after_tool`."""
        return self._annotate(request, result)


# -- module helpers --------------------------------------------------------------------------------------------------


def _when_arity(fn: Any) -> int | None:
    """1 for ``when(request)``, 3 for ``when(tool_call, state, runtime)``, None when it takes neither."""
    if not callable(fn):
        return None
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return 1
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) == 1:
        return 1
    if len(required) == 3 or (len(required) < 3 <= len(positional)):
        return 3
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 3 if len(required) <= 3 else None
    return None


def _require_checkpointer(name: str) -> None:
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # outside a graph: interrupt() itself says so
        return
    if configurable.get(CONFIG_KEY_CHECKPOINTER) is None:
        raise MiddlewareConfigError(
            f"{name} needs a checkpointer to pause for approval: the run must be saved while it waits for a human. "
            f"Pass one to create_agent(..., checkpointer=InMemorySaver()) (or a SqliteSaver/PostgresSaver to survive "
            f"restarts) and invoke with config={{'configurable': {{'thread_id': ...}}}}. LangGraph Server supplies its "
            f"own checkpointer at deploy time.",
            middleware=name,
            hook="after_model",
        )


def _unwrap(exc: ValidationError) -> BaseException:
    """Our error from inside pydantic's wrapper, still marked as an invalid resume value."""
    for detail in exc.errors():
        error = (detail.get("ctx") or {}).get("error")
        if isinstance(error, InvalidResumeError):
            if _mark_invalid_resume is not None:
                _mark_invalid_resume(error)
            return error
    return exc


def _problems(args: dict[str, Any], schema: dict[str, Any] | type[Any]) -> list[str]:
    if isinstance(schema, dict):
        return _json_schema_errors(args, schema)
    try:
        TypeAdapter(schema).validate_python(args)
    except ValidationError as exc:
        return [f"args.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
    return []


def _rejection(call: ToolCall, message: str | None) -> ToolMessage:
    head = f"A human reviewer rejected this call to '{call['name']}'; it was not executed."
    tail = (
        " Do not retry it (nor a variant of it) unless the reviewer says so: continue without it, or ask the user how "
        "to proceed."
    )
    content = f"{head} Reviewer's message: {message}{tail}" if message else head + tail
    return ToolMessage(content=content, name=call["name"], tool_call_id=call["id"] or "", status="error")


def _with_note(message: ToolMessage, note: str) -> ToolMessage:
    content = message.content
    if isinstance(content, str):
        return message.model_copy(update={"content": note + content})
    return message.model_copy(update={"content": [{"type": "text", "text": note}, *content]})


def _rewrite_blocks(content: list[Any], edits: Mapping[str, ToolCall]) -> list[Any]:
    """Keep provider content blocks (``tool_use``/``tool_call``) in step with edited calls."""
    blocks: list[Any] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") in ("tool_use", "tool_call") and block.get("id") in edits:
            call = edits[block["id"]]
            block = {**block, "name": call["name"], ("input" if block["type"] == "tool_use" else "args"): call["args"]}
        blocks.append(block)
    return blocks


def _review_entry(state: Any, call_id: Any) -> dict[str, Any] | None:
    """The review record of ``call_id`` on the ``AIMessage`` that made the call."""
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if not messages or call_id is None:
        return None
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            if not any(c.get("id") == call_id for c in message.tool_calls):
                return None
            entry = (message.response_metadata.get("human_review") or {}).get(call_id)
            return entry if isinstance(entry, dict) else None
    return None


# -- the JSON schemas of the resume value (LangGraph shows them to clients as Interrupt.response_schema) -------------

_STRING = {"type": "string"}


def _decision_schema(gate: _Gate, tools: Mapping[str, Any] | None) -> dict[str, Any]:
    options: list[dict[str, Any]] = []
    for kind in gate.allowed:
        props: dict[str, Any] = {"type": {"const": kind}}
        required = ["type"]
        if kind in ("reject", "respond"):
            props["message"] = _STRING
            if kind == "respond":
                required.append("message")
        if kind == "edit":
            args = _schema_json(gate.args_schema) or (tools or {}).get(gate.call["name"]) or {"type": "object"}
            props["edited_action"] = {
                "type": "object",
                "properties": {"name": _STRING, "args": args},
                "required": ["args"],
                "additionalProperties": False,
            }
            required.append("edited_action")
        options.append({"type": "object", "properties": props, "required": required, "additionalProperties": False})
    return options[0] if len(options) == 1 else {"anyOf": options}


def _batched_schema(gates: Sequence[_Gate], tools: Mapping[str, Any] | None) -> dict[str, Any]:
    per_call = [_decision_schema(g, tools) for g in gates]
    return {
        "type": "object",
        "properties": {
            "decisions": {
                "anyOf": [
                    {"type": "array", "prefixItems": per_call, "minItems": len(gates), "maxItems": len(gates)},
                    {
                        "type": "object",
                        "properties": {str(g.call["id"]): s for g, s in zip(gates, per_call, strict=True)},
                        "required": [str(g.call["id"]) for g in gates],
                        "additionalProperties": False,
                    },
                ]
            }
        },
        "required": ["decisions"],
        "additionalProperties": False,
    }


def _per_call_schema(gate: _Gate, tools: Mapping[str, Any] | None) -> dict[str, Any]:
    return {"anyOf": [_decision_schema(gate, tools), _batched_schema([gate], tools)]}
