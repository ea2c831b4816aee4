"""A worker process for the PostgreSQL tenant-budget test of ``test_budget.py``.

Usage: ``python budget_pg_worker.py DSN NAME MODE`` (MODE ``invoke``: ``PostgresStore``/``PostgresSaver``;
``ainvoke``: their async twins). Reads one JSON command per line on stdin, answers one JSON line on stdout:
``{"thread": T, "tenant": X}`` runs one user turn of thread T for tenant X. The scripted model answers every call
with 100 tokens of ``usage_metadata``; the answer says which worker served the turn and whether the model was called.

Nothing is shared with the other workers but the database: checkpoints (thread budgets) and the store (tenant
budgets).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

from middleware_kit import create_agent
from middleware_kit.middlewares.budget import BudgetLimit, BudgetMiddleware
from middleware_kit.testing import ScriptedChatModel

TENANT_TOKENS = 1000
THREAD_TOKENS = 250
CALL_TOKENS = 100


def build(saver: Any, store: Any, model: ScriptedChatModel) -> Any:
    budget = BudgetMiddleware(tenant=BudgetLimit(tokens=TENANT_TOKENS), thread=BudgetLimit(tokens=THREAD_TOKENS),
                              warn_at=None)
    return create_agent(model, middleware=[budget], checkpointer=saver, store=store)


def answer_of(name: str, model: ScriptedChatModel, before: int, cmd: dict[str, Any], out: dict[str, Any]) -> str:
    return json.dumps({
        "worker": name,
        "thread": cmd["thread"],
        "called": model.call_count - before,
        "last": out["messages"][-1].content,
        "thread_tokens": out["budget"]["thread"]["total_tokens"],
    })


def reply(messages: Any) -> AIMessage:
    return AIMessage("ok", usage_metadata={"input_tokens": 60, "output_tokens": 40, "total_tokens": CALL_TOKENS})


def main_sync(dsn: str, name: str) -> None:
    model = ScriptedChatModel(default=reply)
    with PostgresSaver.from_conn_string(dsn) as saver, PostgresStore.from_conn_string(dsn) as store:
        agent = build(saver, store, model)
        print(json.dumps({"ready": name}), flush=True)
        for line in sys.stdin:
            cmd = json.loads(line)
            before = model.call_count
            out = agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": cmd["thread"]}},
                               context={"tenant_id": cmd["tenant"]}, durability="sync")
            print(answer_of(name, model, before, cmd, out), flush=True)


async def main_async(dsn: str, name: str) -> None:
    model = ScriptedChatModel(default=reply)
    async with AsyncPostgresSaver.from_conn_string(dsn) as saver, AsyncPostgresStore.from_conn_string(dsn) as store:
        agent = build(saver, store, model)
        print(json.dumps({"ready": name}), flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            cmd = json.loads(line)
            before = model.call_count
            out = await agent.ainvoke({"messages": [HumanMessage("hi")]},
                                      {"configurable": {"thread_id": cmd["thread"]}},
                                      context={"tenant_id": cmd["tenant"]}, durability="sync")
            print(answer_of(name, model, before, cmd, out), flush=True)


if __name__ == "__main__":
    if sys.argv[3] == "ainvoke":
        asyncio.run(main_async(sys.argv[1], sys.argv[2]))
    else:
        main_sync(sys.argv[1], sys.argv[2])
