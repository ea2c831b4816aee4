"""Approval grants: a reviewer says "always allow this for a day", the calls it covers stop pausing, and every
decision, grant and use is on record; a call changed in the checkpoint after its approval does not run.

What it shows
    ``HumanInTheLoopMiddleware(key=..., tenant=...)``:
    - a reviewer approves a payout and, in the same decision, grants "always allow payouts to this supplier, for every
      thread of this tenant, for 24 hours" (``{"type": "approve", "reviewer": ..., "grant": {...}}``);
    - the next payouts to that supplier, in another thread of the same tenant, run without pausing; one to another
      supplier, or from another tenant, or after the grant expired, pauses again;
    - the audit: who granted (``grant_store(agent).grants()``), each use (``.uses(grant_id)``), who decided each call
      (``human_review`` in the thread's state);
    - the binding: an approved call whose arguments are changed in the saved checkpoint before it runs is refused
      with ``ApprovalMismatchError`` (the digest is keyed with the deployment secret).
    Grants live in the checkpointer's database: a SQLite file here. A fake clock stands in for a day passing.

When to use it
    Reviews that repeat: the same low-risk call, approved again and again. Keep grants narrow (a tool and an
    argument pattern), scoped (a thread or a tenant) and short-lived; revoke with ``grant_store(agent).revoke(...)``.

Run it: ``python recipes/approval_grants.py`` (offline; asserts its own outcome, exits non-zero on failure).
"""

from __future__ import annotations

import secrets
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.middlewares.human_in_the_loop import (
    ApprovalMismatchError,
    HumanInTheLoopMiddleware,
    grant_store,
)
from middleware_kit.testing import ScriptedChatModel, tool_call

KEY = secrets.token_urlsafe(32)
"""The deployment secret (in production: from your secret manager, or $MIDDLEWARE_KIT_APPROVAL_KEY)."""
NOW = [1_800_000_000.0]
PAID: list[tuple[str, int]] = []


@tool
def payout(supplier: str, amount: int) -> str:
    """Pay a supplier."""
    PAID.append((supplier, amount))
    return f"paid {amount} to {supplier}"


def reply(messages: list[BaseMessage]) -> AIMessage:
    """A scripted model: ``pay <supplier> <amount>`` -> a payout call; then it reports the result."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(f"Done: {messages[-1].content}")
    _, supplier, amount = str(messages[-1].content).split()
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    return AIMessage("", tool_calls=[tool_call("payout", {"supplier": supplier, "amount": int(amount)},
                                               id=f"payout-{turn}")])


def build_agent(saver: Any) -> Any:
    hitl = HumanInTheLoopMiddleware({"payout": {"allowed_decisions": ["approve", "reject"]}}, key=KEY,
                                    tenant="org", clock=lambda: NOW[0])
    return create_agent(ScriptedChatModel(default=reply), [payout], middleware=[hitl], checkpointer=saver)


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    print(f"  ok: {what}")


def ask(agent: Any, thread: str, org: str, text: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    return dict(agent.invoke({"messages": [HumanMessage(text)]}, config, context={"org": org}))


def grants_and_audit(agent: Any) -> None:
    print("a payout to acme pauses; the reviewer approves it and allows acme payouts for 24 h, tenant-wide")
    check("__interrupt__" in ask(agent, "t1", "org-1", "pay acme 100"), "the first payout waits for review")
    grant = {"scope": "tenant", "expires_in": 24 * 3600, "args": {"supplier": "acme"}}
    agent.invoke(Command(resume={"decisions": [{"type": "approve", "reviewer": "dana", "grant": grant}]}),
                 {"configurable": {"thread_id": "t1"}})
    check(PAID == [("acme", 100)], "the approved payout ran once")

    print("an hour later, another thread of the same tenant pays acme: no pause")
    NOW[0] += 3600
    out = ask(agent, "t2", "org-1", "pay acme 250")
    check("__interrupt__" not in out and PAID[-1] == ("acme", 250), "covered by the grant: it ran at once")
    check("__interrupt__" in ask(agent, "t3", "org-1", "pay globex 5"), "another supplier still waits for review")
    check("__interrupt__" in ask(agent, "t4", "org-2", "pay acme 5"), "another tenant still waits for review")

    [made] = grant_store(agent).grants("tenant", "org-1")
    check(made.granted_by == "dana" and made.args == {"supplier": "acme"}, "the grant records who and what")
    check([u.thread_id for u in grant_store(agent).uses(made.grant_id)] == ["t2"], "each use is recorded")
    review = agent.get_state({"configurable": {"thread_id": "t2"}}).values["human_review"]["payout-1"]
    check(review["by_grant"] == made.grant_id and review["reviewer"]["id"] == "dana",
          "the thread records that the grant approved the call, and whose grant it was")

    print("a day later the grant has expired: acme payouts pause again")
    NOW[0] += 24 * 3600
    check("__interrupt__" in ask(agent, "t5", "org-1", "pay acme 1"), "an expired grant no longer covers calls")


def tampering() -> None:
    print("a call changed in the checkpoint between its approval and its execution does not run")
    saver = InMemorySaver()
    agent = build_agent(saver)
    config: Any = {"configurable": {"thread_id": "t9"}}
    ask(agent, "t9", "org-1", "pay acme 10")
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, interrupt_before=["tools"])
    channel = "messages"  # the saved pending tool call (the calling AIMessage's): rewritten in storage, as an attacker
    saved = saver.get_tuple(config)  # with write access to the checkpoint database would
    assert saved is not None
    version = saved.checkpoint["channel_versions"][channel]
    stored = saver.serde.loads_typed(saver.blobs[("t9", "", channel, version)])
    stored[-1].tool_calls[0]["args"] = {"supplier": "mallory", "amount": 10_000}
    saver.blobs[("t9", "", channel, version)] = saver.serde.dumps_typed(stored)
    before = list(PAID)
    try:
        agent.invoke(None, config)
    except ApprovalMismatchError as exc:
        check(exc.tool_call_id == "payout-1" and "before_tool" in str(exc), "refused, naming the call and the hook")
    else:
        check(False, "the tampered call was refused")
    check(before == PAID, "nothing was paid to mallory")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "agent.sqlite", check_same_thread=False)
        grants_and_audit(build_agent(SqliteSaver(conn)))
        conn.close()
    tampering()
    print("OK: grants let covered calls through until they expire, every decision is on record, tampering is refused.")


if __name__ == "__main__":
    main()
