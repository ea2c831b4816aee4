"""Approve, edit or reject an agent's tool calls at the terminal, with a run that survives restarts and typos.

What it shows
    ``HumanInTheLoopMiddleware`` pauses the agent before risky tool calls (``restart_service``, ``delete_volume``);
    the safe one (``read_logs``) waits for the decisions, then runs with the approved ones. The run is saved in a
    SQLite file and every resume builds the agent afresh, as a web app or a CLI started again would. The reviewer
    answers each call at the terminal: ``a``pprove, ``e``dit (new JSON arguments), ``r``eject (with a reason) or
    re``s``pond (the answer the model gets instead of running the tool). A malformed answer (wrong JSON shape, a
    decision the tool does not allow, arguments that do not fit the tool) raises ``InvalidResumeError``: the recipe
    prints it and asks again, because nothing was recorded and the interrupt is still pending.

When to use it
    Any agent whose tools change the world: deployments, payments, emails, deletions. Replace ``input()`` with
    your UI; the payload (``action_requests``/``review_configs``) and the resume value (``{"decisions": ...}``) are
    the same.

Run it: ``python recipes/terminal_approval.py`` (asks at the terminal), or with ``--yes`` or without a terminal
(CI): a scripted reviewer first sends a careless answer, to show nothing is lost, then approves everything.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.middlewares.human_in_the_loop import (
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
    InvalidResumeError,
)
from middleware_kit.testing import ScriptedChatModel, tool_call

RAN: list[tuple[str, dict[str, Any]]] = []
"""Every tool execution, to check that nothing runs twice (a real tool would act on the world)."""


@tool
def read_logs(service: str) -> str:
    """Read the last log lines of a service."""
    RAN.append(("read_logs", {"service": service}))
    return f"{service}: OOM killed twice in the last hour"


@tool
def restart_service(service: str, replicas: int) -> str:
    """Restart a service with a number of replicas."""
    RAN.append(("restart_service", {"service": service, "replicas": replicas}))
    return f"{service} restarted with {replicas} replica(s)"


@tool
def delete_volume(name: str) -> str:
    """Delete a storage volume."""
    RAN.append(("delete_volume", {"name": name}))
    return f"volume {name} deleted"


TOOLS: list[BaseTool] = [read_logs, restart_service, delete_volume]


def model_reply(messages: list[BaseMessage]) -> AIMessage:
    """The 'model': three parallel calls, then a summary of what the tools answered."""
    if not isinstance(messages[-1], ToolMessage):
        return AIMessage("Let me look and fix it.", tool_calls=[
            tool_call("read_logs", {"service": "api"}, id="call_logs"),
            tool_call("restart_service", {"service": "api", "replicas": 1}, id="call_restart"),
            tool_call("delete_volume", {"name": "api-cache"}, id="call_delete"),
        ])
    results = [m for m in messages if isinstance(m, ToolMessage)]
    return AIMessage("Summary: " + " | ".join(f"{m.name}: {m.status}" for m in results))


def build_agent(db: Path) -> Any:
    """Each process (or request) builds the same agent on the same SQLite file."""
    reviewer = HumanInTheLoopMiddleware({
        "restart_service": InterruptOnConfig(
            allowed_decisions=["approve", "edit", "reject"],
            description="Restarting drops in-flight requests. Check the replica count.",
        ),
        # Unanswered for a day, the deletion is rejected (see recipes/approval_expiry.py for the scheduler side).
        "delete_volume": InterruptOnConfig(
            allowed_decisions=["approve", "reject", "respond"], timeout=timedelta(days=1)
        ),
    })
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    return create_agent(ScriptedChatModel(default=model_reply), TOOLS, middleware=[reviewer], checkpointer=saver)


# -- reviewers: a human at the terminal, or a script ---------------------------------------------------------------
Reviewer = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def ask(prompt: str) -> str:
    try:
        return input(prompt).strip()
    except EOFError:
        raise SystemExit("\nNo answer: nothing ran, and the run stays paused until it is resumed.") from None


def ask_terminal(request: dict[str, Any], review: dict[str, Any]) -> dict[str, Any]:
    allowed = review["allowed_decisions"]
    keys = {"a": "approve", "e": "edit", "r": "reject", "s": "respond"}
    print(f"\n{request['description']}\n  -> {request['name']}({json.dumps(request['args'])})")
    choice = ask(f"  decision [{'/'.join(k for k, v in keys.items() if v in allowed)}]: ").lower()
    kind = keys.get(choice[:1], choice)
    if kind == "edit":
        raw = ask(f"  new args as JSON [{json.dumps(request['args'])}]: ")
        try:
            args = json.loads(raw) if raw else request["args"]
        except json.JSONDecodeError:
            args = raw  # sent as is: the middleware says what is wrong, and we ask again
        return {"type": "edit", "edited_action": {"name": request["name"], "args": args}}
    if kind in ("reject", "respond"):
        return {"type": kind, "message": ask("  message for the model: ") or "No."}
    return {"type": kind}


def approve_everything(request: dict[str, Any], review: dict[str, Any]) -> dict[str, Any]:
    print(f"  auto-approve: {request['name']}({json.dumps(request['args'])})")
    return {"type": "approve"}


def review_until_done(db: Path, config: Any, first: Any, reviewer: Reviewer, careless_first: bool) -> Any:
    result = first
    while result.get("__interrupt__"):
        (pending,) = result["__interrupt__"]
        payload = pending.value
        if careless_first:  # what a buggy client might send: refused, and nothing is lost
            careless_first = False
            try:
                build_agent(db).invoke(Command(resume="approve all"), config)
                raise SystemExit("a bare string must not be accepted as decisions")
            except InvalidResumeError as err:
                print(f"  refused (as expected): {err}")
            if build_agent(db).get_state(config).interrupts[0].value != payload or RAN:
                raise SystemExit("a refused resume must keep the interrupt pending and run nothing")
        decisions = {
            request["id"]: reviewer(request, review)
            for request, review in zip(payload["action_requests"], payload["review_configs"], strict=True)
        }
        try:
            result = build_agent(db).invoke(Command(resume={"decisions": decisions}), config)  # a fresh "process"
        except InvalidResumeError as err:
            print(f"\n  {err}\n  Let's try again.")
    return result


def main() -> None:
    interactive = sys.stdin.isatty() and "--yes" not in sys.argv[1:]
    reviewer: Reviewer = ask_terminal if interactive else approve_everything
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "approvals.sqlite"
        config = {"configurable": {"thread_id": "incident-7"}}
        first = build_agent(db).invoke({"messages": [HumanMessage("The api is flapping, fix it.")]}, config)
        if RAN:
            raise SystemExit(f"nothing may run before the decisions, but {RAN} ran")
        paused = first["__interrupt__"][0].value
        print(f"Paused for review: {[r['name'] for r in paused['action_requests']]} (expires {paused['expires_at']})")
        if not paused["expires_at"].endswith("Z"):
            raise SystemExit("the deadline travels in the payload, in UTC")
        result = review_until_done(db, config, first, reviewer, careless_first=not interactive)
        check(result, build_agent(db).get_state(config), interactive)


def check(result: Any, state: Any, interactive: bool) -> None:
    messages = result["messages"]
    print(f"\n{messages[-1].content}")
    if state.interrupts:
        raise SystemExit("the run should be finished")
    names = [name for name, _ in RAN]
    if len(names) != len(set(names)):
        raise SystemExit(f"a tool ran twice: {RAN}")
    calling = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    answers = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    if answers != {c["id"] for c in calling.tool_calls}:
        raise SystemExit("every call must have exactly one answer")
    review = state.values["human_review"]  # the audit trail: in the thread's private state, not in a message
    if set(review) != {"call_restart", "call_delete"} or "read_logs" not in names:
        raise SystemExit(f"only the risky calls are reviewed, the safe one runs: {review}, {RAN}")
    if not interactive and sorted(names) != ["delete_volume", "read_logs", "restart_service"]:
        raise SystemExit(f"--yes approves everything: {RAN}")
    decided = ", ".join(f"{call_id}={entry['decision']}" for call_id, entry in review.items())
    print(f"\nOK: reviewed {len(review)} call(s) ({decided}); {len(RAN)} tool run(s), each once, across restarts.")


if __name__ == "__main__":
    main()
