"""Errors of the call ledger: each names the ledger's hook involved and says how to fix the cause."""

from __future__ import annotations

from collections.abc import Iterable

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError

__all__ = ["LedgerConfigError", "LedgerResumeError"]

_FORMS = ('{"type": "retry"}, {"type": "skip", "message": "..."} or {"type": "done", "result": ...} '
          "(or Retry(), Skip(message), MarkDone(result) from middleware_kit.ledger)")


class LedgerConfigError(MiddlewareConfigError):
    """The ledger cannot work as configured: raised by ``create_agent`` for an unknown tool name, or at the call for
    a ``reconcile`` hook that returned something that is not a decision."""

    @classmethod
    def unknown_tools(cls, option: str, names: Iterable[str], known: Iterable[str]) -> LedgerConfigError:
        return cls(
            f"Ledger({option}=...) names {sorted(names)}, which the agent has no tool for (its tools: "
            f"{sorted(known)}). Fix the names, or drop them from Ledger({option}=...).",
            middleware="ledger",
            hook=option,
        )

    @classmethod
    def bad_decision(cls, value: object, tool: str, call_id: str) -> LedgerConfigError:
        return cls(
            f"Ledger(reconcile=...) returned {value!r} for the in-doubt call {tool!r} (id {call_id!r}); return "
            f"Retry(), Skip(message), MarkDone(result), or None to ask a person (the run pauses with an interrupt).",
            middleware="ledger",
            hook="reconcile",
        )

    @classmethod
    def bad_option(cls, given: object) -> LedgerConfigError:
        return cls(
            f"create_agent(ledger={given!r}): pass a Ledger(...) to tune the call ledger, or False to turn it off "
            f"(it is on by default for an agent with a checkpointer).",
            middleware="create_agent",
            hook="ledger",
        )


class LedgerResumeError(MiddlewareError, TypeError):
    """A resume value that is not a decision for an in-doubt tool call. Raised before the value is saved: the
    interrupt stays pending, to be answered again. (A ``TypeError``, not a ``ValueError``: it is raised while
    LangGraph validates the resume with pydantic, which would wrap a ``ValueError`` in its own error.)"""

    @classmethod
    def bad_resume(cls, value: object, tool: str, call_id: str) -> LedgerResumeError:
        return cls(
            f"The resume value {value!r} does not answer the in-doubt call {tool!r} (id {call_id!r}); resume with "
            f"{_FORMS}.",
            middleware="ledger",
            hook="reconcile",
        )
