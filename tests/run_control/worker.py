"""A worker process for the run-control tests: serves agent turns on a shared SQLite file or PostgreSQL database.

Usage: ``python worker.py KIND TARGET NAME MODE TTL`` (KIND ``sqlite`` | ``postgres``; MODE ``invoke`` | ``ainvoke``;
TTL seconds, or ``plain``: the plain agent, ``create_agent(..., checkpointer=saver)`` with run control's defaults).
One JSON command per line on stdin, one JSON answer per line on stdout:

- ``{"op": "start", "thread": T, "text": S}``: a new user turn (pauses for review of ``pay``);
- ``{"op": "resume", "thread": T, "id": I | null, "hang": bool}``: approve the pending review (of interrupt ``I``
  when given). With ``hang``, ``pay`` prints ``{"hanging": ref}`` after its (uncommitted) side effect and blocks
  forever, so the test can SIGKILL this process while it holds the thread's lease. With ``stall``, ``pay`` commits
  its side effect, prints ``{"stalled": ref}`` and sleeps a second, so the test can SIGSTOP the process there;
- ``{"op": "continue", "thread": T}``: run the thread on from its last checkpoint;
- ``{"op": "cancel", "thread": T}``: cancel whatever run holds the thread (any process).

An answer is the run's outcome, or ``{"error": ClassName, "message": ...}`` for a ``MiddlewareError``. Side effects
go to a ``tool_runs`` table in the same PostgreSQL database (for SQLite, in a ledger file next to the
agent's, so an uncommitted side effect does not lock the agent's file), in a transaction of their own.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.errors import MiddlewareError
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.run_control import RunControl
from middleware_kit.testing import ScriptedChatModel
from tests.run_control.helpers import APPROVE, reply


def side_effects(kind: str, target: str) -> Callable[[str, str, str], None]:
    """``record(ref, worker, how)``: insert a tool_runs row in its own transaction (``how``: ``"hang"`` blocks before
    the commit, ``"stall"`` sleeps a second after it)."""
    if kind == "sqlite":
        conn = sqlite3.connect(target + ".ledger", timeout=60, check_same_thread=False)

        def record_sqlite(ref: str, worker: str, how: str) -> None:
            conn.execute("INSERT INTO tool_runs (ref, worker, pid) VALUES (?, ?, ?)", (ref, worker, os.getpid()))
            if how == "hang":
                hang(ref)
            conn.commit()
            if how == "stall":
                stall(ref)

        return record_sqlite
    import psycopg

    pg = psycopg.connect(target)

    def record_pg(ref: str, worker: str, how: str) -> None:
        with pg.transaction():
            pg.execute("INSERT INTO tool_runs (ref, worker, pid) VALUES (%s, %s, %s)", (ref, worker, os.getpid()))
            if how == "hang":
                hang(ref)
        if how == "stall":
            stall(ref)

    return record_pg


def hang(ref: str) -> None:
    print(json.dumps({"hanging": ref}), flush=True)
    while True:
        time.sleep(60)


def stall(ref: str) -> None:
    print(json.dumps({"stalled": ref}), flush=True)
    time.sleep(1.0)


def make_agent(saver: Any, name: str, record: Callable[[str, str, str], None], how: dict[str, str],
               ttl: str) -> Any:
    @tool
    def pay(ref: str) -> str:
        """Pay (records the side effect)."""
        record(ref, name, how["now"])
        return f"paid {ref}"

    # These workers test run control alone: where create_agent has the call ledger, it is off (it would pause a run
    # continued after a crash for a decision about the call that was in flight: tests/ledger covers that).
    extra: dict[str, Any] = {"ledger": False} if "ledger" in inspect.signature(create_agent).parameters else {}
    if ttl == "plain":
        return create_agent(ScriptedChatModel(default=reply), [pay],
                            middleware=[HumanInTheLoopMiddleware({"pay": True})], checkpointer=saver, **extra)
    return create_agent(ScriptedChatModel(default=reply), [pay], middleware=[HumanInTheLoopMiddleware({"pay": True})],
                        checkpointer=saver, **extra,
                        run_control=RunControl(on_conflict="wait", wait_timeout=60, ttl=float(ttl),
                                               poll_interval=0.05))


def command(cmd: dict[str, Any]) -> Any:
    if cmd["op"] == "start":
        return {"messages": [HumanMessage(cmd["text"])]}
    if cmd["op"] == "resume":
        return Command(resume={cmd["id"]: APPROVE} if cmd.get("id") else APPROVE)
    return None


def answer(name: str, cmd: dict[str, Any], out: Any) -> dict[str, Any]:
    return {
        "worker": name,
        "thread": cmd["thread"],
        "interrupts": [{"id": i.id, "args": i.value["action_requests"][0]["args"]}
                       for i in out.get("__interrupt__", ())],
        "last": out["messages"][-1].content,
    }


def failure(name: str, cmd: dict[str, Any], exc: MiddlewareError) -> dict[str, Any]:
    return {"worker": name, "thread": cmd["thread"], "error": type(exc).__name__, "message": str(exc)}


def mode_of(cmd: dict[str, Any]) -> str:
    return "hang" if cmd.get("hang") else "stall" if cmd.get("stall") else ""


def serve_sync(kind: str, target: str, name: str, ttl: str) -> None:
    how = {"now": ""}
    record = side_effects(kind, target)
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(target, timeout=60, check_same_thread=False)
        saver: Any = SqliteSaver(conn)
        closer: Any = conn
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        closer = PostgresSaver.from_conn_string(target)
        saver = closer.__enter__()
    agent = make_agent(saver, name, record, how, ttl)
    print(json.dumps({"ready": name}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        config: Any = {"configurable": {"thread_id": cmd["thread"]}}
        how["now"] = mode_of(cmd)
        try:
            if cmd["op"] == "cancel":
                result: dict[str, Any] = {"worker": name, "cancelled": agent.cancel(cmd["thread"])}
            else:
                result = answer(name, cmd, agent.invoke(command(cmd), config, durability="sync"))
        except MiddlewareError as exc:
            result = failure(name, cmd, exc)
        print(json.dumps(result), flush=True)


async def serve_async(kind: str, target: str, name: str, ttl: str) -> None:
    how = {"now": ""}
    record = side_effects(kind, target)
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        manager: Any = AsyncSqliteSaver.from_conn_string(target)
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        manager = AsyncPostgresSaver.from_conn_string(target)
    async with manager as saver:
        agent = make_agent(saver, name, record, how, ttl)
        print(json.dumps({"ready": name}), flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            cmd = json.loads(line)
            config: Any = {"configurable": {"thread_id": cmd["thread"]}}
            how["now"] = mode_of(cmd)
            try:
                if cmd["op"] == "cancel":
                    result: dict[str, Any] = {"worker": name, "cancelled": await agent.acancel(cmd["thread"])}
                else:
                    result = answer(name, cmd, await agent.ainvoke(command(cmd), config, durability="sync"))
            except MiddlewareError as exc:
                result = failure(name, cmd, exc)
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    kind_, target_, name_, mode_, ttl_ = sys.argv[1:6]
    if mode_ == "invoke":
        serve_sync(kind_, target_, name_, ttl_)
    else:
        asyncio.run(serve_async(kind_, target_, name_, ttl_))
