"""PII placeholders: the model never sees a customer's email or card, yet the tools work with the real values.

What it shows
    A support agent with two tools, ``send_email(to, body)`` and ``refund(card, amount)``. Three middlewares:
    ``PIIMiddleware("email", strategy="placeholder", key=KEY)`` and the same for ``credit_card``, plus
    ``PIIMiddleware("ip", strategy="mask")``. The customer's message is rewritten before LangGraph commits it: the
    model, the checkpoints and every stream see ``"... <EMAIL_3f9a1c2e> ... <CREDIT_CARD_...> ... *.*.*.17"``. The
    (scripted) model calls the tools with the placeholders; the real values are put back just before each tool runs,
    and the tools' echoes become placeholders again before they reach state. The real values exist only sealed
    (encrypted with the deployment key) in the messages' metadata: the checkpointer's bytes never hold them, and an
    authorised reviewer opens them deliberately with ``reveal(..., key=KEY)``. A second turn in the same thread uses
    the same placeholder; the scenario runs under ``invoke`` and under ``ainvoke``, and every step is checked.

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
from middleware_kit.middlewares.pii import Keyring, PIIMiddleware, reveal
from middleware_kit.testing import ScriptedChatModel, tool_call

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"
IP = "203.0.113.17"
KEY = "recipe-only-key: in production read it from your secret manager"
P_EMAIL = Keyring.of(KEY).name("email", EMAIL)  # what the model sees instead of the address
P_CARD = Keyring.of(KEY).name("credit_card", CARD)


def build(saver: InMemorySaver) -> tuple[Any, ScriptedChatModel, list[tuple[str, dict[str, Any]]]]:
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
                    tool_call("refund", {"card": P_CARD, "amount": 42.0}),
                    tool_call("send_email", {"to": P_EMAIL, "body": "Your refund of 42.00 is on its way."}),
                ],
            ),
            f"Done: refunded and {P_EMAIL} has been told.",
            AIMessage("", tool_calls=[tool_call("send_email", {"to": P_EMAIL, "body": "Any other question?"})]),
            "Sent a follow-up.",
        ]
    )
    agent = create_agent(
        model,
        [send_email, refund],
        system_prompt="You are a support agent. Personal data appears as placeholders such as <EMAIL_3f9a1c2e>.",
        middleware=[
            PIIMiddleware("email", strategy="placeholder", key=KEY),
            PIIMiddleware("credit_card", strategy="placeholder", key=KEY),
            PIIMiddleware("ip", strategy="mask"),
        ],
        checkpointer=saver,
    )
    return agent, model, actions


def everything_sent(model: ScriptedChatModel) -> str:
    def show(m: BaseMessage) -> str:
        return f"{m.content!r} {getattr(m, 'tool_calls', '')!r}"

    return "\n".join(show(m) for call in model.calls for m in call.messages)


def stored_bytes(saver: InMemorySaver) -> bytes:
    """Everything the checkpointer holds (checkpoints, pending writes, blobs), as bytes."""

    def walk(x: Any) -> Any:
        if isinstance(x, bytes | str):
            yield x.encode() if isinstance(x, str) else x
        elif isinstance(x, dict):
            for k, v in x.items():
                yield from walk(k)
                yield from walk(v)
        elif isinstance(x, list | tuple):
            for v in x:
                yield from walk(v)

    return b"|".join(walk([saver.storage, saver.writes, saver.blobs]))


async def scenario(mode: str) -> None:
    saver = InMemorySaver()
    agent, model, actions = build(saver)
    thread = {"configurable": {"thread_id": f"customer-42-{mode}"}}
    first = {"messages": [HumanMessage(f"Refund 42 to my card {CARD} and email me at {EMAIL}. (from {IP})")]}

    chunks: list[Any] = []
    modes = ["values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"]
    if mode == "invoke":
        chunks.extend(agent.stream(first, thread, stream_mode=modes))
    else:
        chunks.extend([chunk async for chunk in agent.astream(first, thread, stream_mode=modes)])

    # 1. The model saw placeholders (and a masked IP), never the values, nor their sealed form.
    assert model.calls[0].messages[1].content == (
        f"Refund 42 to my card {P_CARD} and email me at {P_EMAIL}. (from *.*.*.17)"
    ), model.calls[0].messages[1].content
    sent = everything_sent(model) + repr([m.response_metadata for c in model.calls for m in c.messages])
    assert EMAIL not in sent and CARD not in sent and IP not in sent and "pii1." not in sent
    # 2. The tools got the real values back.
    assert sorted(actions) == [
        ("refund", {"card": CARD, "amount": 42.0}),
        ("send_email", {"to": EMAIL, "body": "Your refund of 42.00 is on its way."}),
    ], actions
    # 3. The tools' echoes became placeholders again before reaching state (and the model).
    echoes = [m.content for m in model.calls[1].messages if m.type == "tool"]
    assert sorted(echoes) == [f"Email queued for {P_EMAIL}.", f"Refunded 42.0 to card {P_CARD}."], echoes
    # 4. No stream chunk of any mode, and no byte the checkpointer stores, holds a raw value.
    for raw in (EMAIL, CARD, IP):
        assert raw not in repr(chunks), raw
        assert raw.encode() not in stored_bytes(saver), raw
    print(f"[{mode}] {len(chunks)} stream chunks and {len(stored_bytes(saver))} stored bytes: no raw value")

    # 5. An authorised reviewer opens the placeholders deliberately, with the key.
    state = agent.get_state(thread).values
    shown = reveal(state["messages"][-1].content, messages=state["messages"], key=KEY)
    assert shown == f"Done: refunded and {EMAIL} has been told.", shown

    # 6. A second turn in the same thread uses the same placeholder; the tool again gets the real address.
    second = {"messages": [HumanMessage(f"Thanks! Please also confirm to {EMAIL}.")]}
    result = agent.invoke(second, thread) if mode == "invoke" else await agent.ainvoke(second, thread)
    assert model.calls[2].messages[-1].content == f"Thanks! Please also confirm to {P_EMAIL}."
    assert actions[-1] == ("send_email", {"to": EMAIL, "body": "Any other question?"})
    assert EMAIL not in repr(result)
    print(f"[{mode}] final answer: {result['messages'][-1].content}")


def main() -> None:
    asyncio.run(scenario("invoke"))
    asyncio.run(scenario("ainvoke"))
    print("OK: the model saw only placeholders; the tools got the real email and card, under invoke and ainvoke")


if __name__ == "__main__":
    main()
