"""Errors of run control: every one a :class:`~middleware_kit.errors.MiddlewareError` naming the thread (and the run
or interrupt involved) and saying what to do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from langgraph.errors import UnknownInterruptError as LangGraphUnknownInterruptError

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError

__all__ = [
    "AmbiguousResumeError",
    "InterruptAlreadyResolvedError",
    "LeaseLostError",
    "NothingToResumeError",
    "PendingApprovalError",
    "ResumeError",
    "RunCancelledError",
    "RunControlConfigError",
    "RunControlError",
    "RunDeadlineExceededError",
    "ThreadBusyError",
    "UnknownInterruptError",
    "UnsharedLeaseWarning",
]

NAME = "RunControl"


class RunControlError(MiddlewareError):
    """Base of the errors raised by run control (``middleware`` is ``"RunControl"``)."""

    def __init__(self, message: str, *, thread_id: str, hook: str) -> None:
        super().__init__(message, middleware=NAME, hook=hook)
        self.thread_id = thread_id


class RunControlConfigError(MiddlewareConfigError):
    """``RunControl(...)`` or ``with_run_control(...)`` was given a value it cannot work with."""

    def __init__(self, message: str, *, parameter: str) -> None:
        super().__init__(message, middleware=NAME, hook=parameter)


class ThreadBusyError(RunControlError):
    """Another run holds the thread (``on_conflict="reject"``), or the wait for it timed out (``"wait"``)."""

    def __init__(
        self, thread_id: str, holder: str | None, owner: str | None, *, waited: float | None = None
    ) -> None:
        who = f"run {holder!r} ({owner})" if holder else "runs queued before this one"
        if waited is None:
            message = (
                f"Thread {thread_id!r} is busy: {who} holds it. One run per thread at a time: retry when it "
                f"ends, or build the agent with RunControl(on_conflict='wait') to queue behind it."
            )
        else:
            message = (
                f"Thread {thread_id!r} stayed busy for {waited:g}s (wait_timeout): {who} holds it. Raise "
                f"RunControl(wait_timeout=...), or cancel the holding run with agent.cancel({thread_id!r})."
            )
        super().__init__(message, thread_id=thread_id, hook="on_conflict")
        self.holder = holder
        self.owner = owner


class _LangGraphResumeError(LangGraphUnknownInterruptError):
    """LangGraph's strict-resume error as a base that takes only a message (its fields are set by the subclass), so
    ``except langgraph.errors.UnknownInterruptError`` also catches ours."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.reason = "not_pending"
        self.interrupt_ids = ()
        self.pending_ids = ()


class ResumeError(RunControlError, _LangGraphResumeError):
    """A ``Command(resume=...)`` that cannot apply: nothing ran, the thread is unchanged. Also a
    ``langgraph.errors.UnknownInterruptError`` (LangGraph's strict-resume error; ``reason``, ``interrupt_ids`` and
    ``pending_ids`` as LangGraph fills them)."""

    def _langgraph(self, reason: Literal["not_pending", "empty_map", "ambiguous"], interrupt_ids: Sequence[str],
                   pending_ids: Sequence[str]) -> None:
        self.reason = reason
        self.interrupt_ids = tuple(interrupt_ids)
        self.pending_ids = tuple(pending_ids)


class NothingToResumeError(ResumeError):
    """The thread has no pending interrupt (and none was resolved on it): there is nothing to resume."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"Thread {thread_id!r} has nothing to resume: no interrupt is pending on it. Send new input "
            f"(invoke({{'messages': [...]}}, config)) instead of Command(resume=...).",
            thread_id=thread_id,
            hook="resume",
        )


class InterruptAlreadyResolvedError(ResumeError):
    """The interrupt this resume answers was already resolved (a duplicate or late resume)."""

    def __init__(self, thread_id: str, interrupt_id: str, resolved_by: str | None) -> None:
        by = f" by run {resolved_by!r}" if resolved_by else ""
        super().__init__(
            f"Interrupt {interrupt_id!r} of thread {thread_id!r} was already resolved{by}; this resume was not "
            f"applied and nothing ran. Read the thread's state (agent.get_state(config)) for the outcome.",
            thread_id=thread_id,
            hook="resume",
        )
        self.interrupt_id = interrupt_id
        self.resolved_by = resolved_by
        self._langgraph("not_pending", (interrupt_id,), ())


class UnknownInterruptError(ResumeError):
    """The resume names an interrupt id that is not pending on the thread (and was not resolved on it)."""

    def __init__(self, thread_id: str, interrupt_id: str, pending: Sequence[str]) -> None:
        now = f"pending: {', '.join(repr(p) for p in pending)}" if pending else "nothing is pending"
        super().__init__(
            f"Interrupt {interrupt_id!r} is not pending on thread {thread_id!r} ({now}); nothing ran. Resume "
            f"with the id from result['__interrupt__'][i].id or agent.get_state(config).interrupts.",
            thread_id=thread_id,
            hook="resume",
        )
        self.interrupt_id = interrupt_id
        self.pending = tuple(pending)
        self._langgraph("not_pending", (interrupt_id,), pending)


class AmbiguousResumeError(ResumeError):
    """A single resume value while several interrupts are pending: LangGraph cannot tell which it answers."""

    def __init__(self, thread_id: str, pending: Sequence[str]) -> None:
        ids = ", ".join(repr(p) for p in pending)
        super().__init__(
            f"Thread {thread_id!r} has {len(pending)} interrupts pending ({ids}); a single resume value cannot say "
            f"which it answers, so nothing ran. Resume with Command(resume={{interrupt_id: value, ...}}), the ids "
            f"from result['__interrupt__'] or agent.get_state(config).interrupts.",
            thread_id=thread_id,
            hook="resume",
        )
        self.pending = tuple(pending)
        self._langgraph("ambiguous", (), pending)


class PendingApprovalError(RunControlError):
    """New input arrived while an interrupt is pending and the agent's policy is ``on_pending_input="reject"``."""

    def __init__(self, thread_id: str, interrupt_ids: Sequence[str]) -> None:
        ids = ", ".join(repr(i) for i in interrupt_ids)
        super().__init__(
            f"Thread {thread_id!r} is waiting for a human decision (interrupt {ids}); new input was rejected "
            f"(on_pending_input='reject'). Resume it with Command(resume=...) first, or build the agent with "
            f"on_pending_input='abandon' (drop the review) or 'queue' (hold the input until the review resolves).",
            thread_id=thread_id,
            hook="on_pending_input",
        )
        self.interrupt_ids = tuple(interrupt_ids)


class RunDeadlineExceededError(RunControlError):
    """The run used up its deadline (``on_deadline="raise"``). The thread was closed cleanly before raising."""

    def __init__(self, thread_id: str, run_id: str, deadline: float) -> None:
        super().__init__(
            f"Run {run_id!r} on thread {thread_id!r} exceeded its deadline of {deadline:g}s (time waiting for a "
            f"human not counted); every open tool call was answered and the thread is ready for its next turn. "
            f"Raise RunControl(deadline=...) or use on_deadline='end' to get a final message instead.",
            thread_id=thread_id,
            hook="deadline",
        )
        self.run_id = run_id
        self.deadline = deadline


class RunCancelledError(RunControlError):
    """The run was cancelled (``on_cancel="raise"``). The thread was closed cleanly before raising."""

    def __init__(self, thread_id: str, run_id: str, reason: str) -> None:
        super().__init__(
            f"Run {run_id!r} on thread {thread_id!r} was cancelled ({reason}); every open tool call was answered "
            f"and the thread is ready for its next turn.",
            thread_id=thread_id,
            hook="cancel",
        )
        self.run_id = run_id
        self.reason = reason


class LeaseLostError(RunControlError):
    """The run's lease passed (or may have passed) to another run: it was taken over, or went unrenewed for two thirds
    of its ``ttl``. Nothing this run did after that was written to the thread (its checkpoint writes are fenced)."""

    def __init__(self, thread_id: str, run_id: str, ttl: float) -> None:
        super().__init__(
            f"Run {run_id!r} lost the lease of thread {thread_id!r}: another run took the thread over, or the lease "
            f"went unrenewed for two thirds of its ttl of {ttl:g}s (a stalled process or event loop), after which "
            f"another run may take it. Nothing this run did after that was written to the thread; read "
            f"agent.get_state(config) for its state. If runs stall that long, raise RunControl(ttl=...); under "
            f"ainvoke, keep blocking calls off the event loop.",
            thread_id=thread_id,
            hook="lease",
        )
        self.run_id = run_id
        self.ttl = ttl


class UnsharedLeaseWarning(UserWarning):
    """Run control is on, but the agent's checkpointer cannot hold a lease other processes see: one run per thread
    holds in this process only. Emitted once per checkpointer class."""
