"""Exactly-once tool effects across crashes: a ledger of tool calls in the checkpointer's own database.

Each tool call is recorded as started before the tool runs and finished (with its result) right after. A replay
after a crash gives a finished call its recorded result without running the tool; a call that started and has no
result (in doubt) goes to a reconcile policy: retried when the tool is idempotent, else decided by a ``reconcile``
hook or by a person (the run pauses with an interrupt). Each call has an idempotency key, stable across retries and
crashes, for the external services the tool calls. A model call a middleware makes for itself (a summarizer, a
classifier) is recorded with its answer, and a replay of its step is given that answer instead of paying for the call
again. See docs/exactly_once.md.
"""

from middleware_kit.ledger import model_calls  # noqa: F401 - installs the recording of middleware model calls
from middleware_kit.ledger.errors import LedgerConfigError, LedgerResumeError
from middleware_kit.ledger.keys import current_idempotency_key, idempotency_key
from middleware_kit.ledger.policy import Ledger, MarkDone, Reconcile, ReconcileDecision, Retry, Skip
from middleware_kit.ledger.records import Answer, CallKey, Entry, InDoubtCall, ModelCallKey
from middleware_kit.ledger.store import LedgerStore, ledger_store

__all__ = [
    "Answer",
    "CallKey",
    "Entry",
    "InDoubtCall",
    "Ledger",
    "LedgerConfigError",
    "LedgerResumeError",
    "LedgerStore",
    "MarkDone",
    "ModelCallKey",
    "Reconcile",
    "ReconcileDecision",
    "Retry",
    "Skip",
    "current_idempotency_key",
    "idempotency_key",
    "ledger_store",
]
