"""Admission: whether a run's input may apply to its thread, decided under the lease on the checkpoint LangGraph loads.

What is LangGraph's and what is ours:

- LangGraph's strict resume (``configurable["__pregel_strict_resume"]``, set on every controlled run) checks a resume
  that names its interrupts (``Command(resume={id: value})``) against the interrupts pending in that checkpoint and
  raises ``langgraph.errors.UnknownInterruptError`` before anything is written; which interrupts are pending is
  LangGraph's own rule (``read_task_statuses``). :func:`refusal_flow` turns its error into ours, telling a duplicate
  (``InterruptAlreadyResolvedError``: this thread resolved it, in this or another process) from an id it never had.
- Ours, because LangGraph accepts them: a resume without ids on a thread that has nothing pending (LangGraph resumes
  it as if from a breakpoint: a fresh run, or a silent replay of a finished one) and new input while a review is
  pending (``on_pending_input``). Both are :func:`admit`.

What needs the lease backend's data is a flow: a generator of :class:`~middleware_kit.run_control.lease.Call` steps
on the backend, driven by ``lease.drive`` under ``invoke`` and ``lease.adrive`` under ``ainvoke``. A queueing run's
reads of its thread and of its queue (:func:`queued`, :func:`next_input`) are engine bodies of
:class:`~middleware_kit._engine.drive.Step` steps, on the engine's driver pair.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.errors import UnknownInterruptError as LangGraphUnknownInterruptError
from langgraph.types import Command, Interrupt

from middleware_kit._engine.compat import read_task_statuses
from middleware_kit._engine.drive import Step, Steps
from middleware_kit.run_control.control import RunHandle
from middleware_kit.run_control.errors import (
    AmbiguousResumeError,
    InterruptAlreadyResolvedError,
    NothingToResumeError,
    PendingApprovalError,
    ResumeError,
    UnknownInterruptError,
)
from middleware_kit.run_control.lease import Call, LeaseStep

__all__ = ["admit", "is_new_input", "next_input", "pending_interrupts", "queued", "refusal_flow"]

_HEX = frozenset("0123456789abcdef")


def pending_interrupts(checkpoint: CheckpointTuple | None) -> list[Interrupt]:
    """The interrupts waiting for an answer in ``checkpoint`` (LangGraph's rule: those of unfinished tasks)."""
    if checkpoint is None:
        return []
    found: dict[str, Interrupt] = {}
    for status in read_task_statuses(checkpoint.pending_writes or ()).values():
        for interrupt in status.pending_interrupts:
            found.setdefault(interrupt.id, interrupt)
    return list(found.values())


def is_new_input(input: Any) -> bool:
    return input is not None and not isinstance(input, Command)


def _targeted(resume: Any) -> list[str] | None:
    """The interrupt ids a ``Command(resume={id: value, ...})`` answers (LangGraph's own test), else None."""
    if isinstance(resume, dict) and resume and all(
        isinstance(k, str) and len(k) == 32 and set(k) <= _HEX for k in resume
    ):
        return list(resume)
    return None


def admit(input: Any, handle: RunHandle, pending: Sequence[str]) -> Generator[LeaseStep, Any, None] | None:
    """Admit ``input`` on a thread with ``pending`` interrupt ids, or raise (nothing was written yet). Sets
    ``handle.answering``: the ids this run resolves (recorded before its first write).

    Decided here, with no I/O, in every case but one: a resume that names no interrupt on a thread with none
    pending. For that one the flow to drive on the lease backend is returned (it reads which interrupts were
    resolved, and raises the error that says so); else None. Every run's first read comes here, so the common case
    costs no driver."""
    if is_new_input(input):
        if not pending:
            return None
        if handle.control.on_pending_input != "abandon":  # "queue" was decided before the run
            raise PendingApprovalError(handle.thread_id, pending)
        handle.answering = tuple(pending)  # abandoned by this run
        return None
    if not isinstance(input, Command) or input.resume is None:
        return None
    targeted = _targeted(input.resume)
    if targeted is not None:
        handle.answering = tuple(targeted)  # LangGraph's strict resume checks them against `pending`
        return None
    if not pending:
        return _nothing_to_resume(handle.thread_id)
    handle.answering = tuple(pending)  # several: LangGraph's strict resume refuses it as ambiguous
    return None


def _nothing_to_resume(thread_id: str) -> Generator[LeaseStep, Any, None]:
    """A resume on a thread with no pending interrupt: always an error; which one, the resolved interrupts say."""
    resolved: list[tuple[str, str]] = yield Call("resolved", (thread_id,))
    if resolved:
        newest, by = resolved[0]
        raise InterruptAlreadyResolvedError(thread_id, newest, by)
    raise NothingToResumeError(thread_id)


def queued(input: Any, handle: RunHandle, backend: Any, saver: Any, thread: Any) -> Steps[bool]:
    """``on_pending_input="queue"``, before a run with new input (``thread``: the thread's config): True when a review
    is pending on the thread, and the input was queued behind it instead of run; False: the run goes ahead. One body
    for both modes (:mod:`middleware_kit._engine.drive`)."""
    if not pending_interrupts((yield Step(saver.get_tuple, saver.aget_tuple, thread))):
        return False
    yield Step(backend.push_input, backend.apush_input, handle.thread_id, input)
    return True


def next_input(handle: RunHandle, backend: Any, saver: Any, thread: Any) -> Steps[tuple[bool, Any]]:
    """After a slice of a queueing run: (True, the next queued input) to run it under the same lease; (False, None)
    when the run was stopped, a review is pending again, or nothing is queued."""
    if handle.stop_kind is not None:
        return False, None
    if pending_interrupts((yield Step(saver.get_tuple, saver.aget_tuple, thread))):
        return False, None
    found: tuple[bool, Any] = yield Step(backend.pop_input, backend.apop_input, handle.thread_id)
    return found


def refusal_flow(error: LangGraphUnknownInterruptError, handle: RunHandle) -> Generator[LeaseStep, Any, ResumeError]:
    """Our error for LangGraph's strict-resume refusal (nothing was written): ``reason`` ``"ambiguous"`` or
    ``"not_pending"``."""
    thread_id = handle.thread_id
    if error.reason == "ambiguous" or not error.interrupt_ids:
        return AmbiguousResumeError(thread_id, error.pending_ids)
    resolved = dict((yield Call("resolved", (thread_id,))))
    for interrupt_id in error.interrupt_ids:
        if interrupt_id in resolved:
            return InterruptAlreadyResolvedError(thread_id, interrupt_id, resolved[interrupt_id])
    return UnknownInterruptError(thread_id, error.interrupt_ids[0], error.pending_ids)
