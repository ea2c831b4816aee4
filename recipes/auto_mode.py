"""Auto mode for a file agent: low-risk deletions run at once, risky ones wait for a human, then resume.

What it shows
    ``auto = AutoModeMiddleware([delete_file, move_file], classifier=...)`` and
    ``HumanInTheLoopMiddleware(interrupt_on=auto.interrupt_on())``. When the model proposes calls, the classifier
    estimates each call's risk; low-risk calls run without asking anyone; risky ones pause the run for a human
    decision (approve / edit / reject), with the risk in the review's description. ``read_file`` is not listed, so
    it is never classified. The classifier here is a ``ScriptedChatModel`` whose callable step judges paths
    (``/etc``, ``/home`` and ``..`` are risky); in production use a small model or a ``BaseDecisionModel``.

    Checked: the risky call waits while the safe ones ran; a human edits the risky call
    to a safe path and the edited call runs; the classifier ran once per call (resuming never re-classifies); a
    second agent in blocking mode (``AutoModeMiddleware`` listed itself) answers the risky call with an error
    ``ToolMessage`` instead; both under invoke and ainvoke.

When to use it
    Agents with destructive tools where asking a human about every call is too slow, but some calls must never run
    unreviewed.

Run it: ``python recipes/auto_mode.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.middlewares.auto_mode import AutoModeMiddleware
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call

DONE: list[str] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def delete_file(path: str) -> str:
    """Delete a file permanently."""
    DONE.append(f"delete {path}")
    return f"deleted {path}"


@tool
def move_file(src: str, dst: str) -> str:
    """Move a file."""
    DONE.append(f"move {src} -> {dst}")
    return f"moved {src} to {dst}"


def judge(messages: list[BaseMessage]) -> str:
    """The classifier: the probability that the proposed call is risky."""
    proposed = str(messages[-1].content).split("Proposed tool call: ", 1)[1].splitlines()[0]
    return "0.93" if any(p in proposed for p in ("'/etc", "'/home", "..")) else "0.04"


def proposal() -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            tool_call("read_file", {"path": "notes/index.md"}, id="read"),
            tool_call("delete_file", {"path": "notes/draft.tmp"}, id="safe"),
            tool_call("move_file", {"src": "notes/old.md", "dst": "archive/old.md"}, id="move"),
            tool_call("delete_file", {"path": "/home/ann"}, id="risky"),
        ],
    )


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def call(agent: Any, inp: Any, config: Any, use_async: bool) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(agent.ainvoke(inp, config)) if use_async else agent.invoke(inp, config)
    return result


def review_flow(use_async: bool) -> None:
    DONE.clear()
    classifier = ScriptedChatModel(default=judge)
    auto = AutoModeMiddleware([delete_file, move_file], classifier=classifier)
    model = ScriptedChatModel([proposal(), "Tidied up; /home/ann was kept, its cache removed instead."])
    agent = create_agent(
        model,
        [read_file, delete_file, move_file],
        checkpointer=InMemorySaver(),
        middleware=[HumanInTheLoopMiddleware(interrupt_on=auto.interrupt_on())],
    )
    config = {"configurable": {"thread_id": f"review-{use_async}"}}

    paused = call(agent, {"messages": [HumanMessage("Tidy up my notes.")]}, config, use_async)
    request = paused["__interrupt__"][0].value
    print(f"    waiting for review: {[(a['name'], a['args']) for a in request['action_requests']]}")
    print(f"    description: {request['action_requests'][0]['description'].splitlines()[0]}")
    check([a["args"] for a in request["action_requests"]] == [{"path": "/home/ann"}], "only the risky call waits")
    check("risk 93%" in request["action_requests"][0]["description"], "the reviewer sees the risk")
    check(DONE == [], "nothing runs before the review of the batch")

    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/home/ann/.cache/tmp"}}}
    done = call(agent, Command(resume={"decisions": [edit]}), config, use_async)
    print(f"    ran: {sorted(DONE)}")
    check(
        sorted(DONE)
        == ["delete /home/ann/.cache/tmp", "delete notes/draft.tmp", "move notes/old.md -> archive/old.md"],
        f"ran: {DONE}",
    )
    check(classifier.call_count == 3, f"one classification per listed call, none on resume: {classifier.call_count}")
    check(done["messages"][-1].content.startswith("Tidied up"), "the run finished")


def blocking_flow(use_async: bool) -> None:
    DONE.clear()
    auto = AutoModeMiddleware([delete_file, move_file], classifier=ScriptedChatModel(default=judge))
    model = ScriptedChatModel([proposal(), "Done; one deletion was blocked."])
    agent = create_agent(model, [read_file, delete_file, move_file], middleware=[auto])
    result = call(agent, {"messages": [HumanMessage("Tidy up my notes.")]}, None, use_async)
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    print(f"    blocked: {answers['risky'].content[:70]}...")
    check(
        answers["risky"].status == "error" and "was blocked and did not run" in str(answers["risky"].content),
        "the risky call is blocked",
    )
    check(sorted(DONE) == ["delete notes/draft.tmp", "move notes/old.md -> archive/old.md"], f"ran: {DONE}")


def main() -> None:
    for use_async in (False, True):
        mode = "ainvoke" if use_async else "invoke"
        print(f"1. review mode ({mode}): safe calls run, the risky one waits for a human")
        review_flow(use_async)
        print(f"2. blocking mode ({mode}): the risky call is answered with an error")
        blocking_flow(use_async)
    print("\nOK: low-risk calls ran unasked, the risky call waited for (or was blocked without) a human.")


if __name__ == "__main__":
    main()
