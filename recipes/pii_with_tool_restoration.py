"""PII placeholders: the model never sees a customer's email or card, yet the tools work with the real values.

What it shows
    A support agent with two tools, ``send_email(to, body)`` and ``refund(card, amount)``. Three middlewares:
    ``PIIMiddleware("email", strategy="placeholder", apply_to_tool_results=True)`` and the same for ``credit_card``,
    plus ``PIIMiddleware("ip", strategy="mask")``. The customer's message reaches the model as
    ``"... <EMAIL_1> ... <CREDIT_CARD_1> ... *.*.*.17"``; the (scripted) model calls the tools with the placeholders;
    ``before_tool`` puts the real values back just before each tool runs; the tools' echoes are scrubbed again before
    the next model call. The mapping (``pii_placeholders``) is a private state key: checkpointed with the thread,
    absent from the result, never sent to the model. A second turn in the same thread reuses the same numbers; another
    thread has no mapping at all. The custom stream reports counts per type, never values. Every step is checked, and
    the whole scenario runs under ``invoke`` and under ``ainvoke``.

When to use it
    Agents that must act on personal data (send the email, refund the card) while keeping it away from a third-party
    model provider and its logs.

Run it: ``python recipes/pii_with_tool_restoration.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import create_agent
from middleware_kit.middlewares.pii import PIIMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"
IP = "203.0.113.17"


def build() -> tuple[Any, ScriptedChatModel, list[tuple[str, dict[str, Any]]]]:
    actions: list[tuple[str, dict[str, Any]]] = []

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email to a customer."""
        actions.append(("send_email", {"to": to, "body": body}))
        return f"Email queued for {to}."

    @tool
    def refund(card: str, amount: float) -> str:
        """Refund an amount to a payment card."""
        actions.append(("refund", {"card": card, "amount": amount}))
        return f"Refunded {amount} to card {card}."

    model = ScriptedChatModel(
        [
            AIMessage(
                "",
                tool_calls=[
                    tool_call("refund", {"card": "<CREDIT_CARD_1>", "amount": 42.0}),
                    tool_call("send_email", {"to": "<EMAIL_1>", "body": "Your refund of 42.00 is on its way."}),
                ],
            ),
            "Done: refunded and <EMAIL_1> has been told.",
            AIMessage("", tool_calls=[tool_call("send_email", {"to": "<EMAIL_1>", "body": "Any other question?"})]),
            "Sent a follow-up.",
        ]
    )
    agent = create_agent(
        model,
        [send_email, refund],
        system_prompt="You are a support agent. Personal data appears as placeholders such as <EMAIL_1>.",
        middleware=[
            PIIMiddleware("email", strategy="placeholder", apply_to_tool_results=True),
            PIIMiddleware("credit_card", strategy="placeholder", apply_to_tool_results=True),
            PIIMiddleware("ip", strategy="mask"),
        ],
        checkpointer=InMemorySaver(),
    )
    return agent, model, actions


def everything_sent(model: ScriptedChatModel) -> str:
    def show(m: BaseMessage) -> str:
        return f"{m.content!r} {getattr(m, 'tool_calls', '')!r}"

    return "\n".join(show(m) for call in model.calls for m in call.messages)


async def scenario(mode: str) -> None:
    agent, model, actions = build()
    thread = {"configurable": {"thread_id": f"customer-42-{mode}"}}
    first = {"messages": [HumanMessage(f"Refund 42 to my card {CARD} and email me at {EMAIL}. (from {IP})")]}

    events: list[dict[str, Any]] = []
    if mode == "invoke":
        for chunk in agent.stream(first, thread, stream_mode="custom"):
            events.append(chunk)
    else:
        async for chunk in agent.astream(first, thread, stream_mode="custom"):
            events.append(chunk)

    # 1. The model saw placeholders (and a masked IP), never the values.
    assert model.calls[0].messages[1].content == (
        "Refund 42 to my card <CREDIT_CARD_1> and email me at <EMAIL_1>. (from *.*.*.17)"
    ), model.calls[0].messages[1].content
    sent = everything_sent(model)
    assert EMAIL not in sent and CARD not in sent and IP not in sent
    # 2. The tools got the real values back.
    assert sorted(actions) == [
        ("refund", {"card": CARD, "amount": 42.0}),
        ("send_email", {"to": EMAIL, "body": "Your refund of 42.00 is on its way."}),
    ], actions
    # 3. The tools' echoes were scrubbed before the model's second call.
    echoes = [m.content for m in model.calls[1].messages if m.type == "tool"]
    assert sorted(echoes) == ["Email queued for <EMAIL_1>.", "Refunded 42.0 to card <CREDIT_CARD_1>."], echoes
    # 4. Progress events carry counts, never values.
    pii_events = [e for e in events if e.get("event") == "pii"]
    assert pii_events and all(EMAIL not in repr(e) and CARD not in repr(e) for e in pii_events)
    print(f"[{mode}] pii events:", [(e["middleware"], e["where"], e["counts"]) for e in pii_events])

    # 5. The mapping is private: not in the result, but in the thread's checkpoint.
    state = agent.get_state(thread).values
    assert state["pii_placeholders"] == {"<EMAIL_1>": EMAIL, "<CREDIT_CARD_1>": CARD}

    # 6. A second turn in the same thread reuses <EMAIL_1>; the tool again gets the real address.
    second = {"messages": [HumanMessage(f"Thanks! Please also confirm to {EMAIL}.")]}
    result = agent.invoke(second, thread) if mode == "invoke" else await agent.ainvoke(second, thread)
    assert "pii_placeholders" not in result
    assert model.calls[2].messages[-1].content == "Thanks! Please also confirm to <EMAIL_1>."
    assert actions[-1] == ("send_email", {"to": EMAIL, "body": "Any other question?"})
    print(f"[{mode}] final answer: {result['messages'][-1].content}")


def main() -> None:
    asyncio.run(scenario("invoke"))
    asyncio.run(scenario("ainvoke"))
    print("OK: the model saw only placeholders; the tools got the real email and card, under invoke and ainvoke")


if __name__ == "__main__":
    main()
