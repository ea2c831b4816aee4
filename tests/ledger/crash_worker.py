"""A worker process of the crash matrix (tests/ledger/test_crash_matrix.py): runs agent turns on a shared SQLite file
or PostgreSQL database and kills itself (SIGKILL) at the kill point it is told.

Usage: ``python crash_worker.py KIND TARGET MODE`` (KIND ``sqlite`` | ``postgres``; MODE ``invoke`` | ``ainvoke``).
One JSON command per line on stdin, one JSON answer per line on stdout:

- ``{"op": "start", "thread": T, "kill": POINT, "parallel": bool}``: a new user turn; the model calls ``pay`` (and,
  with ``parallel``, ``ship`` in the same message); the process SIGKILLs itself at ``POINT`` (see ``KILL_POINTS``);
  every command may say ``"review": true``: the thread's agent then has ``pay`` reviewed (human in the loop);
- every command may say ``"models": true``: the thread's agent then has a summarizer and a tool selector, each
  calling a model of its own, and its model answers without calling tools; ``start`` sends a history long enough to
  be summarized; the kill points are ``MODEL_KILL_POINTS``; each middleware model call is an effect (``summarize`` or
  ``select``, key ``start`` when the model is asked, ``answer`` when it answers);
- ``{"op": "next", "thread": T}``: the thread's next user turn;
- ``{"op": "continue", "thread": T}``: run the thread on from its last checkpoint;
- ``{"op": "resume", "thread": T, "id": I, "decision": D, "kill": POINT}``: answer interrupt ``I`` with ``D`` (an
  in-doubt call's decision, or a review's), then die at ``POINT`` when given.

An answer is ``{"interrupts": [{"id", "value"}], "messages": [[type, content, tool_call_id, call ids]], "last": S}``.
Effects go to an ``effects`` table (SQLite: in a file next to the agent's; PostgreSQL: the same database), each
committed at once, so the test sees every effect that happened before a kill.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.ledger import current_idempotency_key
from middleware_kit.ledger import store as ledger_stores
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.llm_tool_selector import SELECT_TOOLS_NAME, LLMToolSelectorMiddleware
from middleware_kit.middlewares.summarization import SummarizationMiddleware
from middleware_kit.run_control import RunControl
from middleware_kit.testing import ScriptedChatModel, tool_call

KILL_POINTS = {
    "before_start": "pay: before its start is recorded",
    "after_start": "pay: started, before its effect",
    "after_effect": "pay: after its effect, before it returns",
    "after_finish": "pay: after its result is recorded",
    "sibling_dies": "parallel: pay finished; ship dies inside",
    "pay_dies_sibling_done": "parallel: ship finished; pay dies after its effect",
    "reviewed_after_effect": "human review: pay approved, dies after its effect",
    "before_agent": "hook boundary: before before_agent",
    "before_model#1": "hook boundary: before the first before_model",
    "inside_model#1": "the model: dies inside its first call",
    "after_model#1": "hook boundary: in after_model, pay not started",
    "wrap_tool_call:before": "hook boundary: wrap_tool_call, before pay",
    "wrap_tool_call:after": "hook boundary: wrap_tool_call, pay returned",
    "before_model#2": "hook boundary: before_model, after the tools",
    "inside_model#2": "the model: dies inside its call after the tools",
    "after_model#2": "hook boundary: after_model of the final answer",
    "after_agent": "hook boundary: in after_agent, the answer given",
}
MODEL_KILL_POINTS = {
    "mw_summarizer_dies": "summarizer: dies inside its model call",
    "mw_selection_recorded": "selector: dies right after its answer is recorded",
}
"""Kill points of a thread whose agent has middleware model calls (``"models": true``): each before the step is
saved."""
KILL: dict[str, str] = {"point": ""}
PAY_FINISHED = threading.Event()
SHIP_FINISHED = threading.Event()


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


SEEN: dict[str, int] = {}
SEEN_LOCK = threading.Lock()


def boundary(name: str) -> None:
    """Die when the kill point is ``name`` (its first time) or ``name#N`` (its N-th time in this process)."""
    with SEEN_LOCK:
        SEEN[name] = SEEN.get(name, 0) + 1
        count = SEEN[name]
    point = KILL["point"]
    if point == f"{name}#{count}" or (point == name and count == 1):
        die()


class Boundaries(AgentMiddleware):
    """Every hook of the run a kill point (``KILL_POINTS``' hook boundaries); a no-op unless told to die."""

    def before_agent(self, state: Any, runtime: Any) -> None:
        boundary("before_agent")

    def before_model(self, state: Any, runtime: Any) -> None:
        boundary("before_model")

    def after_model(self, state: Any, runtime: Any) -> None:
        boundary("after_model")

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        boundary("wrap_tool_call:before")
        result = handler(request)
        boundary("wrap_tool_call:after")
        return result

    def after_agent(self, state: Any, runtime: Any) -> None:
        boundary("after_agent")


def effects(kind: str, target: str) -> Callable[[str, str, str], None]:
    """``record(tool, ref, key)``: one committed row in ``effects``."""
    if kind == "sqlite":
        conn = sqlite3.connect(target + ".effects", timeout=60, check_same_thread=False, isolation_level=None)
        lock = threading.Lock()

        def record_sqlite(name: str, ref: str, key: str) -> None:
            with lock:
                conn.execute("INSERT INTO effects (tool, ref, key) VALUES (?, ?, ?)", (name, ref, key))

        return record_sqlite
    import psycopg

    pg = psycopg.connect(target, autocommit=True)
    pg_lock = threading.Lock()

    def record_pg(name: str, ref: str, key: str) -> None:
        with pg_lock:
            pg.execute("INSERT INTO effects (tool, ref, key) VALUES (%s, %s, %s)", (name, ref, key))

    return record_pg


def patch_ledger(name: str, *, before: Callable[..., None] | None = None,
                 after: Callable[[Any], None] | None = None) -> None:
    """Wrap the ledger stores' ``name`` and ``a{name}`` writes (every SQL kind): ``before(key, *args)`` runs before
    the write, ``after(key)`` after it: where a worker may die."""
    for cls in (ledger_stores.SqliteLedgerStore, ledger_stores.AsyncSqliteLedgerStore,
                ledger_stores.PostgresLedgerStore, ledger_stores.AsyncPostgresLedgerStore):
        sync_write, async_write = getattr(cls, name), getattr(cls, f"a{name}")

        def write(self: Any, key: Any, *args: Any, _write: Any = sync_write) -> Any:
            if before is not None:
                before(key, *args)
            out = _write(self, key, *args)
            if after is not None:
                after(key)
            return out

        async def awrite(self: Any, key: Any, *args: Any, _awrite: Any = async_write) -> Any:
            if before is not None:
                before(key, *args)
            out = await _awrite(self, key, *args)
            if after is not None:
                after(key)
            return out

        setattr(cls, name, write)
        setattr(cls, f"a{name}", awrite)


def die_at(point: str) -> None:
    if KILL["point"] == point:
        die()


def inject_kills() -> None:
    """The kill points the ledger's own steps mark: around its ``claim`` (start) and ``finish`` writes of ``pay``,
    and after a middleware's model answer is recorded."""
    patch_ledger("claim", before=lambda key, tool: die_at("before_start") if tool == "pay" else None)
    patch_ledger("finish", after=lambda key: finished(key.call_id))
    patch_ledger("record_answer", after=lambda key: answer_recorded(key.site))


def answer_recorded(site: str) -> None:
    if site.startswith("LLMToolSelectorMiddleware.") and KILL["point"] == "mw_selection_recorded":
        die()


def finished(call_id: str) -> None:
    if call_id.startswith("pay-"):
        if KILL["point"] == "after_finish":
            die()
        PAY_FINISHED.set()
    elif call_id.startswith("ship-"):
        SHIP_FINISHED.set()


def model_reply(messages: list[BaseMessage]) -> AIMessage:
    """After tool results: ``done: `` and every result of the last turn; after a user turn: ``pay`` (and ``ship``
    when the turn's text says ``parallel``) with ids naming the thread; in a thread with middleware model calls:
    ``done: `` and the summary it was given."""
    boundary("inside_model")
    last = messages[-1]
    if "mw_" in str(last.content):
        return AIMessage("done: " + str(messages[0].content).rsplit("\n", 1)[-1])
    if isinstance(last, ToolMessage):
        results = []
        for m in reversed(messages):
            if not isinstance(m, ToolMessage):
                break
            results.append(str(m.content))
        return AIMessage("done: " + " | ".join(sorted(results)))
    thread, _, parallel = str(last.content).partition(" ")
    calls = [tool_call("pay", {"ref": thread}, id=f"pay-{thread}")]
    if parallel:
        calls.append(tool_call("ship", {"ref": thread}, id=f"ship-{thread}"))
    return AIMessage("", tool_calls=calls)


_THREAD = re.compile(r"\b(?:sqlite|postgres)-a?invoke-mw_[a-z_]+")


def counted(name: str, record: Callable[[str, str, str], None], answer: Callable[[str], AIMessage],
            dies: str) -> ScriptedChatModel:
    """A middleware's own model: each call is recorded (``start``, then ``answer``) under the thread it names; it
    dies inside the call at kill point ``dies``."""

    def reply(messages: list[BaseMessage]) -> AIMessage:
        match = _THREAD.search(" ".join(str(m.content) for m in messages))
        thread = match.group(0) if match else "?"
        record(name, thread, "start")
        if dies and KILL["point"] == dies:
            die()
        record(name, thread, "answer")
        return answer(thread)

    return ScriptedChatModel(default=reply)


def model_middleware(record: Callable[[str, str, str], None]) -> list[Any]:
    """A summarizer (three messages trigger it; it keeps the last) and a tool selector, counted."""
    summarizer = counted("summarize", record, lambda thread: AIMessage(f"summary of {thread}"), "mw_summarizer_dies")
    selection = AIMessage("", tool_calls=[tool_call(SELECT_TOOLS_NAME, {"tools": ["pay"]})])
    selector = counted("select", record, lambda thread: selection, "")
    return [SummarizationMiddleware(summarizer, trigger=("messages", 3), keep=("messages", 1)),
            LLMToolSelectorMiddleware(model=selector, max_tools=1)]


def make_agent(saver: Any, record: Callable[[str, str, str], None], review: bool = False, models: bool = False) -> Any:
    @tool
    def pay(ref: str) -> str:
        """Pay (an effect that must happen at most once)."""
        point = KILL["point"]
        if point == "after_start":
            die()
        record("pay", ref, current_idempotency_key() or "")
        if point in ("after_effect", "reviewed_after_effect"):
            die()
        if point == "pay_dies_sibling_done":
            SHIP_FINISHED.wait(30)
            die()
        return f"paid {ref}"

    @tool
    def ship(ref: str) -> str:
        """Ship (an effect; safe to retry)."""
        if KILL["point"] == "sibling_dies":
            PAY_FINISHED.wait(30)
            die()
        record("ship", ref, current_idempotency_key() or "")
        return f"shipped {ref}"

    ship.metadata = {"idempotent": True}  # in doubt: retried without asking

    return create_agent(
        ScriptedChatModel(default=model_reply), [pay, ship], checkpointer=saver,
        middleware=[HumanInTheLoopMiddleware({"pay": True})] if review else model_middleware(record) if models
        else [Boundaries()],
        run_control=RunControl(on_conflict="wait", wait_timeout=60, ttl=3.0, poll_interval=0.05),
    )


def command(cmd: dict[str, Any]) -> Any:
    if cmd["op"] == "start":
        KILL["point"] = cmd.get("kill", "")
        if cmd.get("models"):
            return {"messages": [HumanMessage(f"earlier {cmd['thread']}"), AIMessage("noted"),
                                 HumanMessage(cmd["thread"])]}
        return {"messages": [HumanMessage(cmd["thread"] + (" parallel" if cmd.get("parallel") else ""))]}
    if cmd["op"] == "next":
        KILL["point"] = ""
        return {"messages": [HumanMessage(f"again {cmd['thread']}")]}
    if cmd["op"] == "resume":
        KILL["point"] = cmd.get("kill", KILL["point"])
        return Command(resume={cmd["id"]: cmd["decision"]})
    return None


def answer(out: dict[str, Any]) -> dict[str, Any]:
    return {
        "interrupts": [{"id": i.id, "value": i.value} for i in out.get("__interrupt__", ())],
        "messages": [[m.type, m.content, getattr(m, "tool_call_id", None),
                      [c["id"] for c in getattr(m, "tool_calls", None) or ()]] for m in out["messages"]],
        "last": out["messages"][-1].content,
    }


def all_agents(saver: Any, record: Callable[[str, str, str], None]) -> dict[tuple[bool, bool], Any]:
    """The worker's agents, by (review, models)."""
    return {(review, models): make_agent(saver, record, review, models)
            for review, models in ((False, False), (True, False), (False, True))}


def sync_saver(kind: str, target: str) -> tuple[Any, Any]:
    """The worker's checkpointer on the shared database (and the context manager holding its connection, or None)."""
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect(target, timeout=60, check_same_thread=False)), None
    from langgraph.checkpoint.postgres import PostgresSaver

    manager = PostgresSaver.from_conn_string(target)
    return manager.__enter__(), manager


def async_saver(kind: str, target: str) -> Any:
    """The worker's async checkpointer on the shared database, as a context manager."""
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        return AsyncSqliteSaver.from_conn_string(target)
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    return AsyncPostgresSaver.from_conn_string(target)


def serve_sync(kind: str, target: str) -> None:
    saver, _manager = sync_saver(kind, target)  # the manager kept: its connection closes when it is collected
    record = effects(kind, target)
    agents = all_agents(saver, record)
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        config: Any = {"configurable": {"thread_id": cmd["thread"]}}
        out = agents[bool(cmd.get("review")), bool(cmd.get("models"))].invoke(command(cmd), config, durability="sync")
        print(json.dumps(answer(out)), flush=True)


async def serve_async(kind: str, target: str) -> None:
    async with async_saver(kind, target) as saver:
        record = effects(kind, target)
        agents = all_agents(saver, record)
        print(json.dumps({"ready": os.getpid()}), flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            cmd = json.loads(line)
            config: Any = {"configurable": {"thread_id": cmd["thread"]}}
            agent = agents[bool(cmd.get("review")), bool(cmd.get("models"))]
            out = await agent.ainvoke(command(cmd), config, durability="sync")
            print(json.dumps(answer(out)), flush=True)


if __name__ == "__main__":
    inject_kills()
    kind_, target_, mode_ = sys.argv[1:4]
    if mode_ == "invoke":
        serve_sync(kind_, target_)
    else:
        asyncio.run(serve_async(kind_, target_))
