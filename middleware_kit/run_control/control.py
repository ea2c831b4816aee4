"""``RunControl`` (the per-agent policy, a frozen value) and ``RunHandle`` (what one run's checks read)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from langchain_core.runnables.config import var_child_runnable_config
from langgraph.runtime import RunControl as DrainControl

from middleware_kit.run_control.errors import LeaseLostError, RunControlConfigError
from middleware_kit.run_control.lease import LeaseBackend

__all__ = ["HANDLE_KEY", "LEASE_LOST", "RunControl", "RunHandle", "StopKind", "current_handle"]

HANDLE_KEY = "__middleware_kit_run_handle"
"""Where a controlled run's :class:`RunHandle` travels in ``config["configurable"]`` (never checkpointed)."""

StopKind = Literal["cancelled", "deadline"]
LEASE_LOST = "its lease expired and another run took the thread over"
OWNER = f"{socket.gethostname()}:{os.getpid()}"


def _positive(name: str, value: float | None, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise RunControlConfigError(
            f"RunControl({name}={value!r}): {name} must be a positive number of seconds"
            + (" or None." if allow_none else "."),
            parameter=name,
        )


def _choice(name: str, value: object, choices: tuple[object, ...]) -> None:
    if not any(value is c or (isinstance(c, str) and value == c) for c in choices):
        raise RunControlConfigError(
            f"RunControl({name}={value!r}): use one of {', '.join(repr(c) for c in choices)}.", parameter=name
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunControl:
    """How runs of one agent are controlled. A frozen value: ``dataclasses.replace`` or :meth:`override` for a changed
    copy.

    Attributes mirror the issue's policies: one run per thread (``on_conflict``, ``wait_timeout``, ``ttl``), a
    wall-clock ``deadline`` per run not counting time waiting for a human (``on_deadline``), cancellation
    (``on_cancel``, ``poll_interval``) and new input while an approval is pending (``on_pending_input``).
    """

    on_conflict: Literal["reject", "wait"] = "reject"
    """A second run on a busy thread: ``"reject"`` raises ``ThreadBusyError`` naming the holding run; ``"wait"``
    queues behind it in arrival order (``ThreadBusyError`` after ``wait_timeout``)."""
    wait_timeout: float | None = 30.0
    """Seconds a waiting run queues before giving up (None: no limit)."""
    ttl: float = 30.0
    """Lease lifetime in seconds, renewed by a heartbeat every ``min(ttl / 3, poll_interval)`` while the run is alive;
    after a crash, another worker takes the thread over once it passes. In-process leases (``InMemorySaver``) do
    not expire."""
    poll_interval: float = 0.5
    """Seconds between heartbeats (lease renewal and reading cross-process cancel requests) and between a waiting
    run's tries."""
    deadline: float | None = None
    """Wall-clock seconds a run may take (None: unbounded). Time waiting for a human does not count."""
    on_deadline: Literal["end", "raise"] = "end"
    """``"end"``: finish with a final message; ``"raise"``: finish the same way, then raise
    ``RunDeadlineExceededError``."""
    on_cancel: Literal["end", "raise"] = "end"
    """``"end"``: a cancelled run finishes with a final message; ``"raise"``: then raises ``RunCancelledError``."""
    on_pending_input: Literal["reject", "abandon", "queue"] = "reject"
    """New input while an interrupt is pending: ``"reject"`` raises ``PendingApprovalError``; ``"abandon"`` drops
    the review (its calls are answered as not executed; a later resume of it gets
    ``InterruptAlreadyResolvedError``) and runs the input; ``"queue"`` holds the input (in the lease's database)
    and returns the thread as it is, still paused; the run that resolves the review then runs the held inputs in
    arrival order, each as a new turn, until one pauses again."""
    cross_process: bool | None = None
    """Whether the lease must hold across processes. None (default): it does on SQLite and PostgreSQL savers and,
    with any other checkpointer but ``InMemorySaver``, holds in this process only and says so once
    (``UnsharedLeaseWarning``); False: in this process only, on purpose (no warning); True: the agent refuses a
    checkpointer that cannot hold a cross-process lease."""

    def __post_init__(self) -> None:
        _choice("on_conflict", self.on_conflict, ("reject", "wait"))
        _positive("wait_timeout", self.wait_timeout, allow_none=True)
        _positive("ttl", self.ttl, allow_none=False)
        _positive("poll_interval", self.poll_interval, allow_none=False)
        _positive("deadline", self.deadline, allow_none=True)
        _choice("on_deadline", self.on_deadline, ("end", "raise"))
        _choice("on_cancel", self.on_cancel, ("end", "raise"))
        _choice("on_pending_input", self.on_pending_input, ("reject", "abandon", "queue"))
        _choice("cross_process", self.cross_process, (None, True, False))

    def override(self, **changes: Any) -> RunControl:
        """A copy with ``changes`` applied (validated again)."""
        return replace(self, **changes)

    @property
    def heartbeat(self) -> float:
        return min(self.ttl / 3, self.poll_interval)


@dataclass(eq=False)
class RunHandle:
    """One run's control block: its identity, its clock and its stop flag. Created per run by the controlled agent;
    read by ``RunControlMiddleware`` through the run's config. Safe to stop from any thread."""

    thread_id: str
    run_id: str
    control: RunControl
    backend: LeaseBackend | None
    """None for a run with no thread to lease (no checkpointer, e.g. on LangGraph Server): deadline checks only."""
    slice_started: float = field(default_factory=time.monotonic)
    base: float | None = None
    """Seconds of this run consumed before this slice (read from state at the slice's first check)."""
    stop_kind: StopKind | None = None
    stop_reason: str = ""
    run_uuid: uuid.UUID | None = None
    """``run_id`` as the ``UUID`` the run's root trace run gets, when run control made it (None: given by the
    caller)."""
    terminal_sent: bool = False
    answering: tuple[str, ...] = ()
    """Interrupt ids this run answers (a resume) or drops (``on_pending_input="abandon"``): recorded as resolved by
    this run right before its first checkpoint write, i.e. once LangGraph's strict resume has accepted it."""
    fence_at: float = math.inf
    """Monotonic time after which this run no longer writes to the thread: a third of the ``ttl`` before its lease
    can expire (renewed by the heartbeat). Infinite for in-process leases, which do not expire."""
    lease_lost: bool = False
    """The lease expired or was taken over: writes are refused (``LeaseLostError``) and LangGraph drains the run."""
    drain: DrainControl | None = None
    """LangGraph's own run control of this run (``stream(control=...)``): drained when the lease is lost."""
    finished: bool = False
    """The run reached its end on its own (``after_agent``): a later cancel or deadline is a no-op."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _wakers: list[Callable[[], None]] = field(default_factory=list, repr=False)

    # -- lease -----------------------------------------------------------------------------------------------
    def leased(self, sent_at: float) -> None:
        """The lease was taken or renewed by a statement sent at ``sent_at`` (monotonic): it cannot expire before
        ``sent_at + ttl``; writes stop a third of the ttl earlier, leaving that much for a write in flight."""
        if self.backend is not None and self.backend.expires:
            self.fence_at = sent_at + self.control.ttl * 2 / 3

    def lose_lease(self) -> None:
        """Another run took the thread over: refuse every later write and drain the run (LangGraph's drain)."""
        self.lease_lost = True
        if self.drain is not None:
            self.drain.request_drain("lease lost")
        self.stop("cancelled", LEASE_LOST)

    def fence(self) -> None:
        """Before a checkpoint write: raise ``LeaseLostError`` unless the lease is certainly still this run's."""
        if self.lease_lost or time.monotonic() >= self.fence_at:
            if not self.lease_lost:
                self.lose_lease()
            raise LeaseLostError(self.thread_id, self.run_id, self.control.ttl)

    def take_answering(self) -> tuple[str, ...]:
        """The interrupt ids to record as resolved, once (the first write takes them)."""
        if not self.answering:  # every write asks; only a resume's first has any (set before the run starts)
            return ()
        with self._lock:
            ids, self.answering = self.answering, ()
            return ids

    # -- clock -----------------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return (self.base or 0.0) + (time.monotonic() - self.slice_started)

    def remaining(self) -> float | None:
        if self.control.deadline is None:
            return None
        return self.control.deadline - self.elapsed()

    def adopt(self, state: Any) -> None:
        """At the slice's first check: take the time this run consumed before (saved in state)."""
        if self.base is None:
            saved = state.get("run_control_elapsed") if isinstance(state, dict) else None
            self.base = float(saved) if isinstance(saved, (int, float)) else 0.0

    # -- stop ------------------------------------------------------------------------------------------------
    def finish(self) -> None:
        """The run reached its end on its own: its result stands; a cancel or deadline from now on is a no-op."""
        with self._lock:
            self.finished = True

    def stop(self, kind: StopKind, reason: str) -> bool:
        """Flag the run to stop at its next check; False if it was already flagged or has finished."""
        with self._lock:
            if self.stop_kind is not None or self.finished:
                return False
            self.stop_kind, self.stop_reason = kind, reason
            wakers, self._wakers = self._wakers, []
        for wake in wakers:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                wake()
        return True

    def check(self, state: Any = None) -> StopKind | None:
        """The reason to stop now, if any (a passed deadline flags the run). ``state``: the run's state, at a check
        that has it (the slice's first such check adopts the time the run consumed before, :meth:`adopt`)."""
        if self.base is None and state is not None:
            self.adopt(state)
        if self.stop_kind is None and not self.finished and self.control.deadline is not None:
            remaining = self.remaining()
            if remaining is not None and remaining <= 0:
                self.stop("deadline", f"its deadline of {self.control.deadline:g}s passed")
        return self.stop_kind

    def claim_terminal(self) -> bool:
        """True once: whoever gets it sends the terminal event."""
        with self._lock:
            first, self.terminal_sent = not self.terminal_sent, True
            return first

    def stopped_event(self) -> asyncio.Event:
        """An ``asyncio.Event`` of the running loop, set when the run is flagged to stop (from any thread)."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        with self._lock:
            if self.stop_kind is None:
                self._wakers.append(lambda: _call_soon(loop, event.set))
                return event
        event.set()
        return event


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    loop.call_soon_threadsafe(callback)


def current_handle() -> RunHandle | None:
    """The :class:`RunHandle` of the run this code runs in (None outside a controlled run). Read from the config
    LangGraph runs the current node with (langchain-core's context variable, which ``get_config`` reads too;
    looked up a few times per model and tool call, so directly)."""
    config = var_child_runnable_config.get()
    if not config:
        return None
    handle = (config.get("configurable") or {}).get(HANDLE_KEY)
    return handle if isinstance(handle, RunHandle) else None
