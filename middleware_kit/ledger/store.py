"""Where the ledger keeps its records: beside the checkpoints, in the checkpointer's own database.

- ``InMemorySaver`` (and any checkpointer that is not SQLite or PostgreSQL): a dict of this process, under a lock.
- ``SqliteSaver`` / ``AsyncSqliteSaver``: a table in the same file, on the saver's connection, under its lock;
  each change is its own ``BEGIN IMMEDIATE`` transaction, committed before the tool runs (started) and right after
  it returns (finished).
- ``PostgresSaver`` / ``AsyncPostgresSaver``: a table in the same database, on the saver's connection or pool; each
  change is one autocommitted statement (one round trip).

A first run of a tool call costs two writes: ``claim`` (an insert that does nothing when the call is recorded
already; then one read of the record) and ``finish``. A middleware's model call
(:mod:`middleware_kit.ledger.model_calls`) costs one read (``recorded_answer``) and, once the model answered, one write
(``record_answer``), in a second table. Each operation is written once, as a flow of statement batches
(:class:`Batch`), driven by the sync or the async executor of its backend (the lease's connection handling: see
:mod:`middleware_kit.run_control.lease`).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Generator
from typing import Any, cast

from middleware_kit.ledger.records import Answer, CallKey, Entry, ModelCallKey
from middleware_kit.run_control.errors import RunControlConfigError
from middleware_kit.run_control.lease import (
    AsyncPostgresLeaseBackend,
    AsyncSqliteLeaseBackend,
    PostgresLeaseBackend,
    SqliteLeaseBackend,
    _Dialect,
)
from middleware_kit.run_control.tables import (
    AsyncPostgresTables,
    AsyncSqliteTables,
    Batch,
    PostgresTables,
    Rows,
    SqliteTables,
    Tables,
    store_for,
)

__all__ = [
    "AsyncPostgresLedgerStore",
    "AsyncSqliteLedgerStore",
    "LedgerStore",
    "MemoryLedgerStore",
    "PostgresLedgerStore",
    "SqliteLedgerStore",
    "ledger_store",
]

TABLE = "middleware_kit_tool_calls"
ANSWERS = "middleware_kit_model_calls"


def _ddl(d: _Dialect) -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
        f"call_id TEXT NOT NULL, tool TEXT NOT NULL, status TEXT NOT NULL, attempt INTEGER NOT NULL, "
        f"result_type TEXT, result {d.blob}, started_at {d.real} NOT NULL, finished_at {d.real}, "
        f"PRIMARY KEY (thread_id, checkpoint_ns, call_id))",
        f"CREATE TABLE IF NOT EXISTS {ANSWERS} (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
        f"site TEXT NOT NULL, ordinal INTEGER NOT NULL, digest TEXT NOT NULL, answer_type TEXT NOT NULL, "
        f"answer {d.blob} NOT NULL, recorded_at {d.real} NOT NULL, "
        f"PRIMARY KEY (thread_id, checkpoint_ns, site, ordinal))",
    ]


class LedgerStore:
    """The ledger's operations on one checkpointer's database, each in a sync and an async (``a``-prefixed) form."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    @property
    def serde(self) -> Any:
        """The checkpointer's serializer: results are stored as the checkpointer stores channel values."""
        return self.saver.serde

    def claim(self, key: CallKey, tool: str) -> Entry | None:
        """Record ``key`` as started (attempt 1) and return None; or, when it is recorded already, its entry."""
        raise NotImplementedError

    def restart(self, key: CallKey) -> int:
        """Record a new attempt of ``key`` as started; the attempt's number."""
        raise NotImplementedError

    def finish(self, key: CallKey, attempt: int, kind: str, data: bytes) -> None:
        """Record attempt ``attempt`` of ``key`` as finished with its serialized result (nothing when another
        attempt started since: a stalled worker whose call was retried elsewhere records nothing)."""
        raise NotImplementedError

    def forget(self, key: CallKey, attempt: int) -> None:
        """Drop the record of attempt ``attempt`` of ``key`` (the tool raised: it did not finish, and is not in
        doubt)."""
        raise NotImplementedError

    def entries(self, thread_id: str) -> list[tuple[CallKey, Entry]]:
        """Every record of ``thread_id``, oldest first."""
        raise NotImplementedError

    def delete_thread(self, thread_id: str) -> None:
        """Drop every record of ``thread_id``, its tool calls' and its model calls' (with the thread's checkpoints)."""
        raise NotImplementedError

    def recorded_answer(self, key: ModelCallKey) -> Answer | None:
        """The answer recorded for the middleware model call at ``key``, if any."""
        raise NotImplementedError

    def record_answer(self, key: ModelCallKey, digest: str, kind: str, data: bytes) -> None:
        """Record the serialized answer of the model call at ``key`` (replacing an answer recorded there for another
        input)."""
        raise NotImplementedError

    def answers(self, thread_id: str) -> list[tuple[ModelCallKey, Answer]]:
        """Every recorded middleware model call of ``thread_id``, oldest first."""
        raise NotImplementedError

    async def aclaim(self, key: CallKey, tool: str) -> Entry | None:
        return self.claim(key, tool)

    async def arestart(self, key: CallKey) -> int:
        return self.restart(key)

    async def afinish(self, key: CallKey, attempt: int, kind: str, data: bytes) -> None:
        self.finish(key, attempt, kind, data)

    async def aforget(self, key: CallKey, attempt: int) -> None:
        self.forget(key, attempt)

    async def aentries(self, thread_id: str) -> list[tuple[CallKey, Entry]]:
        return self.entries(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def arecorded_answer(self, key: ModelCallKey) -> Answer | None:
        return self.recorded_answer(key)

    async def arecord_answer(self, key: ModelCallKey, digest: str, kind: str, data: bytes) -> None:
        self.record_answer(key, digest, kind, data)

    async def aanswers(self, thread_id: str) -> list[tuple[ModelCallKey, Answer]]:
        return self.answers(thread_id)


class MemoryLedgerStore(LedgerStore):
    """Records of one process (``InMemorySaver``): they live and die with the process, as its checkpoints do."""

    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self._lock = threading.Lock()
        self._rows: dict[CallKey, Entry] = {}
        self._answers: dict[ModelCallKey, Answer] = {}

    def claim(self, key: CallKey, tool: str) -> Entry | None:
        with self._lock:
            found = self._rows.get(key)
            if found is None:
                self._rows[key] = Entry("started", tool, 1, None, time.time())
            return found

    def restart(self, key: CallKey) -> int:
        with self._lock:
            old = self._rows[key]
            self._rows[key] = Entry("started", old.tool, old.attempt + 1, None, time.time())
            return old.attempt + 1

    def finish(self, key: CallKey, attempt: int, kind: str, data: bytes) -> None:
        with self._lock:
            old = self._rows.get(key)
            if old is not None and old.attempt == attempt:
                self._rows[key] = Entry("finished", old.tool, old.attempt, (kind, data), old.started_at)

    def forget(self, key: CallKey, attempt: int) -> None:
        with self._lock:
            old = self._rows.get(key)
            if old is not None and old.attempt == attempt:
                del self._rows[key]

    def entries(self, thread_id: str) -> list[tuple[CallKey, Entry]]:
        with self._lock:
            return [(k, e) for k, e in self._rows.items() if k.thread_id == thread_id]

    def delete_thread(self, thread_id: str) -> None:
        with self._lock:
            for key in [k for k in self._rows if k.thread_id == thread_id]:
                del self._rows[key]
            for answered in [k for k in self._answers if k.thread_id == thread_id]:
                del self._answers[answered]

    def recorded_answer(self, key: ModelCallKey) -> Answer | None:
        with self._lock:
            return self._answers.get(key)

    def record_answer(self, key: ModelCallKey, digest: str, kind: str, data: bytes) -> None:
        with self._lock:
            self._answers.pop(key, None)  # a replaced answer is the newest: last in ``answers``
            self._answers[key] = Answer(digest, (kind, data), time.time())

    def answers(self, thread_id: str) -> list[tuple[ModelCallKey, Answer]]:
        with self._lock:
            return [(k, a) for k, a in self._answers.items() if k.thread_id == thread_id]


# -- SQL: each operation once, as a flow of batches (run by run_control.tables) -----------------------------------
_KEY = "thread_id = ? AND checkpoint_ns = ? AND call_id = ?"
_COLUMNS = "status, tool, attempt, result_type, result, started_at"


def _args(key: CallKey) -> tuple[str, str, str]:
    return key.thread_id, key.checkpoint_ns, key.call_id


def _entry(row: tuple[Any, ...]) -> Entry:
    status, tool, attempt, kind, data, started = row
    result = None if kind is None else (str(kind), bytes(data))
    return Entry(status, str(tool), int(attempt), result, float(started))


def _claim_flow(d: _Dialect, key: CallKey, tool: str) -> Generator[Batch, Rows, Entry | None]:
    insert = (f"INSERT INTO {TABLE} (thread_id, checkpoint_ns, call_id, tool, status, attempt, started_at) "
              f"VALUES (?, ?, ?, ?, 'started', 1, {{now}}) ON CONFLICT DO NOTHING RETURNING attempt")
    rows = yield Batch(((d.q(insert), (*_args(key), tool)),))
    if rows[-1]:
        return None
    rows = yield Batch(((d.q(f"SELECT {_COLUMNS} FROM {TABLE} WHERE {_KEY}"), _args(key)),), write=False)
    return _entry(rows[-1][0])


def _restart_flow(d: _Dialect, key: CallKey) -> Generator[Batch, Rows, int]:
    sql = (f"UPDATE {TABLE} SET status = 'started', attempt = attempt + 1, result_type = NULL, result = NULL, "
           f"started_at = {{now}}, finished_at = NULL WHERE {_KEY} RETURNING attempt")
    rows = yield Batch(((d.q(sql), _args(key)),))
    return int(rows[-1][0][0])


def _finish_flow(d: _Dialect, key: CallKey, attempt: int, kind: str, data: bytes) -> Generator[Batch, Rows, None]:
    sql = (f"UPDATE {TABLE} SET status = 'finished', result_type = ?, result = ?, finished_at = {{now}} "
           f"WHERE {_KEY} AND attempt = ?")
    yield Batch(((d.q(sql), (kind, data, *_args(key), attempt)),))


def _forget_flow(d: _Dialect, key: CallKey, attempt: int) -> Generator[Batch, Rows, None]:
    yield Batch(((d.q(f"DELETE FROM {TABLE} WHERE {_KEY} AND attempt = ?"), (*_args(key), attempt)),))


def _entries_flow(d: _Dialect, thread_id: str) -> Generator[Batch, Rows, list[tuple[CallKey, Entry]]]:
    sql = f"SELECT checkpoint_ns, call_id, {_COLUMNS} FROM {TABLE} WHERE thread_id = ? ORDER BY started_at"
    rows = yield Batch(((d.q(sql), (thread_id,)),), write=False)
    return [(CallKey(thread_id, str(r[0]), str(r[1])), _entry(r[2:])) for r in rows[-1]]


def _delete_flow(d: _Dialect, thread_id: str) -> Generator[Batch, Rows, None]:
    yield Batch(tuple((d.q(f"DELETE FROM {table} WHERE thread_id = ?"), (thread_id,)) for table in (TABLE, ANSWERS)))


_ANSWER_KEY = "thread_id = ? AND checkpoint_ns = ? AND site = ? AND ordinal = ?"


def _answer_args(key: ModelCallKey) -> tuple[str, str, str, int]:
    return key.thread_id, key.checkpoint_ns, key.site, key.ordinal


def _answer(row: tuple[Any, ...]) -> Answer:
    digest, kind, data, recorded = row
    return Answer(str(digest), (str(kind), bytes(data)), float(recorded))


def _recorded_answer_flow(d: _Dialect, key: ModelCallKey) -> Generator[Batch, Rows, Answer | None]:
    sql = f"SELECT digest, answer_type, answer, recorded_at FROM {ANSWERS} WHERE {_ANSWER_KEY}"
    rows = yield Batch(((d.q(sql), _answer_args(key)),), write=False)
    return _answer(rows[-1][0]) if rows[-1] else None


def _record_answer_flow(
    d: _Dialect, key: ModelCallKey, digest: str, kind: str, data: bytes
) -> Generator[Batch, Rows, None]:
    sql = (f"INSERT INTO {ANSWERS} (thread_id, checkpoint_ns, site, ordinal, digest, answer_type, answer, recorded_at) "
           f"VALUES (?, ?, ?, ?, ?, ?, ?, {{now}}) ON CONFLICT (thread_id, checkpoint_ns, site, ordinal) DO UPDATE "
           f"SET digest = excluded.digest, answer_type = excluded.answer_type, answer = excluded.answer, "
           f"recorded_at = excluded.recorded_at")
    yield Batch(((d.q(sql), (*_answer_args(key), digest, kind, data)),))


def _answers_flow(d: _Dialect, thread_id: str) -> Generator[Batch, Rows, list[tuple[ModelCallKey, Answer]]]:
    sql = (f"SELECT checkpoint_ns, site, ordinal, digest, answer_type, answer, recorded_at FROM {ANSWERS} "
           f"WHERE thread_id = ? ORDER BY recorded_at")
    rows = yield Batch(((d.q(sql), (thread_id,)),), write=False)
    return [(ModelCallKey(thread_id, str(r[0]), str(r[1]), int(r[2])), _answer(r[3:])) for r in rows[-1]]


class _SqlStore(Tables, LedgerStore):
    """The flows above over ``_run`` (sync) and ``_arun`` (async); a backend mixin
    (:mod:`~middleware_kit.run_control.tables`) supplies the one(s) of its mode."""

    def _ddl(self) -> list[str]:
        return _ddl(self.dialect)

    def _mode_error(self) -> Exception:
        return self._wrong_mode("invoke/stream", "ainvoke/astream")

    def _wrong_mode(self, used: str, use: str) -> RunControlConfigError:
        return cast(RunControlConfigError, self.lease._wrong_mode(cast(Any, self), used, use))

    def claim(self, key: CallKey, tool: str) -> Entry | None:
        return cast("Entry | None", self._sync(_claim_flow, key, tool))

    async def aclaim(self, key: CallKey, tool: str) -> Entry | None:
        return cast("Entry | None", await self._async(_claim_flow, key, tool))

    def restart(self, key: CallKey) -> int:
        return int(self._sync(_restart_flow, key))

    async def arestart(self, key: CallKey) -> int:
        return int(await self._async(_restart_flow, key))

    def finish(self, key: CallKey, attempt: int, kind: str, data: bytes) -> None:
        self._sync(_finish_flow, key, attempt, kind, data)

    async def afinish(self, key: CallKey, attempt: int, kind: str, data: bytes) -> None:
        await self._async(_finish_flow, key, attempt, kind, data)

    def forget(self, key: CallKey, attempt: int) -> None:
        self._sync(_forget_flow, key, attempt)

    async def aforget(self, key: CallKey, attempt: int) -> None:
        await self._async(_forget_flow, key, attempt)

    def entries(self, thread_id: str) -> list[tuple[CallKey, Entry]]:
        return cast("list[tuple[CallKey, Entry]]", self._sync(_entries_flow, thread_id))

    async def aentries(self, thread_id: str) -> list[tuple[CallKey, Entry]]:
        return cast("list[tuple[CallKey, Entry]]", await self._async(_entries_flow, thread_id))

    def delete_thread(self, thread_id: str) -> None:
        self._sync(_delete_flow, thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._async(_delete_flow, thread_id)

    def recorded_answer(self, key: ModelCallKey) -> Answer | None:
        return cast("Answer | None", self._sync(_recorded_answer_flow, key))

    async def arecorded_answer(self, key: ModelCallKey) -> Answer | None:
        return cast("Answer | None", await self._async(_recorded_answer_flow, key))

    def record_answer(self, key: ModelCallKey, digest: str, kind: str, data: bytes) -> None:
        self._sync(_record_answer_flow, key, digest, kind, data)

    async def arecord_answer(self, key: ModelCallKey, digest: str, kind: str, data: bytes) -> None:
        await self._async(_record_answer_flow, key, digest, kind, data)

    def answers(self, thread_id: str) -> list[tuple[ModelCallKey, Answer]]:
        return cast("list[tuple[ModelCallKey, Answer]]", self._sync(_answers_flow, thread_id))

    async def aanswers(self, thread_id: str) -> list[tuple[ModelCallKey, Answer]]:
        return cast("list[tuple[ModelCallKey, Answer]]", await self._async(_answers_flow, thread_id))


class SqliteLedgerStore(SqliteTables, _SqlStore):
    """A table in the ``SqliteSaver``'s file, on its connection and under its lock."""


class AsyncSqliteLedgerStore(AsyncSqliteTables, _SqlStore):
    """A table in the ``AsyncSqliteSaver``'s file, on its ``aiosqlite`` connection and under its lock."""


class PostgresLedgerStore(PostgresTables, _SqlStore):
    """A table in the ``PostgresSaver``'s database, on its connection (or pool) and under its lock."""


class AsyncPostgresLedgerStore(AsyncPostgresTables, _SqlStore):
    """A table in the ``AsyncPostgresSaver``'s database, on its connection (or pool) and under its lock."""


_STORES: weakref.WeakKeyDictionary[Any, LedgerStore] = weakref.WeakKeyDictionary()
_SQL: dict[type[Any], type[LedgerStore]] = {
    SqliteLeaseBackend: SqliteLedgerStore,
    AsyncSqliteLeaseBackend: AsyncSqliteLedgerStore,
    PostgresLeaseBackend: PostgresLedgerStore,
    AsyncPostgresLeaseBackend: AsyncPostgresLedgerStore,
}


def ledger_store(saver: Any) -> LedgerStore:
    """The ledger store living where ``saver`` keeps its checkpoints (one per checkpointer object)."""
    return store_for(saver, _STORES, _SQL, MemoryLedgerStore)


