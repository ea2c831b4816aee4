"""What the ledger does with an in-doubt call: the decisions (:class:`Retry`, :class:`Skip`, :class:`MarkDone`) and
the agent's settings (:class:`Ledger`: which tools it covers, which are idempotent, the ``reconcile`` hook).

The policy, in order: a tool declared idempotent is retried; else the ``reconcile`` hook decides (None: it does not
know); else the run pauses with an interrupt naming the call, and the resume value decides.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeAlias

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command

from middleware_kit._engine.drive import Step
from middleware_kit.ledger.errors import LedgerConfigError, LedgerResumeError
from middleware_kit.ledger.records import InDoubtCall

__all__ = [
    "RESPONSE_SCHEMA", "Ledger", "MarkDone", "Reconcile", "ReconcileDecision", "Retry", "Skip", "decision_of",
    "response_schema",
]


@dataclass(frozen=True, slots=True)
class Retry:
    """Run the in-doubt call again (under the same idempotency key)."""


@dataclass(frozen=True, slots=True)
class Skip:
    """Do not run it: the model is told ``message`` (an error ``ToolMessage``)."""

    message: str = "This tool call was not completed (the worker running it stopped) and was not retried."


@dataclass(frozen=True, slots=True)
class MarkDone:
    """It happened: ``result`` is recorded as its result (a string or JSON-ready value for the ``ToolMessage``'s
    content, or a ``ToolMessage``/``Command`` as the tool would have returned)."""

    result: Any = ""


ReconcileDecision: TypeAlias = Retry | Skip | MarkDone
"""What a reconcile policy decides for an in-doubt call: run it again, skip it (the model is told), or mark it done."""
Reconcile: TypeAlias = Callable[
    [InDoubtCall, Any], "ReconcileDecision | Awaitable[ReconcileDecision | None] | None"
]
"""``reconcile(call, runtime)``: decide about an in-doubt call (e.g. by asking the payment provider under
``call.idempotency_key``), or return None to let a person decide. Sync or async; ``runtime`` is the call's
``ToolRuntime``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ledger:
    """The call ledger of an agent (``create_agent(ledger=Ledger(...))``; on by default with a checkpointer).

    A tool opts out with ``metadata={"ledger": False}`` (or by name in ``exclude``) and declares itself idempotent
    (retried automatically when in doubt) with ``metadata={"idempotent": True}`` (or by name in ``idempotent``).
    """

    reconcile: Reconcile | None = None
    """Decides about in-doubt calls before a person is asked (see :data:`Reconcile`)."""
    idempotent: Collection[str] = field(default=frozenset())
    """Names of tools that are safe to run twice: retried automatically when in doubt."""
    exclude: Collection[str] = field(default=frozenset())
    """Names of tools the ledger leaves alone (pure reads, cheap lookups): run again on replay, as without it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "idempotent", frozenset(self.idempotent))
        object.__setattr__(self, "exclude", frozenset(self.exclude))

    def check_tools(self, names: Collection[str]) -> None:
        """Raise :class:`LedgerConfigError` for a name in ``idempotent``/``exclude`` that is no tool of the agent."""
        for option in ("idempotent", "exclude"):
            unknown = set(getattr(self, option)) - set(names)
            if unknown:
                raise LedgerConfigError.unknown_tools(option, unknown, names)

    def covers(self, tool: BaseTool) -> bool:
        return tool.name not in self.exclude and (tool.metadata or {}).get("ledger") is not False

    def is_idempotent(self, tool: BaseTool) -> bool:
        return tool.name in self.idempotent or (tool.metadata or {}).get("idempotent") is True

    def reconcile_step(self) -> Step | None:
        """The ``reconcile`` hook as a step template (awaited under ``ainvoke`` when it is async, driven on a loop
        under ``invoke``; a sync hook runs in a worker thread under ``ainvoke``)."""
        hook = self.reconcile
        if hook is None:
            return None
        if inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(type(hook).__call__):
            return Step.twin(None, hook)
        return Step.twin(hook, None)


_KINDS = {"retry", "skip", "done"}


def decision_of(value: object, call: InDoubtCall) -> ReconcileDecision:
    """What the ``reconcile`` hook returned, as a decision (None was handled before)."""
    if isinstance(value, (Retry, Skip, MarkDone)):
        return value
    raise LedgerConfigError.bad_decision(value, call.tool, call.call_id)


def _from_resume(value: object, call: InDoubtCall) -> ReconcileDecision:
    """A resume value as a decision: a :data:`ReconcileDecision`, or its JSON form ``{"type": "retry" | "skip" |
    "done", ...}``."""
    if isinstance(value, (Retry, Skip, MarkDone)):
        return value
    if isinstance(value, dict) and value.get("type") in _KINDS:
        if value["type"] == "retry":
            return Retry()
        if value["type"] == "skip":
            message = value.get("message")
            return Skip(message) if isinstance(message, str) and message else Skip()
        return MarkDone(value.get("result", ""))
    error = LedgerResumeError.bad_resume(value, call.tool, call.call_id)
    try:  # marked as LangGraph marks a resume value that fails its schema (runs finish their other tasks)
        from langgraph.errors import _mark_invalid_resume
    except ImportError:  # pragma: no cover - older LangGraph
        raise error from None
    _mark_invalid_resume(error)
    raise error


RESPONSE_SCHEMA: dict[str, Any] = {
    "title": "Decision about an in-doubt tool call",
    "type": "object",
    "properties": {
        "type": {"enum": ["retry", "skip", "done"]},
        "message": {"type": "string", "description": "skip: what the model is told"},
        "result": {"description": "done: the call's result, as the tool would have returned it"},
    },
    "required": ["type"],
}
"""The resume value of the in-doubt interrupt, as JSON Schema (what clients are shown)."""


def response_schema(call: InDoubtCall) -> Any:
    """The ``response_schema`` of the in-doubt interrupt: clients see :data:`RESPONSE_SCHEMA`; LangGraph checks the
    resume value with it *before* saving it, so a wrong one raises :class:`LedgerResumeError` and the interrupt stays
    pending, to be answered again. ``interrupt`` returns the decision."""
    from pydantic import BeforeValidator, WithJsonSchema

    return Annotated[Any, BeforeValidator(lambda value: _from_resume(value, call)), WithJsonSchema(RESPONSE_SCHEMA)]


def answer(decision: Skip | MarkDone, call: InDoubtCall) -> ToolMessage | Command[Any]:
    """What the model is given for a call that is not run again."""
    if isinstance(decision, Skip):
        return ToolMessage(content=decision.message, name=call.tool, tool_call_id=call.call_id, status="error")
    result = decision.result
    if isinstance(result, (ToolMessage, Command)):
        return result
    content = result if isinstance(result, str) else json.dumps(result, default=str)
    return ToolMessage(content=content, name=call.tool, tool_call_id=call.call_id)
