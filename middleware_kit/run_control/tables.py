"""Tables beside the checkpoints: how the call ledger's stores (tool calls, model answers) and the approval grants run
a batch of SQL statements in the checkpointer's own database, written once for its four kinds.

The connection handling is the lease's (:mod:`middleware_kit.run_control.lease`): the saver's connection (or pool)
and lock, the tables created on first use (a concurrent ``CREATE`` in another worker retried), a writing batch in one
transaction. A store class is a backend mixin below plus the operations it runs, each written once as a flow of
:class:`Batch` es (``_sync``/``_async`` drive a flow in the store's mode).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, TypeVar, cast

from middleware_kit._engine import drive
from middleware_kit.run_control.lease import (
    _PG_ASYNC,
    _PG_SYNC,
    POSTGRES,
    SQLITE,
    AsyncPostgresLeaseBackend,
    AsyncSqliteLeaseBackend,
    PostgresLeaseBackend,
    SqliteLeaseBackend,
    _Dialect,
    _executed,
    _kind,
    _Op,
    _within,
    asqlite_setup,
    pg_setup,
    sqlite_setup,
)

__all__ = [
    "POSTGRES",
    "SQLITE",
    "AsyncPostgresTables",
    "AsyncSqliteTables",
    "Batch",
    "Flow",
    "PostgresTables",
    "Rows",
    "SqliteTables",
    "Stmt",
    "Tables",
    "store_for",
    "unwrapped",
]

Stmt = tuple[str, tuple[Any, ...]]
Rows = list[list[tuple[Any, ...]]]


@dataclass(frozen=True, slots=True)
class Batch:
    """Statements run together (in one transaction when they write); the flow receives their rows."""

    stmts: tuple[Stmt, ...]
    write: bool = True


Flow = Callable[..., Generator[Batch, Rows, Any]]


class Tables:
    """A store of tables in a checkpointer's database: ``_run`` (sync) and ``_arun`` (async) run one batch; a backend
    mixin supplies the one(s) of its mode, and a store says which mode error to raise for the other."""

    dialect: ClassVar[_Dialect] = SQLITE
    lease: ClassVar[type[Any]] = SqliteLeaseBackend
    """The lease backend of the same checkpointer kind (its connection handling is reused)."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self._ready = False

    def _ddl(self) -> list[str]:
        """The store's tables and indexes, in the store's dialect."""
        raise NotImplementedError

    def _mode_error(self) -> Exception:
        """The error for a call in the mode the checkpointer does not serve (a sync call on an async saver)."""
        raise NotImplementedError

    def _run(self, batch: Batch) -> Rows:
        raise self._mode_error()

    async def _arun(self, batch: Batch) -> Rows:
        return self._run(batch)

    def _sync(self, flow: Flow, *args: Any) -> Any:
        return drive.run_sync(flow(self.dialect, *args), self._run)

    async def _async(self, flow: Flow, *args: Any) -> Any:
        return await drive.run_async(flow(self.dialect, *args), self._arun)


class SqliteTables(Tables):
    """On the ``SqliteSaver``'s connection and under its lock."""

    dialect = SQLITE
    lease = SqliteLeaseBackend

    def _run(self, batch: Batch) -> Rows:
        conn = self.saver.conn
        with self.saver.lock:
            sqlite_setup(self, conn, self._ddl())
            if not batch.write:
                return [conn.execute(sql, args).fetchall() for sql, args in batch.stmts]
            if conn.in_transaction:  # a checkpoint write interrupted before its commit: finish it, as its next would
                conn.commit()
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = [conn.execute(sql, args).fetchall() for sql, args in batch.stmts]
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
            return out


class AsyncSqliteTables(Tables):
    """On the ``AsyncSqliteSaver``'s ``aiosqlite`` connection and under its lock."""

    dialect = SQLITE
    lease = AsyncSqliteLeaseBackend

    async def _arun(self, batch: Batch) -> Rows:
        conn = self.saver.conn
        async with self.saver.lock:
            await asqlite_setup(self, conn, self._ddl())
            if batch.write:
                await AsyncSqliteLeaseBackend._begin(conn)
            try:
                out = []
                for sql, args in batch.stmts:
                    cursor = await conn.execute(sql, args)
                    out.append(list(await cursor.fetchall()))
            except BaseException:
                if batch.write:
                    await conn.rollback()
                raise
            if batch.write:
                await conn.commit()
            return out


def _pg_body(store: Any, batch: Batch) -> Generator[_Op, Any, Rows]:
    """``_run``/``_arun`` of the PostgreSQL stores, written once: the tables on first use (a concurrent ``CREATE`` in
    another worker is retried), then the batch (autocommit: each statement one round trip)."""
    return (yield from _within(store._conn(), partial(_pg_on_connection, store, batch)))


def _pg_on_connection(store: Any, batch: Batch, conn: Any) -> Generator[_Op, Any, Rows]:
    from psycopg.rows import tuple_row

    yield from pg_setup(store, conn, store._ddl())

    def on_cursor(_: Any) -> Generator[_Op, Any, Rows]:
        return (yield from _within(conn.cursor(row_factory=tuple_row),
                                   lambda cur: _executed(cur, batch.stmts, rows=True)))

    if batch.write and len(batch.stmts) > 1:  # one statement is atomic by itself (autocommit: one round trip)
        return (yield from _within(conn.transaction(), on_cursor))
    return (yield from on_cursor(None))


class PostgresTables(Tables):
    """On the ``PostgresSaver``'s connection (or pool) and under its lock."""

    dialect = POSTGRES
    lease = PostgresLeaseBackend

    def _conn(self) -> Any:
        return PostgresLeaseBackend._conn(cast(Any, self))

    def _run(self, batch: Batch) -> Rows:
        return drive.run_sync(_pg_body(self, batch), _PG_SYNC)


class AsyncPostgresTables(Tables):
    """On the ``AsyncPostgresSaver``'s connection (or pool) and under its lock."""

    dialect = POSTGRES
    lease = AsyncPostgresLeaseBackend

    def _conn(self) -> Any:
        return AsyncPostgresLeaseBackend._conn(cast(Any, self))

    async def _arun(self, batch: Batch) -> Rows:
        return await drive.run_async(_pg_body(self, batch), _PG_ASYNC)


def unwrapped(saver: Any) -> Any:
    """The checkpointer a run's saver wraps (run control lends each run a ``RunSaver`` around the agent's)."""
    while "inner" in getattr(saver, "__dict__", ()):  # a dict lookup: no AttributeError made and dropped per call
        saver = saver.inner
    return saver


S = TypeVar("S")
_LOCK = threading.Lock()


def store_for(saver: Any, stores: weakref.WeakKeyDictionary[Any, S], kinds: dict[Any, type[S]],
              memory: type[S]) -> S:
    """The store of ``saver``'s database in ``stores`` (one per checkpointer object), made on first use: the SQL
    store class of its lease kind in ``kinds``, else ``memory``."""
    saver = unwrapped(saver)
    found = stores.get(saver)  # made once per checkpointer: every later call finds it without the lock
    if found is not None:
        return found
    with _LOCK:
        found = stores.get(saver)
        if found is None:
            kind = _kind(saver)
            made: Any = kinds[kind] if kind is not None else memory
            found = stores[saver] = made(saver)
        return found
