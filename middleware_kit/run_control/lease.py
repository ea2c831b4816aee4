"""Thread leases, cancel flags and resume records, kept where the checkpointer keeps the thread.

One run per thread is a lease: a row keyed by ``thread_id`` naming the run that holds it, with an expiry renewed by a
heartbeat while the run is alive. It lives next to the checkpoints, so there is nothing new to deploy:

- ``InMemorySaver`` (and any checkpointer that is not SQLite or PostgreSQL): a table in this process, under a lock.
  Its leases do not expire: a holder releases in ``finally``. For a checkpointer other processes may share (a
  custom saver), that holds in this process only, and the agent says so once (:func:`shared`).
- ``SqliteSaver`` / ``AsyncSqliteSaver``: tables in the same SQLite file, changed under ``BEGIN IMMEDIATE``.
- ``PostgresSaver`` / ``AsyncPostgresSaver``: tables in the same database. Taking a lease is one statement,
  ``INSERT ... ON CONFLICT (thread_id) DO UPDATE ... WHERE expired OR held by me``; expiry uses the server's clock, so
  the workers' clocks need not agree.

Waiting runs (``on_conflict="wait"``) take a ticket in a waiters table and are served in ticket order; a waiter that
stops polling (its process died) drops out of the line after ``ttl``. Cancel requests are a column of the lease row,
read by the holder's heartbeat, so a run can be cancelled from any process that reaches the database. Resolved
interrupt ids are recorded per thread so a late duplicate resume is told apart from a resume of a thread that never
paused.

The lease algorithm is written once, as a generator of steps (:func:`acquire_flow`), and driven by a sync or an async
driver; each backend supplies the primitive operations in both forms.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from middleware_kit._engine import drive as drive_steps
from middleware_kit._engine.compat import PG_LOAD_CHECKPOINT_TUPLE, pg_checkpoint_query
from middleware_kit.flow import Sleep
from middleware_kit.run_control.errors import RunControlConfigError, ThreadBusyError

__all__ = [
    "AsyncPostgresLeaseBackend",
    "AsyncSqliteLeaseBackend",
    "Holder",
    "LeaseBackend",
    "MemoryLeaseBackend",
    "PostgresLeaseBackend",
    "SqliteLeaseBackend",
    "acquire_flow",
    "reading_flow",
    "backend_for",
    "drive",
    "shared",
    "adrive",
    "take_at_once",
]

R = TypeVar("R")

LEASES = "middleware_kit_run_leases"
WAITERS = "middleware_kit_run_waiters"
RESOLVED = "middleware_kit_resolved_interrupts"
QUEUED = "middleware_kit_queued_inputs"
RESOLVED_KEPT = 64
"""Resolved interrupt ids remembered per thread in memory (the SQL tables keep every one)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a thread's lease (``run_id`` None: nobody, but earlier waiters are queued for it)."""

    run_id: str | None
    owner: str | None


@dataclass(frozen=True, slots=True)
class Call:
    """A step of a flow: call the backend operation ``name`` (``a`` + name in async drivers) with ``args``."""

    name: str
    args: tuple[Any, ...]


LeaseStep = Call | Sleep
"""What a lease flow yields: a backend operation, or a :class:`~middleware_kit.flow.Sleep` (``time.sleep``
under the
sync driver, ``asyncio.sleep`` under the async one)."""


class LeaseBackend:
    """Primitive lease operations, each in a sync and an async (``a``-prefixed) form.

    ``try_acquire`` returns None when the lease was taken (or renewed: the run already held it), else the holder.
    """

    saver: Any = None
    """The checkpointer whose threads this backend leases."""
    expires: bool = True
    """False for the in-process table: its holders release in ``finally`` and die with the process."""
    in_process: bool = False
    """True for the in-process table: its operations are dict updates under a lock, never I/O, so they may be called
    from a running event loop (:func:`take_at_once`)."""
    reads_with_lease: bool = False
    """True when a run's first try for the lease travels with its first checkpoint read, in one round trip
    (PostgreSQL: the two statements pipelined): the run's saver takes the lease at that read (:func:`reading_flow`)
    instead of the run taking it beforehand."""

    def setup(self) -> None:
        """Create the tables this backend needs (idempotent; also done on first use). Nothing for in-process."""

    async def asetup(self) -> None:
        """Async twin of :meth:`setup`."""

    def try_acquire(self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None) -> Holder | None:
        raise NotImplementedError

    def enqueue(self, thread_id: str, run_id: str) -> int:
        raise NotImplementedError

    def dequeue(self, thread_id: str, ticket: int) -> None:
        raise NotImplementedError

    def renew(self, thread_id: str, run_id: str, ttl: float) -> tuple[bool, str | None]:
        """Extend the lease; (still held, cancel reason requested for it or None)."""
        raise NotImplementedError

    def release(self, thread_id: str, run_id: str) -> None:
        raise NotImplementedError

    def request_cancel(self, thread_id: str, run_id: str | None, reason: str) -> str | None:
        """Flag the live holder of the thread (only if it is ``run_id``, when given); the flagged run id or None."""
        raise NotImplementedError

    def record_resolved(self, thread_id: str, interrupt_ids: Sequence[str], run_id: str) -> None:
        raise NotImplementedError

    def resolved(self, thread_id: str) -> list[tuple[str, str]]:
        """(interrupt id, run that resolved it), newest first."""
        raise NotImplementedError

    def push_input(self, thread_id: str, value: Any) -> None:
        """Hold ``value`` (a run's input) at the end of the thread's queue."""
        raise NotImplementedError

    def pop_input(self, thread_id: str) -> tuple[bool, Any]:
        """(True, the oldest held input), removed from the queue; (False, None) when the queue is empty."""
        raise NotImplementedError

    def try_acquire_reading(
        self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None, config: Any
    ) -> tuple[Holder | None, Any]:
        """:meth:`try_acquire`, then (only if it was taken) the saver's checkpoint for ``config``: (holder, the
        checkpoint tuple or None). A backend with :attr:`reads_with_lease` sends both in one round trip."""
        holder = self.try_acquire(thread_id, run_id, owner, ttl, ticket)
        return holder, None if holder is not None else self.saver.get_tuple(config)

    async def atry_acquire(
        self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None
    ) -> Holder | None:
        return self.try_acquire(thread_id, run_id, owner, ttl, ticket)

    async def atry_acquire_reading(
        self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None, config: Any
    ) -> tuple[Holder | None, Any]:
        holder = await self.atry_acquire(thread_id, run_id, owner, ttl, ticket)
        return holder, None if holder is not None else await self.saver.aget_tuple(config)

    async def apush_input(self, thread_id: str, value: Any) -> None:
        self.push_input(thread_id, value)

    async def apop_input(self, thread_id: str) -> tuple[bool, Any]:
        return self.pop_input(thread_id)

    async def aenqueue(self, thread_id: str, run_id: str) -> int:
        return self.enqueue(thread_id, run_id)

    async def adequeue(self, thread_id: str, ticket: int) -> None:
        self.dequeue(thread_id, ticket)

    async def arenew(self, thread_id: str, run_id: str, ttl: float) -> tuple[bool, str | None]:
        return self.renew(thread_id, run_id, ttl)

    async def arelease(self, thread_id: str, run_id: str) -> None:
        self.release(thread_id, run_id)

    async def arequest_cancel(self, thread_id: str, run_id: str | None, reason: str) -> str | None:
        return self.request_cancel(thread_id, run_id, reason)

    async def arecord_resolved(self, thread_id: str, interrupt_ids: Sequence[str], run_id: str) -> None:
        self.record_resolved(thread_id, interrupt_ids, run_id)

    async def aresolved(self, thread_id: str) -> list[tuple[str, str]]:
        return self.resolved(thread_id)


# -- the algorithm, once ---------------------------------------------------------------------------------------------
def acquire_flow(
    thread_id: str,
    run_id: str,
    owner: str,
    *,
    ttl: float,
    wait: bool,
    wait_timeout: float | None,
    poll: float,
) -> Generator[LeaseStep, Any, float]:
    """Take the lease of ``thread_id`` for ``run_id``: at once or :class:`ThreadBusyError` (``wait=False``), or in
    ticket order, giving up after ``wait_timeout`` seconds (None: wait forever). Returns when (``time.monotonic()``)
    the statement that took it was sent: the lease cannot expire before that plus ``ttl``."""
    sent = time.monotonic()
    holder: Holder | None = yield Call("try_acquire", (thread_id, run_id, owner, ttl, None))
    if holder is None:
        return sent
    if not wait:
        raise ThreadBusyError(thread_id, holder.run_id, holder.owner)
    started = time.monotonic()
    ticket: int = yield Call("enqueue", (thread_id, run_id))
    try:
        delay = min(0.005, poll)
        while True:
            sent = time.monotonic()
            holder = yield Call("try_acquire", (thread_id, run_id, owner, ttl, ticket))
            if holder is None:
                return sent
            waited = time.monotonic() - started
            if wait_timeout is not None and waited >= wait_timeout:
                raise ThreadBusyError(thread_id, holder.run_id, holder.owner, waited=wait_timeout)
            pause = delay if wait_timeout is None else min(delay, max(wait_timeout - waited, 0.0))
            yield Sleep(pause)
            delay = min(delay * 2, poll)
    finally:
        yield Call("dequeue", (thread_id, ticket))


def take_at_once(backend: LeaseBackend, thread_id: str, run_id: str, owner: str, ttl: float) -> float | None:
    """:func:`acquire_flow`'s first try on an in-process backend, with no driver (it is every run's first step):
    when the statement that took the lease was sent; None when it was not taken (the thread is held, or runs wait
    for it: the caller runs :func:`acquire_flow`, which waits its turn or raises) or the backend is not in-process."""
    if not backend.in_process:
        return None
    sent = time.monotonic()
    return sent if backend.try_acquire(thread_id, run_id, owner, ttl, None) is None else None


def reading_flow(
    acquire: Generator[LeaseStep, Any, float], config: Any
) -> Generator[LeaseStep, Any, tuple[float, bool, Any]]:
    """``acquire`` (an :func:`acquire_flow`) with its first try sent together with the read of the thread's
    checkpoint for ``config`` (:meth:`LeaseBackend.try_acquire_reading`). Returns (when the statement that took the
    lease was sent, whether a checkpoint was read under the lease, that checkpoint). When the first try fails and
    the flow waits its turn, nothing was read: the caller reads once the lease is taken."""
    first = next(acquire)
    if not isinstance(first, Call) or first.name != "try_acquire":  # pragma: no cover - acquire_flow's first step
        raise TypeError(f"reading_flow needs an acquire_flow, whose first step is try_acquire; got {first!r}")
    holder, found = yield Call("try_acquire_reading", (*first.args, config))
    sent = yield from _resumed(acquire, holder)
    return sent, holder is None, found


def _resumed(flow: Generator[LeaseStep, Any, R], value: Any) -> Generator[LeaseStep, Any, R]:
    """The rest of the started ``flow``, ``value`` sent to the ``yield`` it stopped at (``yield from`` for a
    generator already started): its steps pass through, results and exceptions are handed back to it."""
    resume: Callable[[Any], LeaseStep] = flow.send
    while True:
        try:
            step = resume(value)
        except StopIteration as stop:
            return cast(R, stop.value)
        try:
            value, resume = (yield step), flow.send
        except GeneratorExit:
            flow.close()
            raise
        except BaseException as exc:  # the step failed or was cancelled: raised into the flow at its yield
            value, resume = exc, flow.throw


def _caller(backend: Any, prefix: str, sleep: Callable[[float], Any]) -> Callable[[Call | Sleep], Any]:
    """What a lease flow's yields mean on ``backend`` in one mode: a :class:`Call` is its operation (``prefix`` + name:
    ``""`` under the sync driver, ``"a"`` under the async one), a :class:`Sleep` is ``sleep``. Resolved when the step
    runs, so a backend needs only the form of the mode it is driven in."""

    def call(step: Call | Sleep) -> Any:
        if isinstance(step, Sleep):
            return sleep(step.seconds)
        return getattr(backend, prefix + step.name)(*step.args)

    return call


def drive(flow: Generator[LeaseStep, Any, Any], backend: Any) -> Any:
    """Run a flow with sync calls on ``backend`` (a :class:`LeaseBackend`, or anything with its operations), on the
    engine's one driver (:func:`middleware_kit._engine.drive.run_sync`)."""
    return drive_steps.run_sync(flow, _caller(backend, "", time.sleep))


async def adrive(flow: Generator[LeaseStep, Any, Any], backend: Any) -> Any:
    """Run a flow with async calls (:func:`middleware_kit._engine.drive.run_async`)."""
    return await drive_steps.run_async(flow, _caller(backend, "a", asyncio.sleep))


# -- in process ------------------------------------------------------------------------------------------------------
class MemoryLeaseBackend(LeaseBackend):
    """Leases of one process (``InMemorySaver``): a dict under a lock. Leases do not expire (see module doc)."""

    expires = False
    in_process = True

    def __init__(self, saver: Any = None) -> None:
        self.saver = saver
        self._lock = threading.Lock()
        self._leases: dict[str, list[Any]] = {}  # thread -> [run_id, owner, cancel reason]
        self._waiters: dict[str, list[int]] = {}
        self._resolved: dict[str, OrderedDict[str, str]] = {}
        self._queued: dict[str, list[Any]] = {}
        self._tickets = 0

    def push_input(self, thread_id: str, value: Any) -> None:
        with self._lock:
            self._queued.setdefault(thread_id, []).append(copy.deepcopy(value))

    def pop_input(self, thread_id: str) -> tuple[bool, Any]:
        with self._lock:
            line = self._queued.get(thread_id)
            if not line:
                return False, None
            value = line.pop(0)
            if not line:
                del self._queued[thread_id]
            return True, value

    def try_acquire(self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None) -> Holder | None:
        with self._lock:
            held = self._leases.get(thread_id)
            if held is not None and held[0] != run_id:
                return Holder(held[0], held[1])
            line = self._waiters.get(thread_id)
            if line and line[0] != ticket:
                return Holder(None, None)
            self._leases[thread_id] = [run_id, owner, None]
            return None

    def enqueue(self, thread_id: str, run_id: str) -> int:
        with self._lock:
            self._tickets += 1
            self._waiters.setdefault(thread_id, []).append(self._tickets)
            return self._tickets

    def dequeue(self, thread_id: str, ticket: int) -> None:
        with self._lock:
            line = self._waiters.get(thread_id)
            if line is not None and ticket in line:
                line.remove(ticket)
                if not line:
                    del self._waiters[thread_id]

    def renew(self, thread_id: str, run_id: str, ttl: float) -> tuple[bool, str | None]:
        with self._lock:
            held = self._leases.get(thread_id)
            if held is None or held[0] != run_id:
                return False, None
            return True, held[2]

    def release(self, thread_id: str, run_id: str) -> None:
        with self._lock:
            held = self._leases.get(thread_id)
            if held is not None and held[0] == run_id:
                del self._leases[thread_id]

    def request_cancel(self, thread_id: str, run_id: str | None, reason: str) -> str | None:
        with self._lock:
            held = self._leases.get(thread_id)
            if held is None or (run_id is not None and held[0] != run_id):
                return None
            held[2] = reason
            return str(held[0])

    def record_resolved(self, thread_id: str, interrupt_ids: Sequence[str], run_id: str) -> None:
        with self._lock:
            done = self._resolved.setdefault(thread_id, OrderedDict())
            for interrupt_id in interrupt_ids:
                done.pop(interrupt_id, None)
                done[interrupt_id] = run_id
            while len(done) > RESOLVED_KEPT:
                done.popitem(last=False)

    def resolved(self, thread_id: str) -> list[tuple[str, str]]:
        with self._lock:
            return list(reversed((self._resolved.get(thread_id) or {}).items()))


# -- SQL -------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Dialect:
    now: str
    serial: str
    real: str
    blob: str
    param: str

    def q(self, sql: str) -> str:
        return sql.replace("{now}", self.now).replace("?", self.param)


SQLITE = _Dialect(
    now="((julianday('now') - 2440587.5) * 86400.0)", serial="INTEGER PRIMARY KEY AUTOINCREMENT", real="REAL",
    blob="BLOB", param="?",
)
POSTGRES = _Dialect(
    now="extract(epoch from clock_timestamp())::float8", serial="BIGSERIAL PRIMARY KEY", real="DOUBLE PRECISION",
    blob="BYTEA", param="%s",
)

Stmt = tuple[str, tuple[Any, ...]]


def _ddl(d: _Dialect) -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {LEASES} (thread_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, owner TEXT NOT NULL, "
        f"expires_at {d.real} NOT NULL, cancel TEXT)",
        f"CREATE TABLE IF NOT EXISTS {WAITERS} (ticket {d.serial}, thread_id TEXT NOT NULL, run_id TEXT NOT NULL, "
        f"seen_at {d.real} NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {WAITERS}_thread ON {WAITERS} (thread_id, ticket)",
        f"CREATE TABLE IF NOT EXISTS {RESOLVED} (thread_id TEXT NOT NULL, interrupt_id TEXT NOT NULL, "
        f"run_id TEXT NOT NULL, resolved_at {d.real} NOT NULL, PRIMARY KEY (thread_id, interrupt_id))",
        f"CREATE TABLE IF NOT EXISTS {QUEUED} (seq {d.serial}, thread_id TEXT NOT NULL, type TEXT NOT NULL, "
        f"data {d.blob} NOT NULL)",
    ]


class _SqlOps:
    """Statements of each operation, and how to read their results (shared by the four SQL backends)."""

    def __init__(self, dialect: _Dialect) -> None:
        self.d = dialect

    def acquire(self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None) -> list[Stmt]:
        q = self.d.q
        ahead = "" if ticket is None else " AND w.ticket < ?"
        queue_args: tuple[Any, ...] = (thread_id, ttl) if ticket is None else (thread_id, ttl, ticket)
        stmts: list[Stmt] = []
        if ticket is not None:
            stmts.append((q(f"UPDATE {WAITERS} SET seen_at = {{now}} WHERE ticket = ?"), (ticket,)))
        stmts += [
            (
                q(
                    f"INSERT INTO {LEASES} (thread_id, run_id, owner, expires_at, cancel) "
                    f"SELECT ?, ?, ?, {{now}} + ?, NULL WHERE NOT EXISTS (SELECT 1 FROM {WAITERS} w "
                    f"WHERE w.thread_id = ? AND w.seen_at > {{now}} - ?{ahead}) "
                    f"ON CONFLICT (thread_id) DO UPDATE SET run_id = excluded.run_id, owner = excluded.owner, "
                    f"expires_at = excluded.expires_at, cancel = NULL "
                    f"WHERE {LEASES}.expires_at < {{now}} OR {LEASES}.run_id = excluded.run_id RETURNING run_id"
                ),
                (thread_id, run_id, owner, ttl, *queue_args),
            ),
        ]
        return stmts

    def holder(self, thread_id: str) -> list[Stmt]:
        sql = f"SELECT run_id, owner FROM {LEASES} WHERE thread_id = ? AND expires_at >= {{now}}"
        return [(self.d.q(sql), (thread_id,))]

    @staticmethod
    def held_by(rows: list[list[tuple[Any, ...]]]) -> Holder:
        last = rows[-1]
        return Holder(last[0][0], last[0][1]) if last else Holder(None, None)

    def enqueue(self, thread_id: str, run_id: str) -> list[Stmt]:
        sql = f"INSERT INTO {WAITERS} (thread_id, run_id, seen_at) VALUES (?, ?, {{now}}) RETURNING ticket"
        return [(self.d.q(sql), (thread_id, run_id))]

    def dequeue(self, thread_id: str, ticket: int) -> list[Stmt]:
        return [(self.d.q(f"DELETE FROM {WAITERS} WHERE ticket = ?"), (ticket,))]

    def renew(self, thread_id: str, run_id: str, ttl: float) -> list[Stmt]:
        sql = f"UPDATE {LEASES} SET expires_at = {{now}} + ? WHERE thread_id = ? AND run_id = ? RETURNING cancel"
        return [(self.d.q(sql), (ttl, thread_id, run_id))]

    @staticmethod
    def renewed(rows: list[list[tuple[Any, ...]]], run_id: str) -> tuple[bool, str | None]:
        last = rows[-1]
        return (True, last[0][0]) if last else (False, None)

    def release(self, thread_id: str, run_id: str) -> list[Stmt]:
        return [(self.d.q(f"DELETE FROM {LEASES} WHERE thread_id = ? AND run_id = ?"), (thread_id, run_id))]

    def cancel(self, thread_id: str, run_id: str | None, reason: str) -> list[Stmt]:
        q = self.d.q
        only = "" if run_id is None else " AND run_id = ?"
        args: tuple[Any, ...] = (reason, thread_id) if run_id is None else (reason, thread_id, run_id)
        sql = f"UPDATE {LEASES} SET cancel = ? WHERE thread_id = ? AND expires_at >= {{now}}{only} RETURNING run_id"
        return [(q(sql), args)]

    @staticmethod
    def cancelled(rows: list[list[tuple[Any, ...]]], run_id: str | None, reason: str) -> str | None:
        last = rows[-1]
        return str(last[0][0]) if last else None

    def record(self, thread_id: str, interrupt_ids: Sequence[str], run_id: str) -> list[Stmt]:
        sql = self.d.q(
            f"INSERT INTO {RESOLVED} (thread_id, interrupt_id, run_id, resolved_at) VALUES (?, ?, ?, {{now}}) "
            f"ON CONFLICT (thread_id, interrupt_id) DO UPDATE SET run_id = excluded.run_id, "
            f"resolved_at = excluded.resolved_at"
        )
        return [(sql, (thread_id, i, run_id)) for i in interrupt_ids]

    def push(self, thread_id: str, kind: str, data: bytes) -> list[Stmt]:
        return [(self.d.q(f"INSERT INTO {QUEUED} (thread_id, type, data) VALUES (?, ?, ?)"), (thread_id, kind, data))]

    def pop(self, thread_id: str) -> list[Stmt]:
        sql = (f"DELETE FROM {QUEUED} WHERE seq = (SELECT min(seq) FROM {QUEUED} WHERE thread_id = ?) "
               f"RETURNING type, data")
        return [(self.d.q(sql), (thread_id,))]

    def resolved(self, thread_id: str) -> list[Stmt]:
        sql = f"SELECT interrupt_id, run_id FROM {RESOLVED} WHERE thread_id = ? ORDER BY resolved_at DESC LIMIT 64"
        return [(self.d.q(sql), (thread_id,))]


class _SqlBackend(LeaseBackend):
    """The operations of :class:`_SqlOps` over ``_run`` (sync) and ``_arun`` (async) executors."""

    dialect: _Dialect

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.ops = _SqlOps(self.dialect)
        self._ready = False

    def _run(self, stmts: list[Stmt], write: bool = True) -> list[list[tuple[Any, ...]]]:
        raise self._wrong_mode("invoke/stream", "ainvoke/astream")

    async def _arun(self, stmts: list[Stmt], write: bool = True) -> list[list[tuple[Any, ...]]]:
        return self._run(stmts, write)

    def _wrong_mode(self, used: str, use: str) -> RunControlConfigError:
        return RunControlConfigError(
            f"{type(self.saver).__name__} is used with {use} only; this agent was called with {used}. Use a "
            f"checkpointer of the matching kind (e.g. SqliteSaver for invoke, AsyncSqliteSaver for ainvoke).",
            parameter="checkpointer",
        )

    def setup(self) -> None:
        """Create the run-control tables (idempotent; also done on first use)."""
        self._run([])

    async def asetup(self) -> None:
        await self._arun([])

    def try_acquire(self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None) -> Holder | None:
        if self._run(self.ops.acquire(thread_id, run_id, owner, ttl, ticket))[-1]:
            return None
        return self.ops.held_by(self._run(self.ops.holder(thread_id), write=False))

    async def atry_acquire(
        self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None
    ) -> Holder | None:
        if (await self._arun(self.ops.acquire(thread_id, run_id, owner, ttl, ticket)))[-1]:
            return None
        return self.ops.held_by(await self._arun(self.ops.holder(thread_id), write=False))

    def enqueue(self, thread_id: str, run_id: str) -> int:
        return int(self._run(self.ops.enqueue(thread_id, run_id))[-1][0][0])

    async def aenqueue(self, thread_id: str, run_id: str) -> int:
        return int((await self._arun(self.ops.enqueue(thread_id, run_id)))[-1][0][0])

    def dequeue(self, thread_id: str, ticket: int) -> None:
        self._run(self.ops.dequeue(thread_id, ticket))

    async def adequeue(self, thread_id: str, ticket: int) -> None:
        await self._arun(self.ops.dequeue(thread_id, ticket))

    def renew(self, thread_id: str, run_id: str, ttl: float) -> tuple[bool, str | None]:
        return self.ops.renewed(self._run(self.ops.renew(thread_id, run_id, ttl)), run_id)

    async def arenew(self, thread_id: str, run_id: str, ttl: float) -> tuple[bool, str | None]:
        return self.ops.renewed(await self._arun(self.ops.renew(thread_id, run_id, ttl)), run_id)

    def release(self, thread_id: str, run_id: str) -> None:
        self._run(self.ops.release(thread_id, run_id))

    async def arelease(self, thread_id: str, run_id: str) -> None:
        await self._arun(self.ops.release(thread_id, run_id))

    def request_cancel(self, thread_id: str, run_id: str | None, reason: str) -> str | None:
        return self.ops.cancelled(self._run(self.ops.cancel(thread_id, run_id, reason)), run_id, reason)

    async def arequest_cancel(self, thread_id: str, run_id: str | None, reason: str) -> str | None:
        return self.ops.cancelled(await self._arun(self.ops.cancel(thread_id, run_id, reason)), run_id, reason)

    def record_resolved(self, thread_id: str, interrupt_ids: Sequence[str], run_id: str) -> None:
        self._run(self.ops.record(thread_id, interrupt_ids, run_id))

    async def arecord_resolved(self, thread_id: str, interrupt_ids: Sequence[str], run_id: str) -> None:
        await self._arun(self.ops.record(thread_id, interrupt_ids, run_id))

    def resolved(self, thread_id: str) -> list[tuple[str, str]]:
        return [(str(a), str(b)) for a, b in self._run(self.ops.resolved(thread_id), write=False)[-1]]

    def push_input(self, thread_id: str, value: Any) -> None:
        self._run(self.ops.push(thread_id, *self.saver.serde.dumps_typed(value)))

    async def apush_input(self, thread_id: str, value: Any) -> None:
        await self._arun(self.ops.push(thread_id, *self.saver.serde.dumps_typed(value)))

    def _loaded(self, rows: list[list[tuple[Any, ...]]]) -> tuple[bool, Any]:
        if not rows[-1]:
            return False, None
        kind, data = rows[-1][0]
        return True, self.saver.serde.loads_typed((str(kind), bytes(data)))

    def pop_input(self, thread_id: str) -> tuple[bool, Any]:
        return self._loaded(self._run(self.ops.pop(thread_id)))

    async def apop_input(self, thread_id: str) -> tuple[bool, Any]:
        return self._loaded(await self._arun(self.ops.pop(thread_id)))

    async def aresolved(self, thread_id: str) -> list[tuple[str, str]]:
        return [(str(a), str(b)) for a, b in (await self._arun(self.ops.resolved(thread_id), write=False))[-1]]


class SqliteLeaseBackend(_SqlBackend):
    """Tables in the ``SqliteSaver``'s file, on its connection and under its lock; ``BEGIN IMMEDIATE`` per change."""

    dialect = SQLITE

    def _run(self, stmts: list[Stmt], write: bool = True) -> list[list[tuple[Any, ...]]]:
        conn = self.saver.conn
        with self.saver.lock:
            sqlite_setup(self, conn, _ddl(self.dialect))
            if not stmts:
                return []
            if not write:
                return [conn.execute(sql, args).fetchall() for sql, args in stmts]
            if conn.in_transaction:  # a checkpoint write interrupted before its commit: finish it, as its next would
                conn.commit()
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = [conn.execute(sql, args).fetchall() for sql, args in stmts]
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
            return out


class AsyncSqliteLeaseBackend(_SqlBackend):
    """Tables in the ``AsyncSqliteSaver``'s file, on its ``aiosqlite`` connection and under its lock."""

    dialect = SQLITE

    @staticmethod
    async def _begin(conn: Any) -> None:
        """``BEGIN IMMEDIATE``. A checkpoint write whose task was cancelled leaves its statement queued on the
        connection's thread after the saver's lock is released: it opens an implicit transaction that its commit
        never closes. Commit it, as the saver's next commit would, and begin again."""
        import sqlite3

        for attempt in range(2):
            if conn.in_transaction:
                await conn.commit()
            try:
                await conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if attempt or "within a transaction" not in str(exc):
                    raise

    async def _arun(self, stmts: list[Stmt], write: bool = True) -> list[list[tuple[Any, ...]]]:
        conn = self.saver.conn
        async with self.saver.lock:
            await asqlite_setup(self, conn, _ddl(self.dialect))
            if not stmts:
                return []
            if not write:
                out = []
                for sql, args in stmts:
                    cursor = await conn.execute(sql, args)
                    out.append(list(await cursor.fetchall()))
                return out
            await self._begin(conn)
            try:
                out = []
                for sql, args in stmts:
                    cursor = await conn.execute(sql, args)
                    out.append(list(await cursor.fetchall()))
            except BaseException:
                await conn.rollback()
                raise
            await conn.commit()
            return out


def _pg_ddl_race(exc: BaseException) -> bool:
    """Concurrent ``CREATE TABLE IF NOT EXISTS`` in two workers can fail on the catalog's unique index."""
    import psycopg.errors

    return isinstance(exc, (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable,
                            psycopg.errors.DuplicateObject))


@dataclass(frozen=True, slots=True)
class _Op:
    """A step of the PostgreSQL body: ``target.name(*args)`` (awaited under the async driver: psycopg's sync and async
    classes have the same method names)."""

    target: Any
    name: str
    args: tuple[Any, ...] = ()


def _pg_caller(enter: str, exit_: str) -> Callable[[_Op], Any]:
    """What an :class:`_Op` means in one mode; ``enter``/``exit_`` name the context-manager methods of the mode
    (``__enter__``/``__exit__``, or ``__aenter__``/``__aexit__``) that the ops ``"enter"``/``"exit"`` stand for."""
    names = {"enter": enter, "exit": exit_}

    def call(op: _Op) -> Any:
        return getattr(op.target, names.get(op.name, op.name))(*op.args)

    return call


_PG_SYNC = _pg_caller("__enter__", "__exit__")
_PG_ASYNC = _pg_caller("__aenter__", "__aexit__")


def _within(manager: Any, inside: Callable[[Any], Generator[_Op, Any, R]]) -> Generator[_Op, Any, R]:
    """``with manager as value: return (yield from inside(value))``, in the driver's mode (``async with`` under the
    async driver)."""
    value = yield _Op(manager, "enter")
    try:
        result = yield from inside(value)
    except BaseException as exc:
        if not (yield _Op(manager, "exit", (type(exc), exc, exc.__traceback__))):
            raise
        return cast(R, None)  # the manager suppressed the exception
    yield _Op(manager, "exit", (None, None, None))
    return result


def _postgres_body(backend: Any, stmts: list[Stmt]) -> Generator[_Op, Any, list[list[tuple[Any, ...]]]]:
    """``_run``/``_arun`` of the PostgreSQL backends, written once: the tables on first use (a concurrent ``CREATE``
    in another worker is retried), then ``stmts`` (in one transaction when there are several)."""
    return (yield from _within(backend._conn(), partial(_on_connection, backend, stmts)))


def sqlite_setup(owner: Any, conn: Any, statements: Sequence[str]) -> None:
    """Create ``owner``'s tables on the SQLite connection ``conn`` once (``owner._ready``); the caller holds the
    saver's lock. Shared by the lease and the call ledger."""
    if owner._ready:
        return
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    owner._ready = True


async def asqlite_setup(owner: Any, conn: Any, statements: Sequence[str]) -> None:
    """:func:`sqlite_setup` on an ``aiosqlite`` connection (``AsyncSqliteSaver``'s); the caller holds its lock."""
    if owner._ready:
        return
    for sql in statements:
        await conn.execute(sql)
    await conn.commit()
    owner._ready = True


def pg_setup(owner: Any, conn: Any, statements: Sequence[str]) -> Generator[_Op, Any, None]:
    """Create ``owner``'s tables on ``conn`` once (``owner._ready``), in a transaction, retried when another worker
    creates them at the same moment. Shared by the lease and the call ledger."""
    if owner._ready:
        return
    ddl = [(sql, None) for sql in statements]
    for attempt in range(3):
        try:
            yield from _within(conn.transaction(), lambda _: _executed(conn, ddl, rows=False))
            break
        except Exception as exc:
            if attempt == 2 or not _pg_ddl_race(exc):
                raise
    owner._ready = True


def _on_connection(backend: Any, stmts: list[Stmt], conn: Any) -> Generator[_Op, Any, list[list[tuple[Any, ...]]]]:
    from psycopg.rows import tuple_row

    yield from pg_setup(backend, conn, _ddl(backend.dialect))
    if not stmts:
        return []

    def on_cursor(_: Any) -> Generator[_Op, Any, list[list[tuple[Any, ...]]]]:
        return (yield from _within(conn.cursor(row_factory=tuple_row), lambda cur: _executed(cur, stmts, rows=True)))

    if len(stmts) > 1:  # one statement is atomic by itself (autocommit: one round trip)
        return (yield from _within(conn.transaction(), on_cursor))
    return (yield from on_cursor(None))


def _executed(
    target: Any, stmts: Sequence[tuple[str, Any]], *, rows: bool
) -> Generator[_Op, Any, list[list[tuple[Any, ...]]]]:
    """Each statement on ``target`` (a connection, or a cursor: with ``rows``, each statement's rows)."""
    out: list[list[tuple[Any, ...]]] = []
    for sql, args in stmts:
        yield _Op(target, "execute", (sql,) if args is None else (sql, args))
        if rows:
            out.append((yield _Op(target, "fetchall")) if target.description else [])
    return out


def _pipelined_read(saver: Any, read: str, owner: type) -> bool:
    """Whether the first try for the lease can be pipelined with the checkpoint read: ``saver`` reads checkpoints
    with LangGraph's own ``read`` method of ``owner`` (``PostgresSaver.get_tuple``, ``AsyncPostgresSaver.aget_tuple``;
    a subclass that reads otherwise keeps its own read) and libpq can pipeline."""
    from psycopg import Capabilities

    return getattr(type(saver), read, None) is getattr(owner, read) and Capabilities().has_pipeline()


def _read_body(backend: Any, acquire: Stmt, config: Any) -> Generator[_Op, Any, tuple[bool, Any]]:
    """The lease's ``acquire`` statement and the checkpoint read of ``config``, pipelined on the saver's connection
    (one round trip). Returns (taken, the checkpoint's row: None when not taken or there is none). The server runs
    them in order and, under READ COMMITTED (PostgreSQL's default), the read's snapshot is taken after the lease
    statement: it sees every write of the run that held the thread before."""

    def on_connection(conn: Any) -> Generator[_Op, Any, tuple[bool, Any]]:
        from psycopg.rows import dict_row, tuple_row

        yield from pg_setup(backend, conn, _ddl(backend.dialect))
        sql, args = pg_checkpoint_query(backend.saver, config)

        def on_cursors(lease: Any, read: Any) -> Generator[_Op, Any, tuple[bool, Any]]:
            def send(_: Any) -> Generator[_Op, Any, None]:
                yield _Op(lease, "execute", acquire)
                yield _Op(read, "execute", (sql, args))

            yield from _within(conn.pipeline(), send)
            if not (yield _Op(lease, "fetchall")):
                return False, None
            return True, (yield _Op(read, "fetchone"))

        return (yield from _within(conn.cursor(row_factory=tuple_row), lambda lease: _within(
            conn.cursor(binary=True, row_factory=dict_row), partial(on_cursors, lease))))

    return (yield from _within(backend._conn(), on_connection))


def _acquired_reading(backend: Any, acquire: Stmt, config: Any, read: str) -> Generator[_Op, Any, tuple[Any, Any]]:
    """``try_acquire_reading`` of the PostgreSQL backends, written once (``read``: the saver's ``get_tuple`` or
    ``aget_tuple``). Taken: the row loaded as the saver's own read loads it (a checkpoint older than format 4 with a
    parent, whose pending sends need migrating, is read again by the saver itself, now under the lease). Not taken:
    who holds the thread (a second round trip, on the conflict path only)."""
    taken, row = yield from _read_body(backend, acquire, config)
    if not taken:
        thread_id = config["configurable"]["thread_id"]
        return backend.ops.held_by((yield from _postgres_body(backend, backend.ops.holder(thread_id)))), None
    if row is None:
        return None, None
    if row["checkpoint"]["v"] < 4 and row["parent_checkpoint_id"]:
        return None, (yield _Op(backend.saver, read, (config,)))
    return None, (yield _Op(backend.saver, PG_LOAD_CHECKPOINT_TUPLE, (row,)))


class PostgresLeaseBackend(_SqlBackend):
    """Tables in the ``PostgresSaver``'s database, on its connection (or pool) and under its lock. A run's first
    try for the lease is pipelined with its first checkpoint read (:attr:`reads_with_lease`)."""

    dialect = POSTGRES

    def __init__(self, saver: Any) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver

        super().__init__(saver)
        self.reads_with_lease = _pipelined_read(saver, "get_tuple", PostgresSaver)

    def try_acquire_reading(
        self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None, config: Any
    ) -> tuple[Holder | None, Any]:
        if ticket is not None or not self.reads_with_lease:
            return super().try_acquire_reading(thread_id, run_id, owner, ttl, ticket, config)
        (acquire,) = self.ops.acquire(thread_id, run_id, owner, ttl, None)
        return cast(tuple[Holder | None, Any],
                    drive_steps.run_sync(_acquired_reading(self, acquire, config, "get_tuple"), _PG_SYNC))

    @contextlib.contextmanager
    def _conn(self) -> Iterator[Any]:
        from psycopg_pool import ConnectionPool

        with self.saver.lock:
            if isinstance(self.saver.conn, ConnectionPool):
                with self.saver.conn.connection() as conn:
                    yield conn
            else:
                yield self.saver.conn

    def _run(self, stmts: list[Stmt], write: bool = True) -> list[list[tuple[Any, ...]]]:
        return drive_steps.run_sync(_postgres_body(self, stmts), _PG_SYNC)


class AsyncPostgresLeaseBackend(_SqlBackend):
    """Tables in the ``AsyncPostgresSaver``'s database, on its connection (or pool) and under its lock; the first
    try for the lease is pipelined with the first checkpoint read, as in :class:`PostgresLeaseBackend`."""

    dialect = POSTGRES

    def __init__(self, saver: Any) -> None:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        super().__init__(saver)
        self.reads_with_lease = _pipelined_read(saver, "aget_tuple", AsyncPostgresSaver)

    async def atry_acquire_reading(
        self, thread_id: str, run_id: str, owner: str, ttl: float, ticket: int | None, config: Any
    ) -> tuple[Holder | None, Any]:
        if ticket is not None or not self.reads_with_lease:
            return await super().atry_acquire_reading(thread_id, run_id, owner, ttl, ticket, config)
        (acquire,) = self.ops.acquire(thread_id, run_id, owner, ttl, None)
        return cast(tuple[Holder | None, Any],
                    await drive_steps.run_async(_acquired_reading(self, acquire, config, "aget_tuple"), _PG_ASYNC))

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[Any]:
        from psycopg_pool import AsyncConnectionPool

        async with self.saver.lock:
            if isinstance(self.saver.conn, AsyncConnectionPool):
                async with self.saver.conn.connection() as conn:
                    yield conn
            else:
                yield self.saver.conn

    async def _arun(self, stmts: list[Stmt], write: bool = True) -> list[list[tuple[Any, ...]]]:
        return await drive_steps.run_async(_postgres_body(self, stmts), _PG_ASYNC)


_BACKENDS: weakref.WeakKeyDictionary[Any, LeaseBackend] = weakref.WeakKeyDictionary()
_BACKENDS_LOCK = threading.Lock()


def _kind(saver: Any) -> Callable[[Any], LeaseBackend] | None:
    for cls in type(saver).__mro__:
        qual = f"{cls.__module__}.{cls.__qualname__}"
        if qual == "langgraph.checkpoint.sqlite.SqliteSaver":
            return SqliteLeaseBackend
        if qual == "langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver":
            return AsyncSqliteLeaseBackend
        if qual == "langgraph.checkpoint.postgres.PostgresSaver":
            return PostgresLeaseBackend
        if qual == "langgraph.checkpoint.postgres.aio.AsyncPostgresSaver":
            return AsyncPostgresLeaseBackend
    return None


def shared(saver: Any) -> bool | None:
    """Whether the lease of ``saver``'s threads is seen by other processes: True on SQLite and PostgreSQL (it lives in
    their database); False for ``InMemorySaver`` (its threads live and die with this process, so an in-process
    lease is all there is to hold); None for any other checkpointer: its threads may be shared by other processes,
    but its lease holds in this process only."""
    if _kind(saver) is not None:
        return True
    from langgraph.checkpoint.memory import InMemorySaver

    return False if isinstance(saver, InMemorySaver) else None


def backend_for(saver: Any) -> LeaseBackend:
    """The lease backend living where ``saver`` keeps its checkpoints (one per checkpointer object)."""
    found = _BACKENDS.get(saver)  # made once per checkpointer: every later run finds it without the lock
    if found is not None:
        return found
    with _BACKENDS_LOCK:
        found = _BACKENDS.get(saver)
        if found is None:
            make = _kind(saver)
            found = make(saver) if make is not None else MemoryLeaseBackend(saver)
            _BACKENDS[saver] = found
        return found

