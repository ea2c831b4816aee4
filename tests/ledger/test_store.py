"""The ledger's stores, one per kind of checkpointer (in memory, SQLite, PostgreSQL; sync and async): the records
of a call through its life, and a stale attempt's writes ignored; a middleware model call's answer recorded,
replaced, and dropped with its thread."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from middleware_kit.ledger import CallKey, LedgerStore, ModelCallKey, ledger_store
from middleware_kit.ledger.store import (
    AsyncPostgresLedgerStore,
    AsyncSqliteLedgerStore,
    MemoryLedgerStore,
    PostgresLedgerStore,
    SqliteLedgerStore,
)
from tests.run_control.helpers import saver_for

KINDS = {"memory": MemoryLedgerStore, "sqlite": SqliteLedgerStore, "postgres": PostgresLedgerStore}
AKINDS = {"memory": MemoryLedgerStore, "sqlite": AsyncSqliteLedgerStore, "postgres": AsyncPostgresLedgerStore}


@pytest.fixture(params=["memory-invoke", "memory-ainvoke", "sqlite-invoke", "sqlite-ainvoke", "postgres-invoke",
                        "postgres-ainvoke"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[LedgerStore, str]]:
    kind, mode = str(request.param).split("-")
    if kind != "postgres":
        async with saver_for(kind, mode, tmp_path) as saver:
            found = ledger_store(saver)
            assert type(found) is (KINDS if mode == "invoke" else AKINDS)[kind]
            yield found, mode
        return
    dsn: str = request.getfixturevalue("postgres_dsn")
    if mode == "invoke":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(dsn) as saver:
            yield ledger_store(saver), mode
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(dsn) as asaver:
            yield ledger_store(asaver), mode


async def op(store: tuple[LedgerStore, str], name: str, *args: Any) -> Any:
    found, mode = store
    if mode == "invoke":
        return getattr(found, name)(*args)
    return await getattr(found, "a" + name)(*args)


async def test_a_call_through_its_life(store: tuple[LedgerStore, str], request: pytest.FixtureRequest) -> None:
    thread = f"store-{request.node.callspec.id}"
    await op(store, "delete_thread", thread)
    key = CallKey(thread, "tools:task-1", "call-1")
    assert await op(store, "claim", key, "pay") is None  # started, attempt 1
    started = await op(store, "claim", key, "pay")
    assert (started.status, started.tool, started.attempt, started.result) == ("started", "pay", 1, None)
    assert await op(store, "restart", key) == 2
    result = ToolMessage("paid", tool_call_id="call-1", name="pay")
    await op(store, "finish", key, 1, *store[0].serde.dumps_typed(result))  # a stale attempt: ignored
    assert (await op(store, "claim", key, "pay")).status == "started"
    await op(store, "finish", key, 2, *store[0].serde.dumps_typed(result))
    finished = await op(store, "claim", key, "pay")
    assert (finished.status, finished.attempt) == ("finished", 2)
    assert store[0].serde.loads_typed(finished.result) == result
    other = CallKey(thread, "tools:task-2", "call-2")
    assert await op(store, "claim", other, "ship") is None
    await op(store, "forget", other, 2)  # a stale attempt: ignored
    assert [k for k, _ in await op(store, "entries", thread)] == [key, other]
    await op(store, "forget", other, 1)
    assert [k for k, _ in await op(store, "entries", thread)] == [key]
    await op(store, "delete_thread", thread)
    assert await op(store, "entries", thread) == []


async def test_a_model_calls_answer_recorded_replaced_and_dropped_with_its_thread(
    store: tuple[LedgerStore, str], request: pytest.FixtureRequest
) -> None:
    thread = f"answers-{request.node.callspec.id}"
    await op(store, "delete_thread", thread)
    key = ModelCallKey(thread, "model:task-1", "SummarizationMiddleware.before_model", 0)
    assert await op(store, "recorded_answer", key) is None
    serde = store[0].serde
    await op(store, "record_answer", key, "digest-1", *serde.dumps_typed(AIMessage("summary one")))
    found = await op(store, "recorded_answer", key)
    assert found.digest == "digest-1" and serde.loads_typed(found.answer) == AIMessage("summary one")
    await op(store, "record_answer", key, "digest-2", *serde.dumps_typed(AIMessage("summary two")))  # replaced
    second = ModelCallKey(thread, "model:task-1", "SummarizationMiddleware.before_model", 1)
    await op(store, "record_answer", second, "digest-3", *serde.dumps_typed(AIMessage("again")))
    recorded = await op(store, "answers", thread)
    assert [(k, a.digest, serde.loads_typed(a.answer).content) for k, a in recorded] == [
        (key, "digest-2", "summary two"), (second, "digest-3", "again")]
    tool_key = CallKey(thread, "tools:task-2", "call-1")
    assert await op(store, "claim", tool_key, "pay") is None
    await op(store, "delete_thread", thread)  # tool calls and model calls alike
    assert await op(store, "answers", thread) == [] and await op(store, "entries", thread) == []
    assert await op(store, "recorded_answer", key) is None
