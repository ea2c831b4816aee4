"""One step of a human-in-the-loop run against a SQLite checkpoint, in a process of its own.

Used by ``test_human_in_the_loop.py``: each step runs in a fresh interpreter, so nothing survives between steps but
the SQLite file (and the log of tool executions). Usage::

    python hitl_sqlite_worker.py DB LOG start    # first run: pauses for approval, prints the interrupt as JSON
    python hitl_sqlite_worker.py DB LOG bad      # a malformed resume: prints the error class and message
    python hitl_sqlite_worker.py DB LOG resume   # a valid resume: prints the final messages as JSON

The policy reviews ``transfer`` only for non-admin tenants, read from ``runtime.context``; the context is given to
the first step only, as a web handler serving the reviewer (someone else) would do.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware, InvalidResumeError
from middleware_kit.testing import ScriptedChatModel, tool_call


@dataclass
class Tenant:
    role: str


def main(db: str, log: str, step: str) -> None:
    @tool
    def transfer(amount: int, to: str) -> str:
        """Transfer money."""
        with Path(log).open("a", encoding="utf-8") as f:
            f.write(json.dumps({"amount": amount, "to": to}) + "\n")
        return f"transferred {amount} to {to}"

    def reply(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("done")
        return AIMessage("", tool_calls=[tool_call("transfer", {"amount": 500, "to": "bob"}, id="call_t")])

    def when(call: Any, state: Any, runtime: Any) -> bool:
        return bool(runtime.context.role != "admin")  # the context comes again with every invoke

    hitl = HumanInTheLoopMiddleware({"transfer": {"allowed_decisions": ["approve", "edit", "reject"], "when": when}})
    conn = sqlite3.connect(db, check_same_thread=False)
    agent = create_agent(
        ScriptedChatModel(default=reply), [transfer], middleware=[hitl], checkpointer=SqliteSaver(conn),
        context_schema=Tenant,
    )
    config: Any = {"configurable": {"thread_id": "durable"}}
    if step == "start":
        out = agent.invoke({"messages": [HumanMessage("pay bob")]}, config, context=Tenant("clerk"))
        print(json.dumps([i.value for i in out["__interrupt__"]]))
    elif step == "bad":
        try:
            agent.invoke(Command(resume={"decisions": [{"type": "respond", "message": "no"}]}), config,
                         context=Tenant("clerk"))
        except InvalidResumeError as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
    else:
        edit = {"type": "edit", "edited_action": {"name": "transfer", "args": {"amount": 50, "to": "bob"}}}
        out = agent.invoke(Command(resume={"decisions": [edit]}), config, context=Tenant("clerk"))
        print(json.dumps([{"type": m.type, "content": m.content} for m in out["messages"]]))
    conn.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
