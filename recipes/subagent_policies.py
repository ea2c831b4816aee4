"""A supervisor's policies hold inside its sub-agents: redaction, one budget, human review from the top.

What it shows
    A supervisor agent with a deepagents-style ``task`` tool that hands work to a ``worker`` sub-agent (built with no
    middleware and no checkpointer of its own). The supervisor's inherited policies apply inside the worker
    (docs/subagents.md): ``PIIMiddleware`` redacts the customer's address before the worker's model sees it, the
    worker's model calls are charged to the supervisor's ``BudgetMiddleware`` run budget, and the worker's
    ``issue_refund`` call pauses the supervisor's run for a human (``HumanInTheLoopMiddleware``), whose
    ``Command(resume=...)`` on the supervisor's thread reaches the worker.

When to use it
    Any agent that delegates: a supervisor and its specialists, a ``task`` tool, a graph of agents. Put the policies
    on the outermost agent; every agent run inside it applies them.

Run it: ``python recipes/subagent_policies.py`` (offline; asserts its own outcome, exits non-zero on failure).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import create_agent
from middleware_kit.middlewares.budget import BudgetLimit, BudgetMiddleware
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.pii import PIIMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call

REFUNDS: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        print(f"FAILED: {what}")
        sys.exit(1)


def spent(tokens: int, text: str = "", calls: list[Any] | None = None) -> AIMessage:
    return AIMessage(content=text, tool_calls=calls or [],
                     usage_metadata={"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens})


@tool
def issue_refund(order: str) -> str:
    """Refund an order."""
    REFUNDS.append(order)
    return f"refunded {order}"


worker_model = ScriptedChatModel([
    spent(40, calls=[tool_call("issue_refund", {"order": "A-1"})]),
    spent(40, "Refunded A-1 and told the customer."),
])
worker = create_agent(worker_model, [issue_refund], name="worker")


@tool
def task(description: str) -> str:
    """Hand a task to the worker."""
    return str(worker.invoke({"messages": [HumanMessage(description)]})["messages"][-1].content)


def supervisor() -> Any:
    redact = PIIMiddleware("email", strategy="redact")
    redact.inherited = True  # the default of PIIMiddleware in this release
    budget = BudgetMiddleware(run=BudgetLimit(tokens=1_000), warn_at=None)
    with warnings.catch_warnings():  # issue_refund is the worker's tool, not the supervisor's: reviewed there
        warnings.simplefilter("ignore")
        review = HumanInTheLoopMiddleware({"issue_refund": True})
        return create_agent(
            ScriptedChatModel([
                spent(100, calls=[tool_call("task", {"description": "refund A-1 for ann@example.com"})]),
                spent(10, "The worker refunded A-1."),
            ]),
            [task],
            middleware=[redact, budget, review],
            checkpointer=InMemorySaver(),
            name="supervisor",
        )


def main() -> None:
    agent = supervisor()
    config = {"configurable": {"thread_id": "customer-42"}}
    print(agent.middleware_plan)

    paused = agent.invoke({"messages": [HumanMessage("please refund A-1")]}, config)
    [review] = paused["__interrupt__"]
    request = review.value["action_requests"][0]
    print("the supervisor's run waits for a human:", request["name"], request["args"])
    check(request["name"] == "issue_refund" and REFUNDS == [], "the worker's refund waits for a human")
    check(worker_model.calls[0].messages[-1].content == "refund A-1 for [REDACTED_EMAIL]",
          "the worker's model never saw the address")

    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    check(REFUNDS == ["A-1"], "approved from the top, the refund ran once, in the worker")
    check(done["messages"][-1].content == "The worker refunded A-1.", "the supervisor finished")
    book = done["budget"]
    check(book["by_source"]["run"]["subagent:worker"]["total_tokens"] == 80, "the worker's calls were charged")
    check(book["run"]["total_tokens"] == 190, "one run budget: supervisor 110 + worker 80")
    print("budget of the run:", book["run"]["total_tokens"], "tokens, of which the worker:",
          book["by_source"]["run"]["subagent:worker"]["total_tokens"])
    print("OK: redaction, budget and review held inside the sub-agent.")


if __name__ == "__main__":
    main()
