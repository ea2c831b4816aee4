"""A worker process serving agent turns against one shared PostgreSQL, for ``test_postgres_workers.py``.

Usage: ``python pg_worker.py DSN NAME``. Reads one JSON command per line on stdin, answers one JSON line on stdout:

- ``{"op": "start", "thread": T, "text": S}``: a new user turn (pauses for review of ``transfer``);
- ``{"op": "resume", "thread": T, "decision": "approve" | "reject", "hang": bool}``: answer the pending review. With
  ``hang``, the approved ``transfer`` prints ``{"hanging": ref}`` inside its (uncommitted) transaction and blocks
  forever, so the test can SIGKILL this process mid-run;
- ``{"op": "continue", "thread": T}``: run a thread on from its last checkpoint (after another worker died).

Nothing is shared with other workers but the database: the checkpoints (``PostgresSaver``) and the ``tool_runs``
table, where ``transfer`` records its side effect in a transaction of its own (so a killed run leaves no row).
Any worker can serve any thread: the scripted model's replies are functions of the messages.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.limits import ModelCallLimitMiddleware
from middleware_kit.run_control import RunControl
from middleware_kit.testing import ScriptedChatModel, tool_call

THREAD_LIMIT = 3


def reply(messages: list[BaseMessage]) -> AIMessage:
    """After a tool result: a final answer. After a user turn: ``transfer`` with a ref naming the thread and turn."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"done: {last.content}")
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    thread = str(humans[0].content).split()[-1]
    ref = f"{thread}/{len(humans)}"
    return AIMessage("", tool_calls=[tool_call("transfer", {"ref": ref}, id=f"call_{thread}_{len(humans)}")])


def main(dsn: str, name: str) -> None:
    hang = {"on": False}
    side = psycopg.connect(dsn)  # the tool's own connection: one transaction per side effect

    @tool
    def transfer(ref: str) -> str:
        """Move money (records the side effect in tool_runs)."""
        with side.transaction():
            side.execute("INSERT INTO tool_runs (ref, worker, pid) VALUES (%s, %s, %s)", (ref, name, os.getpid()))
            if hang["on"]:
                print(json.dumps({"hanging": ref}), flush=True)
                while True:
                    time.sleep(60)
        return f"transferred {ref}"

    with PostgresSaver.from_conn_string(dsn) as saver:
        agent = create_agent(
            ScriptedChatModel(default=reply),
            [transfer],
            middleware=[
                ModelCallLimitMiddleware(thread_limit=THREAD_LIMIT),
                HumanInTheLoopMiddleware({"transfer": True}),
            ],
            checkpointer=saver,
            # A killed worker's lease on its thread expires after ttl; the next worker waits for it, then runs on.
            run_control=RunControl(ttl=3.0, poll_interval=0.5, on_conflict="wait", wait_timeout=30.0),
            # This file checks the lease and LangGraph's replay; the call ledger's own crash tests are tests/ledger/.
            ledger=False,
        )
        print(json.dumps({"ready": name}), flush=True)
        for line in sys.stdin:
            cmd = json.loads(line)
            config: Any = {"configurable": {"thread_id": cmd["thread"]}}
            hang["on"] = bool(cmd.get("hang"))
            if cmd["op"] == "start":
                out = agent.invoke({"messages": [HumanMessage(cmd["text"])]}, config, durability="sync")
            elif cmd["op"] == "resume":
                resume = {"decisions": [{"type": cmd["decision"]}]}
                out = agent.invoke(Command(resume=resume), config, durability="sync")
            else:
                out = agent.invoke(None, config, durability="sync")
            answer = {
                "worker": name,
                "thread": cmd["thread"],
                "interrupts": [i.value for i in out.get("__interrupt__", ())],
                "last": out["messages"][-1].content,
                "thread_calls": out.get("thread_model_call_count"),
            }
            print(json.dumps(answer), flush=True)
    side.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
