"""Errors of run control: every one a :class:`~middleware_kit.errors.MiddlewareError` naming the thread (and the run
or interrupt involved) and saying what to do."""

from __future__ import annotations

from collections.abc import Sequence

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError

__all__ = [
    "InterruptAlreadyResolvedError",
    "NothingToResumeError",
    "PendingApprovalError",
    "ResumeError",
    "RunCancelledError",
    "RunControlConfigError",
    "RunControlError",
    "RunDeadlineExceededError",
    "ThreadBusyError",
    "UnknownInterruptError",
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


class ResumeError(RunControlError):
    """A ``Command(resume=...)`` that cannot apply: nothing ran, the thread is unchanged."""


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
