"""The heartbeat of leased runs: renew each run's lease while it lives, and read cancel requests made for it elsewhere.

Only leases that expire (SQLite, PostgreSQL) beat; an in-process lease does not. Every ``min(ttl / 3, poll_interval)``
seconds a run's lease is renewed (:meth:`~middleware_kit.run_control.lease.LeaseBackend.renew`); the renewal tells
whether the run still holds the thread and whether another process asked to cancel it:

- still held: the run's fence moves on (:meth:`~middleware_kit.run_control.control.RunHandle.leased`); a cancel
  request stops the run;
- taken over: the run loses its lease (its writes are refused, LangGraph drains it);
- a failed renewal (a database hiccup) is tried again at the next beat; if they keep failing, the fence stops the
  run's writes before the lease can expire.

A run whose lease is taken with its first checkpoint read (PostgreSQL: see ``LeaseBackend.reads_with_lease``) is
registered before it holds the lease: its beats skip renewing until it does (:func:`_holding`).

Sync runs share one daemon thread for the process (:data:`BEATS`), so a run costs no thread start and no join
(renewals run in a small pool, so a slow one holds up no other run);
async runs beat in a task on their own event loop (:func:`abeat`).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from middleware_kit.run_control.control import RunHandle
from middleware_kit.run_control.lease import LeaseBackend

__all__ = ["BEATS", "Heartbeats", "abeat"]

IDLE = 30.0
"""Seconds the shared thread waits for a new run before it exits (the next run starts it again)."""


def _holding(backend: LeaseBackend, handle: RunHandle) -> bool:
    """Whether the run holds its lease yet: always, unless the backend takes it with the run's first read; then
    once taken (taking an expiring lease sets the run's fence)."""
    return not backend.reads_with_lease or not math.isinf(handle.fence_at)


def _apply(handle: RunHandle, sent: float, alive: bool, reason: str | None) -> None:
    """What one renewal sent at ``sent`` (monotonic) says about ``handle``'s run."""
    if not alive:
        handle.lose_lease()
        return
    handle.leased(sent)
    if reason:
        handle.stop("cancelled", reason)


class Heartbeats:
    """The heartbeat of this process's sync runs: one daemon thread that finds the runs whose renewal is due and hands
    each renewal to a small pool, so one slow renewal (a database that hangs, a SQLite file another process holds
    locked) delays no other run's; a run's next renewal waits for its previous one."""

    def __init__(self, workers: int = 8) -> None:
        self._cond = threading.Condition()
        self._runs: dict[int, tuple[LeaseBackend, RunHandle, float]] = {}  # id(handle) -> (backend, handle, due)
        self._inflight: set[int] = set()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="run-control-renew")

    def add(self, backend: LeaseBackend, handle: RunHandle) -> None:
        with self._cond:
            self._runs[id(handle)] = (backend, handle, time.monotonic() + handle.control.heartbeat)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="run-control-heartbeat", daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, handle: RunHandle) -> None:
        """Stop beating for ``handle``; once this returns, no renewal result reaches it."""
        with self._cond:
            self._runs.pop(id(handle), None)

    def _due(self) -> list[tuple[LeaseBackend, RunHandle]] | None:
        """Wait for the runs whose beat is due and that have no renewal in flight (None: no run for ``IDLE``
        seconds, the thread ends)."""
        with self._cond:
            while True:
                if not self._runs:
                    self._cond.wait(IDLE)
                    if not self._runs:
                        self._thread = None
                        return None
                    continue
                now = time.monotonic()
                waiting = [(key, b, h, at) for key, (b, h, at) in self._runs.items() if key not in self._inflight]
                if not waiting:
                    self._cond.wait(IDLE)  # every run has a renewal in flight: woken when one completes
                    continue
                first = min(at for *_, at in waiting)
                if first > now:
                    self._cond.wait(first - now)
                    continue
                due = [(key, b, h) for key, b, h, at in waiting if at <= now]
                for key, backend, handle in due:
                    self._runs[key] = (backend, handle, now + handle.control.heartbeat)
                    self._inflight.add(key)
                return [(b, h) for _, b, h in due]

    def _loop(self) -> None:
        while (due := self._due()) is not None:
            for backend, handle in due:
                self._pool.submit(self._renew, backend, handle)

    def _renew(self, backend: LeaseBackend, handle: RunHandle) -> None:
        sent, alive, reason = time.monotonic(), None, None
        if _holding(backend, handle):
            try:
                alive, reason = backend.renew(handle.thread_id, handle.run_id, handle.control.ttl)
            except Exception:  # a database hiccup: try again next beat (the fence stops writes if it lasts)
                alive = None
        with self._cond:
            self._inflight.discard(id(handle))
            if alive is not None and id(handle) in self._runs and self._runs[id(handle)][1] is handle:
                _apply(handle, sent, alive, reason)
            self._cond.notify()


BEATS = Heartbeats()
"""The shared heartbeat of the sync runs of this process."""


async def abeat(backend: LeaseBackend, handle: RunHandle) -> None:
    """The heartbeat of one async run, until its task is cancelled (the run's ``finally``)."""
    while True:
        await asyncio.sleep(handle.control.heartbeat)
        sent = time.monotonic()
        if not _holding(backend, handle):
            continue
        try:
            alive, reason = await backend.arenew(handle.thread_id, handle.run_id, handle.control.ttl)
        except Exception:
            continue
        _apply(handle, sent, alive, reason)
