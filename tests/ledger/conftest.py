"""Fixtures of the ledger tests: the PostgreSQL server of ``tests/integration`` (re-exported, not copied)."""

from tests.integration.conftest import postgres_dsn

__all__ = ["postgres_dsn"]
