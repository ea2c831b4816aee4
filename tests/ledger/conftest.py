"""Fixtures of the ledger tests: the PostgreSQL server of ``tests/integration`` (re-exported, not copied), the
database the crash matrices' workers share (``database``: SQLite or PostgreSQL, with the ``effects`` table their tools
commit each effect to), and the in-process tests' checkpointer (``saver``: in memory or SQLite, for ``invoke`` and
``ainvoke``)."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import WorkerProcess, shared_checkpoints
from tests.integration.conftest import postgres_dsn
from tests.run_control.helpers import saver_for

__all__ = ["Database", "database", "expect_killed", "kind", "mode", "postgres_dsn", "saver"]


class Database:
    """Where the workers point, and the effects their tools committed."""

    def __init__(self, kind: str, target: str) -> None:
        self.kind, self.target = kind, target

    def effects(self, tool: str, ref: str) -> list[str]:
        """The idempotency keys ``tool`` ran its effect under for ``ref``."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.target + ".effects", timeout=60) as conn:
                rows = conn.execute("SELECT key FROM effects WHERE tool = ? AND ref = ?", (tool, ref)).fetchall()
        else:
            import psycopg

            with psycopg.connect(self.target, autocommit=True) as pg:
                rows = pg.execute("SELECT key FROM effects WHERE tool = %s AND ref = %s", (tool, ref)).fetchall()
        return [str(r[0]) for r in rows]


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        target = str(tmp_path / "agent.sqlite")
        shared_checkpoints("sqlite", target)
        with sqlite3.connect(target + ".effects") as effects:
            effects.execute("CREATE TABLE effects (tool TEXT NOT NULL, ref TEXT NOT NULL, key TEXT NOT NULL)")
        yield Database("sqlite", target)
        return
    dsn: str = request.getfixturevalue("postgres_dsn")
    shared_checkpoints("postgres", dsn)
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute("DROP TABLE IF EXISTS effects")
        pg.execute("CREATE TABLE effects (tool text NOT NULL, ref text NOT NULL, key text NOT NULL)")
    yield Database("postgres", dsn)


def expect_killed(worker: WorkerProcess, thread: str) -> int:
    """Wait for ``worker`` (told to die at a kill point) and check it died by SIGKILL; its exit status."""
    status = worker.proc.wait(timeout=120)
    assert worker.proc.stderr is not None
    assert status == -signal.SIGKILL, f"{thread} exited {status}: {worker.proc.stderr.read()[-3000:]}"
    return status


@pytest.fixture(params=["memory", "sqlite"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def saver(kind: str, mode: str, tmp_path: Path) -> AsyncIterator[Any]:
    async with saver_for(kind, mode, tmp_path) as found:
        yield found
