"""Who must approve: resolving ``interrupt_on`` (static or a callable), ``when``, descriptions and timeouts.

The outcome of the policy for one call is a :class:`Review` (plain JSON, so the checkpointer can save it with the
model's answer): the policy runs once, when the model answers, and a resume reads the recorded outcome instead of
re-running the policy with a context LangGraph does not restore.
"""

from __future__ import annotations

import difflib
import inspect
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, NotRequired, cast

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolRuntime
from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict

from middleware_kit.errors import MiddlewareConfigError, UnknownToolWarning
from middleware_kit.middlewares.human_in_the_loop.types import (
    DECISION_TYPES,
    Decision,
    DecisionType,
    InterruptOnConfig,
    InterruptOnPolicy,
    RejectDecision,
    RespondDecision,
)
from middleware_kit.types import ToolCallRequest

__all__ = ["Policy", "Review", "check_options", "describe_value", "is_template", "tool_names", "tool_schema"]

_CONFIG_KEYS = frozenset(InterruptOnConfig.__required_keys__ | InterruptOnConfig.__optional_keys__)
_ON_TIMEOUT: TypeAdapter[Any] = TypeAdapter(RejectDecision | RespondDecision)


class Review(TypedDict):
    """How one call is reviewed, as recorded in state."""

    allowed_decisions: list[DecisionType]
    description: str
    args_schema: dict[str, Any] | None
    timeout: NotRequired[float]
    """Seconds the reviewer has, counted from the model's answer."""
    on_timeout: NotRequired[dict[str, Any]]
    """The decision an expired approval becomes."""


def describe_value(value: object) -> str:
    return f"a {type(value).__name__} ({value!r:.60})"


_EDIT_FIELDS = {"name": "", "args": "", "requested_name": "", "requested_args": ""}
_TEMPLATE_FIELDS = tuple(f"{{{field}}}" for field in _EDIT_FIELDS)


def is_template(text: str) -> bool:
    """An ``edit_notice`` using our fields (formatted and put before the answer), not LangChain's plain text."""
    return any(field in text for field in _TEMPLATE_FIELDS)


def _option_error(owner: str, message: str, option: str) -> MiddlewareConfigError:
    return MiddlewareConfigError(f"{owner}: {message}", middleware=owner, hook=option)


def check_options(
    owner: str, *, interrupt_mode: object, description_prefix: object, edit_notice: object, interrupt: object,
    clock: object,
) -> None:
    """The constructor's options other than ``interrupt_on`` (which :class:`Policy` checks), each error naming the
    middleware ``owner`` and the option."""
    if interrupt_mode not in ("batched", "per_call"):
        raise MiddlewareConfigError(  # LangChain 1.5's sentence first
            f"`interrupt_mode` must be 'batched' or 'per_call', got {interrupt_mode!r}. ({owner}: "
            f"'batched' raises one interrupt per model turn, 'per_call' one per reviewed call.)",
            middleware=owner,
            hook="interrupt_mode",
        )
    if not isinstance(description_prefix, str):
        raise _option_error(
            owner, f"description_prefix must be a str; got {describe_value(description_prefix)}.", "description_prefix"
        )
    if edit_notice is not None and not isinstance(edit_notice, (bool, str)):
        raise _option_error(
            owner, f"edit_notice must be a str, None, True or False; got {describe_value(edit_notice)}.", "edit_notice"
        )
    if isinstance(edit_notice, str) and is_template(edit_notice):
        try:
            edit_notice.format(**_EDIT_FIELDS)
        except (KeyError, IndexError, ValueError) as exc:
            raise _option_error(
                owner,
                f"edit_notice={edit_notice!r} is not a valid template ({exc!r}); it may use {{name}}, {{args}}, "
                f"{{requested_name}} and {{requested_args}} (double other braces).",
                "edit_notice",
            ) from None
    for option, value in (("interrupt", interrupt), ("clock", clock)):
        if value is not None and not callable(value):
            raise _option_error(owner, f"{option} must be callable; got {describe_value(value)}.", option)


def tool_names(owner: str, value: object, option: str) -> tuple[str, ...]:
    """``value``, a list of tool names, as a tuple (a single str is refused: it is not a list of names)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise _option_error(owner, f"{option} must be a list of tool names; got {describe_value(value)}.", option)
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise _option_error(owner, f"{option} holds {describe_value(name)}; list tool names (str).", option)
    return names


def _quote(items: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"'{i}'" for i in items)


def tool_schema(tool: BaseTool) -> dict[str, Any]:
    """The argument JSON schema the model was given (injected arguments excluded)."""
    try:
        function = convert_to_openai_tool(tool)["function"]
    except Exception:  # an exotic tool: accept any arguments rather than refuse every edit
        return {}
    params = function.get("parameters")
    schema = dict(params) if isinstance(params, dict) else {}
    if schema and function.get("description") and "description" not in schema:
        schema["description"] = function["description"]  # what the tool does, for a reviewer's edit form
    return schema


def schema_json(schema: dict[str, Any] | type[Any] | None) -> dict[str, Any] | None:
    if schema is None or isinstance(schema, dict):
        return schema
    return TypeAdapter(schema).json_schema()


def when_arity(fn: Any) -> int | None:
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


def _tool_runtime(
    call: ToolCall, state: Any, runtime: Any, run_config: Callable[[], Any]
) -> ToolRuntime[Any, Any]:
    """The ``ToolRuntime`` a LangChain-style ``when(request)`` reads (``request.runtime.context`` etc.)."""
    try:
        config: Any = run_config()
    except RuntimeError:  # a hook called directly, outside a graph
        config = {}
    return ToolRuntime(
        state=state,
        context=getattr(runtime, "context", None),
        config=config,
        stream_writer=getattr(runtime, "stream_writer", None) or (lambda _chunk: None),
        tool_call_id=call.get("id"),
        store=getattr(runtime, "store", None),
    )


def _caller_stacklevel() -> int:
    """The ``stacklevel`` pointing a warning at the first frame outside middleware_kit (the user's ``create_agent``
    call, or the library's that called it)."""
    level, frame = 2, sys._getframe(2)  # from our caller's caller
    while frame is not None and frame.f_globals.get("__name__", "").startswith("middleware_kit."):
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    return level


def _typo_of(name: str, tools: Sequence[str]) -> str | None:
    """The tool ``name`` is most likely a misspelling of (difflib's closest), if it is within a typo of it: at most
    two edits (one for names under five characters), case and ``-``/``_`` aside."""
    for match in difflib.get_close_matches(name, list(tools), n=3, cutoff=0.5):
        limit = 1 if min(len(name), len(match)) < 5 else 2
        if _edits(_folded(name), _folded(match)) <= limit:
            return match
    return None


def _folded(name: str) -> str:
    return name.lower().replace("-", "_")


def _edits(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and adjacent transpositions turning ``a`` into ``b`` (OSA distance)."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


class Policy:
    """The validated ``interrupt_on`` of one middleware (immutable once built)."""

    __slots__ = ("_owner", "_run_config", "description_prefix", "dynamic", "static")

    def __init__(
        self, owner: str, interrupt_on: object, description_prefix: str, run_config: Callable[[], Any]
    ) -> None:
        """``run_config()``: the run's ``RunnableConfig`` (raises ``RuntimeError`` outside a graph)."""
        self._owner = owner
        self._run_config = run_config
        self.description_prefix = description_prefix
        self.dynamic: InterruptOnPolicy | None = None
        self.static: dict[str, InterruptOnConfig] = {}
        if callable(interrupt_on) and not isinstance(interrupt_on, Mapping):
            self.dynamic = cast(InterruptOnPolicy, interrupt_on)
        elif isinstance(interrupt_on, Mapping):
            for tool_name, value in interrupt_on.items():
                config = self.resolve(value, f"interrupt_on[{tool_name!r}]")
                if config is not None:
                    self.static[str(tool_name)] = config
        else:
            raise self.error(
                f"interrupt_on must be a dict of tool name -> bool | InterruptOnConfig, or a callable "
                f"(tool_call, state, runtime) -> bool | InterruptOnConfig | None; got {describe_value(interrupt_on)}."
            )

    def error(self, message: str) -> MiddlewareConfigError:
        return MiddlewareConfigError(f"{self._owner}: {message}", middleware=self._owner, hook="interrupt_on")

    def resolve(self, value: object, where: str) -> InterruptOnConfig | None:
        """A validated config, or None for "run without review"."""
        if value is None or value is False:
            return None
        if value is True:
            return InterruptOnConfig(allowed_decisions=list(DECISION_TYPES))
        if not isinstance(value, Mapping):
            raise self.error(
                f"{where} is {describe_value(value)}; use True, False or an InterruptOnConfig dict such as "
                f"{{'allowed_decisions': ['approve', 'reject']}}."
            )
        unknown = sorted(set(value) - _CONFIG_KEYS)
        if unknown:
            raise self.error(f"{where} has unknown key(s) {unknown}; the keys are: {', '.join(sorted(_CONFIG_KEYS))}.")
        allowed = value.get("allowed_decisions")
        if not isinstance(allowed, (list, tuple)) or not allowed or any(d not in DECISION_TYPES for d in allowed):
            raise self.error(
                f"{where}['allowed_decisions'] is {allowed!r}; it must be a non-empty list of "
                f"{_quote(DECISION_TYPES)} (use False to never review the tool)."
            )
        description = value.get("description")
        if description is not None and not (isinstance(description, str) or callable(description)):
            raise self.error(
                f"{where}['description'] must be a str or a callable (tool_call, state, runtime) -> str; got "
                f"{describe_value(description)}."
            )
        when = value.get("when")
        if when is not None and when_arity(when) is None:
            raise self.error(
                f"{where}['when'] must be a callable taking a ToolCallRequest, or (tool_call, state, runtime); got "
                f"{describe_value(when)}."
            )
        schema = value.get("args_schema")
        if schema is not None and not isinstance(schema, (dict, type)):
            raise self.error(
                f"{where}['args_schema'] must be a JSON schema dict or a pydantic model/TypedDict/dataclass; got "
                f"{describe_value(schema)}."
            )
        config = cast(InterruptOnConfig, dict(value))
        config["allowed_decisions"] = list(dict.fromkeys(allowed))
        if "timeout" in value:
            config["timeout"] = self._timeout(value["timeout"], where)
        if "on_timeout" in value:
            if "timeout" not in value:
                raise self.error(
                    f"{where} has 'on_timeout' but no 'timeout'; add 'timeout': timedelta(...) or seconds."
                )
            config["on_timeout"] = cast(Any, self.on_timeout(value["on_timeout"], where))
        return config

    def _timeout(self, value: object, where: str) -> float:
        seconds = value.total_seconds() if isinstance(value, timedelta) else value
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise self.error(
                f"{where}['timeout'] must be a positive timedelta or number of seconds; got {describe_value(value)}."
            )
        return float(seconds)

    def on_timeout(self, value: object, where: str) -> Decision:
        if value == "reject" or value == "approve":
            return cast(Decision, {"type": value})
        if isinstance(value, Mapping) and value.get("type") == "approve" and set(value) == {"type"}:
            return cast(Decision, {"type": "approve"})
        try:
            return cast(Decision, _ON_TIMEOUT.validate_python(value))
        except ValidationError:
            raise self.error(
                f"{where}['on_timeout'] must be 'reject', 'approve', {{'type': 'reject', 'message': str}} or "
                f"{{'type': 'respond', 'message': str}}; got {describe_value(value)}."
            ) from None

    def check_tools(self, agent_tools: Sequence[str], dynamic_tools: Sequence[str], owner_class: str) -> None:
        """At build: each tool the static policy reviews is one the agent has, or is declared in ``dynamic_tools``
        (added per call by a middleware). A name within a typo of one of the agent's tools is an error (that tool
        would run unreviewed); a name like none of them is a warning (a policy shared with an agent that has the
        tool, as deepagents' subagents inherit their parent's ``interrupt_on``, never applies here)."""
        known = {*agent_tools, *dynamic_tools}
        for tool_name in self.static:
            if tool_name in known:
                continue
            declare = f"{owner_class}(..., dynamic_tools=[{tool_name!r}])"
            typo = _typo_of(tool_name, agent_tools)
            if typo is not None:
                raise MiddlewareConfigError.unknown_tool_named(
                    self._owner, "interrupt_on", tool_name, typo, agent_tools, declare
                )
            warnings.warn(
                UnknownToolWarning.for_tool(self._owner, "interrupt_on", tool_name, agent_tools, declare),
                stacklevel=_caller_stacklevel(),
            )

    def may_review(self, call: ToolCall) -> bool:
        return self.dynamic is not None or call["name"] in self.static

    def static_args_schema(self, name: str) -> type[Any] | None:
        """A configured pydantic/TypedDict args schema (kept as a type: validation uses it directly)."""
        config = self.static.get(name) if self.dynamic is None else None
        schema = config.get("args_schema") if config is not None else None
        return schema if isinstance(schema, type) else None

    def review_of(self, call: ToolCall, state: Any, runtime: Any) -> Review | None:
        """Evaluate the policy for one call: None = run without review."""
        if self.dynamic is not None:
            config = self.resolve(self.dynamic(call, state, runtime), f"interrupt_on({call['name']!r} call)")
        else:
            config = self.static.get(call["name"])
        if config is None:
            return None
        when: Callable[..., Any] | None = config.get("when")
        if when is not None:
            if when_arity(when) == 1:
                gated = when(ToolCallRequest(call, None, state, _tool_runtime(call, state, runtime, self._run_config)))
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
        allowed = list(config["allowed_decisions"])
        review = Review(
            allowed_decisions=allowed,
            description=str(text),
            args_schema=schema_json(config.get("args_schema")) if "edit" in allowed else None,
        )
        if "timeout" in config:
            review["timeout"] = float(cast(float, config["timeout"]))
            review["on_timeout"] = dict(cast(Mapping[str, Any], config.get("on_timeout") or {"type": "reject"}))
        return review
