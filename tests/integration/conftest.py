"""``postgres_dsn``: one real PostgreSQL server on loopback for the session (see ``tests/pg_server.py``).

Outside CI (``CI`` unset), tests that need it are skipped with the reason when no server can be started; in CI
(``CI`` set, as ``.ci/run`` is run there, and ``.ci/run`` installs the ``postgresql`` package) they fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.pg_server import PostgresServer, PostgresUnavailable


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    try:
        server = PostgresServer().start()
    except PostgresUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and PostgreSQL could not be started: {exc}", pytrace=False)
        pytest.skip(f"PostgreSQL not available (install Debian's 'postgresql' package, or set "
                    f"MIDDLEWARE_KIT_PG_DSN): {exc}")
    try:
        yield server.dsn
    finally:
        server.stop()
