"""The ledger's value types: where a call is recorded, what the record says, and an in-doubt call as the reconcile
policy sees it; where a middleware's model call is recorded, and its recorded answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

__all__ = ["Answer", "CallKey", "Entry", "InDoubtCall", "ModelCallKey"]


class CallKey(NamedTuple):
    """Where one tool call is recorded: its thread, the checkpoint namespace of the tool task running it (which
    holds the task id, so a tool call id a provider reuses in a later turn is a new call), and the tool call id.

    A named tuple, not a dataclass: it is hashed several times per tool call (the store's row, the task run's set),
    and a tuple's hash is computed in C."""

    thread_id: str
    checkpoint_ns: str
    call_id: str


@dataclass(frozen=True, slots=True)
class Entry:
    """A call's record: ``started`` (written before the tool ran; no result: in doubt after a crash) or
    ``finished`` (with its result, serialized with the checkpointer's serde)."""

    status: Literal["started", "finished"]
    tool: str
    attempt: int
    """1 for the first run; one more for each retry."""
    result: tuple[str, bytes] | None
    """``serde.dumps_typed`` of the ``ToolMessage`` or ``Command`` the call returned (finished calls)."""
    started_at: float
    """When the current attempt started (seconds since the epoch, the database's clock)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InDoubtCall:
    """A tool call that started and has no recorded result: the process running it died (or was cancelled) inside
    the tool, so whether its effect happened is unknown. What a ``reconcile`` hook and the interrupt receive."""

    tool: str
    """The tool's name."""
    args: dict[str, Any]
    """The call's arguments, as the model wrote them."""
    call_id: str
    """The tool call id."""
    thread_id: str
    checkpoint_ns: str
    idempotency_key: str
    """The call's idempotency key (the one the tool saw): ask the external service what it did under it."""
    attempt: int
    """How many times the call was started."""
    started_at: float
    """When its last attempt started (seconds since the epoch)."""

    def payload(self) -> dict[str, Any]:
        """The interrupt value of the default policy: what a reviewer needs to decide, JSON-ready."""
        return {
            "type": "tool_call_in_doubt",
            "tool_call": {"name": self.tool, "args": self.args, "id": self.call_id},
            "idempotency_key": self.idempotency_key,
            "attempt": self.attempt,
            "started_at": self.started_at,
            "description": (
                f"The tool call {self.tool!r} (id {self.call_id!r}) started and has no result: the worker running it "
                f"stopped inside the tool, so its effect may or may not have happened. Resume with "
                f'{{"type": "retry"}} to run it again, {{"type": "skip", "message": "..."}} to tell the model it '
                f'did not run, or {{"type": "done", "result": ...}} to record the result it had.'
            ),
            "options": ["retry", "skip", "done"],
        }


@dataclass(frozen=True, slots=True)
class ModelCallKey:
    """Where one model call a middleware made for itself is recorded: its thread, the checkpoint namespace of the
    task that made it (which holds the task id: the same when the task is run again after a crash, new in the next
    step or turn), the call's site (``"{middleware}.{hook}"``) and its ordinal among that site's calls in the task
    run (0 for the first)."""

    thread_id: str
    checkpoint_ns: str
    site: str
    ordinal: int


@dataclass(frozen=True, slots=True)
class Answer:
    """A middleware model call's recorded answer."""

    digest: str
    """A digest of the call's input: a replay whose input differs is not given this answer (the model is asked)."""
    answer: tuple[str, bytes]
    """``serde.dumps_typed`` of what the model returned (an ``AIMessage``, or a decision model's answer)."""
    recorded_at: float
    """When it was recorded (seconds since the epoch, the database's clock)."""
