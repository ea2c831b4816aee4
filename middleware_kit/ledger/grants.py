"""Standing approvals ("always allow" grants) for human-in-the-loop review, kept in the checkpointer's own database.

A :class:`Grant` says: calls of ``tool`` whose arguments match ``args`` run without pausing for review, in one
thread or for one tenant, until ``expires_at`` (or until revoked). A reviewer creates one as part of an approval
(``{"type": "approve", "grant": {...}}``, see ``HumanInTheLoopMiddleware``), an app through :class:`GrantStore`.
Every grant records who made it, when, and its scope; every call it let through is recorded as a use.

Where grants live is where the checkpoints live (the tables are created on first use, with the lease's set-up helpers
of :mod:`middleware_kit.run_control.lease`):

- ``InMemorySaver`` (and any other checkpointer): a table of this process, under a lock;
- ``SqliteSaver`` / ``AsyncSqliteSaver``: two tables in the same file, on the saver's connection, under its lock;
- ``PostgresSaver`` / ``AsyncPostgresSaver``: two tables in the same database.

Writes are idempotent (a grant's id and a use's key are derived from what created them), so a step replayed after a
crash writes nothing twice. Each operation is written once, as a flow of statement batches driven in either mode.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
import weakref
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any, Literal, TypeAlias, cast

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
    Flow,
    PostgresTables,
    Rows,
    SqliteTables,
    Tables,
    store_for,
)

__all__ = ["Grant", "GrantScope", "GrantStore", "GrantUse", "grant_store", "literal_pattern", "matches"]

GRANTS = "middleware_kit_approval_grants"
USES = "middleware_kit_approval_grant_uses"
GrantScope: TypeAlias = Literal["thread", "tenant"]
"""Where a grant applies: one thread (``scope_id`` = the thread id) or every thread of one tenant."""
_GLOB = re.compile(r"([*?\[])")


def literal_pattern(args: Mapping[str, Any]) -> dict[str, Any]:
    """A pattern matching exactly ``args`` (glob characters in strings escaped)."""
    return {k: _GLOB.sub(r"[\1]", v) if isinstance(v, str) else v for k, v in args.items()}


def matches(pattern: Mapping[str, Any], args: Mapping[str, Any]) -> bool:
    """Whether ``args`` match ``pattern``: every key of the pattern is present, a string pattern is a shell-style glob
    (``*``, ``?``, ``[...]``) of a string argument, any other value must be equal. Keys not in the pattern may hold
    anything; ``{}`` matches every call of the tool."""
    for key, want in pattern.items():
        if key not in args:
            return False
        got = args[key]
        if isinstance(want, str) and isinstance(got, str):
            if not fnmatchcase(got, want):
                return False
        elif got != want:
            return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """A standing approval: calls of ``tool`` matching ``args`` in its scope run without review until it expires."""

    grant_id: str
    tool: str
    """The tool it approves."""
    args: Mapping[str, Any]
    """The argument pattern (see :func:`matches`)."""
    scope: GrantScope
    scope_id: str
    """The thread id (``scope="thread"``) or the tenant id (``scope="tenant"``)."""
    granted_by: str | None
    """Who granted it (the reviewer's identity, or what the app passed)."""
    granted_at: float
    """When (seconds since the epoch)."""
    expires_at: float
    """Until when (seconds since the epoch): a call made after this pauses for review again."""
    origin: str | None = None
    """``"thread_id/call_id"`` of the review decision that created it; None when the app did."""
    revoked_at: float | None = None
    """When it was revoked, if it was."""

    def live(self, at: float) -> bool:
        """Whether it was in force at ``at``: granted by then, not expired, not revoked yet."""
        return self.granted_at <= at < self.expires_at and (self.revoked_at is None or self.revoked_at > at)

    def covers(self, tool: str, args: Mapping[str, Any], at: float) -> bool:
        """Whether a call of ``tool`` with ``args`` made at ``at`` runs under this grant."""
        return self.live(at) and tool == self.tool and matches(self.args, args)

    def audit(self) -> dict[str, Any]:
        """A JSON-ready record of it (what the thread's ``human_review`` and the events carry)."""
        return {"grant_id": self.grant_id, "tool": self.tool, "args": dict(self.args), "scope": self.scope,
                "scope_id": self.scope_id, "granted_by": self.granted_by, "granted_at": self.granted_at,
                "expires_at": self.expires_at, "origin": self.origin}


@dataclass(frozen=True, slots=True)
class GrantUse:
    """One call a grant let through without review."""

    grant_id: str
    thread_id: str
    call_id: str
    tool: str
    used_at: float


def new_grant_id(origin: str | None) -> str:
    """A grant's id: derived from the decision that made it (a replay makes the same one), else random."""
    if origin is None:
        return "grant-" + uuid.uuid4().hex
    return "grant-" + uuid.uuid5(uuid.NAMESPACE_URL, "middleware_kit/grant/" + origin).hex


def _row(row: Sequence[Any]) -> Grant:
    gid, tool, args, scope, scope_id, by, at, until, origin, revoked = row
    return Grant(grant_id=str(gid), tool=str(tool), args=json.loads(args), scope=cast(GrantScope, scope),
                 scope_id=str(scope_id), granted_by=by, granted_at=float(at), expires_at=float(until),
                 origin=origin, revoked_at=None if revoked is None else float(revoked))


_COLUMNS = "grant_id, tool, args, scope, scope_id, granted_by, granted_at, expires_at, origin, revoked_at"


def _ddl(d: _Dialect) -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {GRANTS} (grant_id TEXT PRIMARY KEY, tool TEXT NOT NULL, args TEXT NOT NULL, "
        f"scope TEXT NOT NULL, scope_id TEXT NOT NULL, granted_by TEXT, granted_at {d.real} NOT NULL, "
        f"expires_at {d.real} NOT NULL, origin TEXT, revoked_at {d.real})",
        f"CREATE INDEX IF NOT EXISTS {GRANTS}_lookup ON {GRANTS} (tool, scope, scope_id)",
        f"CREATE TABLE IF NOT EXISTS {USES} (grant_id TEXT NOT NULL, thread_id TEXT NOT NULL, call_id TEXT NOT NULL, "
        f"tool TEXT NOT NULL, used_at {d.real} NOT NULL, PRIMARY KEY (grant_id, thread_id, call_id))",
    ]


# -- each operation once, as a flow of statement batches ------------------------------------------------------------
def _add_flow(d: _Dialect, grant: Grant) -> Generator[Batch, Rows, None]:
    sql = f"INSERT INTO {GRANTS} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
    yield Batch(((d.q(sql), (grant.grant_id, grant.tool, json.dumps(dict(grant.args), sort_keys=True), grant.scope,
                             grant.scope_id, grant.granted_by, grant.granted_at, grant.expires_at, grant.origin,
                             grant.revoked_at)),))


def _find_flow(d: _Dialect, tool: str, scopes: tuple[tuple[str, str], ...]) -> Generator[Batch, Rows, list[Grant]]:
    if not scopes:
        return []
    where = " OR ".join("(scope = ? AND scope_id = ?)" for _ in scopes)
    sql = f"SELECT {_COLUMNS} FROM {GRANTS} WHERE tool = ? AND ({where}) ORDER BY granted_at, grant_id"
    rows = yield Batch(((d.q(sql), (tool, *[v for pair in scopes for v in pair])),), write=False)
    return [_row(r) for r in rows[-1]]


def _list_flow(d: _Dialect, scope: str | None, scope_id: str | None) -> Generator[Batch, Rows, list[Grant]]:
    sql, args = f"SELECT {_COLUMNS} FROM {GRANTS}", cast("tuple[str, ...]", ())
    if scope is not None:
        sql, args = sql + " WHERE scope = ? AND scope_id = ?", (scope, scope_id or "")
    rows = yield Batch(((d.q(sql + " ORDER BY granted_at, grant_id"), args),), write=False)
    return [_row(r) for r in rows[-1]]


def _use_flow(d: _Dialect, use: GrantUse) -> Generator[Batch, Rows, None]:
    sql = (f"INSERT INTO {USES} (grant_id, thread_id, call_id, tool, used_at) VALUES (?, ?, ?, ?, ?) "
           f"ON CONFLICT DO NOTHING")
    yield Batch(((d.q(sql), (use.grant_id, use.thread_id, use.call_id, use.tool, use.used_at)),))


def _uses_flow(d: _Dialect, grant_id: str) -> Generator[Batch, Rows, list[GrantUse]]:
    sql = f"SELECT grant_id, thread_id, call_id, tool, used_at FROM {USES} WHERE grant_id = ? ORDER BY used_at, call_id"
    rows = yield Batch(((d.q(sql), (grant_id,)),), write=False)
    return [GrantUse(str(g), str(t), str(c), str(tool), float(u)) for g, t, c, tool, u in rows[-1]]


def _revoke_flow(d: _Dialect, grant_id: str, at: float) -> Generator[Batch, Rows, None]:
    sql = f"UPDATE {GRANTS} SET revoked_at = ? WHERE grant_id = ? AND revoked_at IS NULL"
    yield Batch(((d.q(sql), (at, grant_id)),))




class GrantStore(Tables):
    """The grants of one checkpointer's database. Each operation has a sync and an async (``a``-prefixed) form; use
    the form of the checkpointer (``SqliteSaver``: sync; ``AsyncSqliteSaver``: async; memory and PostgreSQL pools:
    the form matching the saver class)."""

    def _ddl(self) -> list[str]:
        return _ddl(self.dialect)

    def _mode_error(self) -> Exception:
        return _async_only(self)

    # -- the app's API ---------------------------------------------------------------------------------------------
    def grant(self, grant: Grant) -> Grant:
        """Store ``grant`` (nothing when a grant with its id is stored already); return it."""
        self._sync(_add_flow, grant)
        return grant

    async def agrant(self, grant: Grant) -> Grant:
        await self._async(_add_flow, grant)
        return grant

    def revoke(self, grant_id: str, at: float) -> None:
        """Revoke a grant as of ``at``: calls made from then on pause for review again."""
        self._sync(_revoke_flow, grant_id, at)

    async def arevoke(self, grant_id: str, at: float) -> None:
        await self._async(_revoke_flow, grant_id, at)

    def grants(self, scope: GrantScope | None = None, scope_id: str | None = None) -> list[Grant]:
        """Every grant (of one scope, when given), oldest first: revoked and expired ones included (the audit)."""
        return cast("list[Grant]", self._sync(_list_flow, scope, scope_id))

    async def agrants(self, scope: GrantScope | None = None, scope_id: str | None = None) -> list[Grant]:
        return cast("list[Grant]", await self._async(_list_flow, scope, scope_id))

    def uses(self, grant_id: str) -> list[GrantUse]:
        """The calls ``grant_id`` let through, oldest first."""
        return cast("list[GrantUse]", self._sync(_uses_flow, grant_id))

    async def auses(self, grant_id: str) -> list[GrantUse]:
        return cast("list[GrantUse]", await self._async(_uses_flow, grant_id))

    # -- the middleware's -----------------------------------------------------------------------------------------
    def find(self, tool: str, scopes: Iterable[tuple[str, str]]) -> list[Grant]:
        """The grants of ``tool`` in any of ``scopes`` (``(scope, scope_id)`` pairs), live or not."""
        return cast("list[Grant]", self._sync(_find_flow, tool, tuple(scopes)))

    async def afind(self, tool: str, scopes: Iterable[tuple[str, str]]) -> list[Grant]:
        return cast("list[Grant]", await self._async(_find_flow, tool, tuple(scopes)))

    def use(self, use: GrantUse) -> None:
        """Record that a grant let a call through (once per grant, thread and call)."""
        self._sync(_use_flow, use)

    async def ause(self, use: GrantUse) -> None:
        await self._async(_use_flow, use)


@dataclass(slots=True)
class _Tables:
    grants: dict[str, Grant] = field(default_factory=dict)
    uses: dict[tuple[str, str, str], GrantUse] = field(default_factory=dict)


class MemoryGrantStore(GrantStore):
    """Grants of one process (``InMemorySaver``): they live and die with it, as its checkpoints do. Each operation
    is the in-process twin of its SQL flow (``_MEMORY``)."""

    def __init__(self, saver: Any) -> None:
        super().__init__(saver)
        self._lock = threading.Lock()
        self._tables = _Tables()

    def _sync(self, flow: Flow, *args: Any) -> Any:
        with self._lock:
            return _MEMORY[flow](self._tables, *args)

    async def _async(self, flow: Flow, *args: Any) -> Any:
        return self._sync(flow, *args)


def _mem_add(t: _Tables, grant: Grant) -> None:
    t.grants.setdefault(grant.grant_id, grant)


def _mem_find(t: _Tables, tool: str, scopes: tuple[tuple[str, str], ...]) -> list[Grant]:
    wanted = set(scopes)
    return sorted((g for g in t.grants.values() if g.tool == tool and (g.scope, g.scope_id) in wanted),
                  key=lambda g: (g.granted_at, g.grant_id))


def _mem_list(t: _Tables, scope: str | None, scope_id: str | None) -> list[Grant]:
    chosen = [g for g in t.grants.values() if scope is None or (g.scope, g.scope_id) == (scope, scope_id or "")]
    return sorted(chosen, key=lambda g: (g.granted_at, g.grant_id))


def _mem_use(t: _Tables, use: GrantUse) -> None:
    t.uses.setdefault((use.grant_id, use.thread_id, use.call_id), use)


def _mem_uses(t: _Tables, grant_id: str) -> list[GrantUse]:
    return sorted((u for u in t.uses.values() if u.grant_id == grant_id), key=lambda u: (u.used_at, u.call_id))


def _mem_revoke(t: _Tables, grant_id: str, at: float) -> None:
    found = t.grants.get(grant_id)
    if found is not None and found.revoked_at is None:
        t.grants[grant_id] = replace(found, revoked_at=at)


_MEMORY: dict[Flow, Callable[..., Any]] = {
    _add_flow: _mem_add, _find_flow: _mem_find, _list_flow: _mem_list, _use_flow: _mem_use, _uses_flow: _mem_uses,
    _revoke_flow: _mem_revoke,
}


class SqliteGrantStore(SqliteTables, GrantStore):
    """Tables in the ``SqliteSaver``'s file, on its connection and under its lock."""


class AsyncSqliteGrantStore(AsyncSqliteTables, GrantStore):
    """Tables in the ``AsyncSqliteSaver``'s file, on its ``aiosqlite`` connection and under its lock."""


def _async_only(store: GrantStore) -> RunControlConfigError:
    return RunControlConfigError(
        f"{type(store.saver).__name__} is an async checkpointer: use the a-prefixed grant methods (agrant, arevoke, "
        f"agrants, auses) and ainvoke/astream, or a sync checkpointer (SqliteSaver, PostgresSaver).",
        parameter="checkpointer",
    )


class PostgresGrantStore(PostgresTables, GrantStore):
    """Tables in the ``PostgresSaver``'s database, on its connection (or pool) and under its lock."""


class AsyncPostgresGrantStore(AsyncPostgresTables, GrantStore):
    """Tables in the ``AsyncPostgresSaver``'s database, on its connection (or pool) and under its lock."""


_STORES: weakref.WeakKeyDictionary[Any, GrantStore] = weakref.WeakKeyDictionary()
_SQL: dict[Any, type[GrantStore]] = {
    SqliteLeaseBackend: SqliteGrantStore,
    AsyncSqliteLeaseBackend: AsyncSqliteGrantStore,
    PostgresLeaseBackend: PostgresGrantStore,
    AsyncPostgresLeaseBackend: AsyncPostgresGrantStore,
}


def grant_store(saver_or_agent: Any) -> GrantStore:
    """The grants kept where ``saver_or_agent`` (a checkpointer, or an agent built with one) keeps its checkpoints;
    one store per checkpointer object."""
    return store_for(getattr(saver_or_agent, "checkpointer", saver_or_agent), _STORES, _SQL, MemoryGrantStore)
