"""A worker process of the crash matrix with human review (tests/ledger/test_crash_review.py): runs a reviewed
``pay`` on a shared SQLite file or PostgreSQL database and kills itself (SIGKILL) at the kill point it is told.

Usage: ``python review_crash_worker.py KIND TARGET MODE`` (KIND ``sqlite`` | ``postgres``; MODE ``invoke`` |
``ainvoke``). One JSON command per line on stdin, one JSON answer per line on stdout:

- ``{"op": "start", "thread": T, "kill": POINT}``: a user turn; the model calls ``pay``, which is reviewed;
- ``{"op": "continue", "thread": T}``: run the thread on from its last checkpoint;
- ``{"op": "resume", "thread": T, "id": I, "decision": D, "kill": POINT}``: answer interrupt ``I`` with ``D``.

An answer is ``{"interrupts": [{"id", "value"}], "messages": [[type, content, tool_call_id, call ids]], "last": S,
"review": the thread's human_review}``. ``pay``'s effects go to an ``effects`` table, each committed at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.errors import GraphInterrupt
from langgraph.types import Command
from langgraph.types import interrupt as langgraph_interrupt

from middleware_kit import create_agent
from middleware_kit.ledger import current_idempotency_key
from middleware_kit.middlewares import human_in_the_loop
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.run_control import RunControl
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.ledger.crash_worker import (  # the tool-call matrix's worker: shared helpers
    async_saver,
    effects,
    patch_ledger,
    sync_saver,
)

KILL_POINTS = {
    "before_interrupt_saved": "review: interrupt raised, before it is saved",
    "after_interrupt_saved": "review: interrupt saved, before the reply",
    "after_resume_accepted": "review: approval validated, before it is saved",
    "before_tool_start": "approval saved; before pay's start is recorded",
    "inside_tool": "pay: started, before its effect",
    "after_effect": "pay: after its effect, before it returns",
    "after_finish": "pay: after its result is recorded",
}
KILL: dict[str, str] = {"point": ""}
KEY = "review-crash-matrix-deployment-key-0123456789"


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def killing_interrupt(value: Any, response_schema: Any = None) -> Any:
    """LangGraph's ``interrupt`` (the middleware's patch point), dying around it at the review kill points."""
    try:
        answer = langgraph_interrupt(value, response_schema=response_schema)
    except GraphInterrupt:
        if KILL["point"] == "before_interrupt_saved":
            die()
        raise
    if KILL["point"] == "after_resume_accepted":
        die()
    return answer


def inject_kills() -> None:
    human_in_the_loop.interrupt = killing_interrupt  # type: ignore[attr-defined]
    patch_ledger("claim", before=lambda key, name: die() if name == "pay" and KILL["point"] == "before_tool_start"
                 else None)
    patch_ledger("finish", after=lambda key: die() if KILL["point"] == "after_finish" else None)


def model_reply(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"done: {last.content}")
    thread = str(last.content)
    return AIMessage("", tool_calls=[tool_call("pay", {"ref": thread, "amount": 10}, id=f"pay-{thread}")])


def make_agent(saver: Any, record: Callable[[str, str, str], None]) -> Any:
    @tool
    def pay(ref: str, amount: int) -> str:
        """Pay (an effect that must happen at most once)."""
        if KILL["point"] == "inside_tool":
            die()
        record("pay", ref, current_idempotency_key() or "")
        if KILL["point"] == "after_effect":
            die()
        return f"paid {amount} for {ref}"

    hitl = HumanInTheLoopMiddleware({"pay": {"allowed_decisions": ["approve", "reject"]}}, key=KEY)
    return create_agent(ScriptedChatModel(default=model_reply), [pay], middleware=[hitl], checkpointer=saver,
                        run_control=RunControl(on_conflict="wait", wait_timeout=60, ttl=3.0, poll_interval=0.05))


def command(cmd: dict[str, Any]) -> Any:
    KILL["point"] = cmd.get("kill", "")
    if cmd["op"] == "start":
        return {"messages": [HumanMessage(cmd["thread"])]}
    if cmd["op"] == "resume":
        return Command(resume={cmd["id"]: cmd["decision"]})
    return None


def answer(out: dict[str, Any], review: Any) -> dict[str, Any]:
    if KILL["point"] == "after_interrupt_saved" and out.get("__interrupt__"):
        die()
    return {
        "interrupts": [{"id": i.id, "value": i.value} for i in out.get("__interrupt__", ())],
        "messages": [[m.type, m.content, getattr(m, "tool_call_id", None),
                      [c["id"] for c in getattr(m, "tool_calls", None) or ()]] for m in out["messages"]],
        "last": out["messages"][-1].content,
        "review": review,
    }


def serve_sync(kind: str, target: str) -> None:
    saver, _manager = sync_saver(kind, target)  # the manager kept: its connection closes when it is collected
    agent = make_agent(saver, effects(kind, target))
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        config: Any = {"configurable": {"thread_id": cmd["thread"]}}
        out = agent.invoke(command(cmd), config, durability="sync")
        review = agent.get_state(config).values.get("human_review")
        print(json.dumps(answer(out, review)), flush=True)


async def serve_async(kind: str, target: str) -> None:
    async with async_saver(kind, target) as saver:
        agent = make_agent(saver, effects(kind, target))
        print(json.dumps({"ready": os.getpid()}), flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            cmd = json.loads(line)
            config: Any = {"configurable": {"thread_id": cmd["thread"]}}
            out = await agent.ainvoke(command(cmd), config, durability="sync")
            review = (await agent.aget_state(config)).values.get("human_review")
            print(json.dumps(answer(out, review)), flush=True)


if __name__ == "__main__":
    inject_kills()
    kind_, target_, mode_ = sys.argv[1:4]
    if mode_ == "invoke":
        serve_sync(kind_, target_)
    else:
        asyncio.run(serve_async(kind_, target_))
