"""Idempotency keys: one per tool call, the same on every retry and after every crash, visible to the tool.

The key is derived from where the call is recorded (thread, the tool task's checkpoint namespace, tool call id), so a
replay of the step after a crash, or a retry the reconcile policy decides, computes the same key. The tool reads it
with :func:`current_idempotency_key` or from ``runtime.config["metadata"]["idempotency_key"]`` (its ``ToolRuntime``)
and passes it to the external service (a payment provider's ``Idempotency-Key`` header), which then applies the
effect once however many times it is asked.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar

from middleware_kit.ledger.records import CallKey

__all__ = ["METADATA_KEY", "current_idempotency_key", "idempotency_key"]

METADATA_KEY = "idempotency_key"
"""The key of the call's idempotency key in the tool's ``config["metadata"]``."""

CURRENT: ContextVar[str | None] = ContextVar("middleware_kit_idempotency_key", default=None)


def idempotency_key(key: CallKey) -> str:
    """The idempotency key of the call recorded at ``key``: 32 hex digits, stable across retries and crashes."""
    digest = hashlib.sha256("\x1f".join((key.thread_id, key.checkpoint_ns, key.call_id)).encode()).hexdigest()
    return "mk-" + digest[:32]


def current_idempotency_key() -> str | None:
    """The idempotency key of the tool call running now (None outside a ledgered tool call: no checkpointer, the
    ledger turned off, or the tool excluded)."""
    return CURRENT.get()
