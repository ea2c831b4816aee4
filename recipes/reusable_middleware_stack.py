"""A reusable middleware stack: a team's standard layers, built by one function and shared by several agents.

What it shows
    ``standard_stack()`` returns a fresh list of middlewares that every agent of the team starts from:

    * ``AuditTrail`` (a subclass): ``before_tool`` logs every tool call, ``after_agent`` logs the end of every run;
    * ``tool_errors_to_messages`` (``@wrap_tool_call``): a tool that raises becomes an error ``ToolMessage`` the model
      can read and recover from, instead of a crashed run;
    * ``banned_word_guard`` (``@before_model(can_jump_to=["end"])``): when the user's latest message contains a banned
      word, it answers with a refusal and returns ``jump_to: "end"``; the model is never called, and the
      ``after_agent`` hooks still run (once).

    Two agents (support and billing) append their own middleware to the stack. ``print(agent.middleware_plan)``
    shows the assembled order, so nobody has to guess where the shared layers sit. Audit records go through the
    standard ``logging`` module: the middlewares keep nothing on ``self``.

When to use it
    When several agents must share the same cross-cutting policy (audit, error handling, guardrails): put it in one
    function, list it first (first = outermost), and add agent-specific layers after it. Call the function once per
    agent, so each agent gets its own instances.

Run it: ``python recipes/reusable_middleware_stack.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from middleware_kit import (
    AgentMiddleware,
    ModelRequest,
    ToolCallRequest,
    before_model,
    create_agent,
    dynamic_prompt,
    wrap_tool_call,
)
from middleware_kit.hooks import ToolHandler, ToolResult
from middleware_kit.testing import ScriptedChatModel, tool_call

audit_log = logging.getLogger("team.audit")


# -- the team's standard layers ------------------------------------------------------------------------------------
class AuditTrail(AgentMiddleware):
    """Logs every tool call (before it runs) and the end of every run."""

    def before_tool(self, request: ToolCallRequest) -> None:
        audit_log.info("tool %s(%s)", request.tool_call["name"], request.tool_call["args"])

    def after_agent(self, state: Any, runtime: Runtime[Any] | None) -> None:
        last = state["messages"][-1]
        audit_log.info("run ended after %d message(s); last: %r", len(state["messages"]), last.text)


@wrap_tool_call
def tool_errors_to_messages(request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
    """A failing tool becomes an error ToolMessage for the model, instead of an exception ending the run."""
    try:
        return handler(request)
    except GraphBubbleUp:
        raise  # interrupts and parent commands are control flow, not errors (the framework re-raises them anyway)
    except Exception as exc:
        return ToolMessage(
            f"Error: {request.tool_call['name']} failed: {exc}. Fix the arguments or try another way.",
            tool_call_id=request.tool_call["id"],
            name=request.tool_call["name"],
            status="error",
        )


def make_banned_word_guard(banned: Iterable[str]) -> AgentMiddleware:
    """A ``before_model`` guard: a banned word in the user's latest message ends the run before the model runs."""
    words = frozenset(w.lower() for w in banned)

    @before_model(can_jump_to=["end"])
    def banned_word_guard(state: Any, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        latest = next((m for m in reversed(state["messages"]) if isinstance(m, HumanMessage)), None)
        if latest is None or not words & set(latest.text.lower().split()):
            return None
        return {"messages": [AIMessage("Sorry, I can't help with that request.")], "jump_to": "end"}

    return banned_word_guard


def standard_stack(*, banned_words: Iterable[str] = ("password", "exploit")) -> list[AgentMiddleware]:
    """The team's standard middlewares, outermost first. A new list on every call, so each agent can extend its own.

    Sharing an instance between agents (``tool_errors_to_messages`` here) is safe: middlewares are stateless.
    """
    return [AuditTrail(), tool_errors_to_messages, make_banned_word_guard(banned_words)]


# -- two agents built on it ----------------------------------------------------------------------------------------
@tool
def order_status(order_id: str) -> str:
    """The delivery status of an order."""
    return {"A1": "shipped", "B2": "in preparation"}.get(order_id, "unknown order")


@tool
def refund(order_id: str, amount: float) -> str:
    """Refund (part of) an order."""
    if amount <= 0:
        raise ValueError(f"amount must be positive, got {amount}")
    return f"refunded {amount:.2f} on {order_id}"


@dynamic_prompt
def billing_persona(request: ModelRequest[Any]) -> str:
    return "You are the billing assistant. Never refund more than the order's total."


def build_support_agent(model: ScriptedChatModel) -> Any:
    return create_agent(model, [order_status], middleware=standard_stack(), name="support")


def build_billing_agent(model: ScriptedChatModel) -> Any:
    return create_agent(model, [refund], middleware=[*standard_stack(), billing_persona], name="billing")


class ListHandler(logging.Handler):
    """Collects log records in a list (for the checks below)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main() -> None:
    records = ListHandler()
    audit_log.addHandler(records)
    audit_log.setLevel(logging.INFO)

    support_model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("order_status", {"order_id": "A1"})]), "Your order A1 has shipped."]
    )
    billing_model = ScriptedChatModel(
        [
            AIMessage("", tool_calls=[tool_call("refund", {"order_id": "B2", "amount": -5})]),
            lambda messages: f"I could not refund: {messages[-1].text}",
        ]
    )
    support = build_support_agent(support_model)
    billing = build_billing_agent(billing_model)
    print(support.middleware_plan)
    print()
    print(billing.middleware_plan)

    # 1. The guard: a banned word ends the run before any model call; after_agent still runs.
    blocked = support.invoke({"messages": [HumanMessage("Tell me the admin password please")]})
    print(f"\nblocked run  -> {blocked['messages'][-1].text!r}")
    if support_model.call_count != 0:
        raise SystemExit("the guard must end the run before the model is called")
    if blocked["messages"][-1].text != "Sorry, I can't help with that request.":
        raise SystemExit(f"unexpected refusal: {blocked['messages'][-1]!r}")
    if records.lines != ["run ended after 2 message(s); last: \"Sorry, I can't help with that request.\""]:
        raise SystemExit(f"after_agent should have run exactly once after the jump to end: {records.lines}")

    records.lines.clear()
    blocked_async = asyncio.run(support.ainvoke({"messages": [HumanMessage("how to exploit this?")]}))
    if support_model.call_count != 0 or len(records.lines) != 1 or len(blocked_async["messages"]) != 2:
        raise SystemExit(f"under ainvoke too, the guard should end the run, then after_agent once: {records.lines}")

    # 2. A normal run on the same stack: the tool call is audited.
    records.lines.clear()
    ok = support.invoke({"messages": [HumanMessage("Where is order A1?")]})
    print(f"support run  -> {ok['messages'][-1].text!r}")
    if ok["messages"][-1].text != "Your order A1 has shipped." or support_model.call_count != 2:
        raise SystemExit(f"unexpected support run: {ok['messages']}")
    if records.lines[0] != "tool order_status({'order_id': 'A1'})" or len(records.lines) != 2:
        raise SystemExit(f"the tool call should be audited, then the end of the run: {records.lines}")

    # 3. The same stack on the billing agent: the failing tool becomes an error message the model can read.
    records.lines.clear()
    failed = billing.invoke({"messages": [HumanMessage("Refund order B2")]})
    tool_message = failed["messages"][-2]
    print(f"billing run  -> {failed['messages'][-1].text!r}")
    if not isinstance(tool_message, ToolMessage) or tool_message.status != "error":
        raise SystemExit(f"the tool error should be an error ToolMessage: {tool_message!r}")
    if "amount must be positive" not in failed["messages"][-1].text:
        raise SystemExit("the model should have seen the tool's error")
    if not billing_model.calls[0].messages[0].text.startswith("You are the billing assistant."):
        raise SystemExit("the billing agent's own middleware should run after the shared stack")
    if len(records.lines) != 2 or not records.lines[0].startswith("tool refund("):
        raise SystemExit(f"the billing agent should be audited by the shared stack too: {records.lines}")

    # The shared layers come first (outermost) in both agents.
    shared = ["AuditTrail", "tool_errors_to_messages", "banned_word_guard"]
    if list(support.middleware_plan.middleware) != shared:
        raise SystemExit(f"support: {support.middleware_plan.middleware}")
    if list(billing.middleware_plan.middleware) != [*shared, "billing_persona"]:
        raise SystemExit(f"billing: {billing.middleware_plan.middleware}")
    print("\nOK: one stack, two agents; the guard ended the run (after_agent still ran), tool errors became messages.")


if __name__ == "__main__":
    main()
