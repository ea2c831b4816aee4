"""A dry run of a billing agent: the dangerous tools are emulated, the read-only ones run for real.

What it shows
    A billing agent with ``lookup_invoice`` (read-only), ``charge_card`` and ``send_receipt`` (side effects). In a dry
    run, ``LLMToolEmulator(tools=[charge_card, "send_receipt"], model=...)`` answers those two with a model instead of
    running them; ``lookup_invoice`` runs normally. Here the emulation model is a ``ScriptedChatModel`` whose callable
    step reads the emulation prompt (tool name, description, JSON arguments) and answers per tool, so the dry run is
    deterministic and offline; in a staging environment, use a real small model instead.

    Checked: the side-effect tools never ran (they raise if called), their ``ToolMessage``s are marked
    ``response_metadata["emulated"]``, a ``tool_emulated`` event per emulated call, the read-only tool's real
    result, and the same outcome under ``ainvoke``.

When to use it
    End-to-end tests and dry runs of agents whose tools have side effects or need credentials.

Run it: ``python recipes/llm_tool_emulator.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from middleware_kit import create_agent
from middleware_kit.middlewares.llm_tool_emulator import LLMToolEmulator
from middleware_kit.testing import ScriptedChatModel, tool_call


@tool
def lookup_invoice(invoice_id: str) -> str:
    """Look up an invoice: amount and customer."""
    return json.dumps({"invoice_id": invoice_id, "amount_eur": 129.0, "customer": "ann@example.com"})


@tool
def charge_card(customer: str, amount_eur: float) -> str:
    """Charge the customer's card on file."""
    raise RuntimeError("a dry run must never charge a card")


@tool
def send_receipt(to: str, amount_eur: float) -> str:
    """E-mail a receipt."""
    raise RuntimeError("a dry run must never send e-mail")


def emulate(messages: list[BaseMessage]) -> str:
    """The emulation model's answer, per tool, from the prompt it receives."""
    prompt = str(messages[-1].content)
    name = prompt.split("Tool: ", 1)[1].splitlines()[0]
    args = json.loads(prompt.split("Arguments: ", 1)[1].splitlines()[0])
    if name == "charge_card":
        return json.dumps({"status": "succeeded", "charge_id": "ch_dry_1", "amount_eur": args["amount_eur"]})
    return f"Receipt for {args['amount_eur']:.2f} EUR queued to {args['to']}."


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def build() -> Any:
    model = ScriptedChatModel(
        [
            AIMessage("", tool_calls=[tool_call("lookup_invoice", {"invoice_id": "INV-7"}, id="lookup")]),
            AIMessage(
                "",
                tool_calls=[
                    tool_call("charge_card", {"customer": "ann@example.com", "amount_eur": 129.0}, id="charge")
                ],
            ),
            AIMessage(
                "", tool_calls=[tool_call("send_receipt", {"to": "ann@example.com", "amount_eur": 129.0}, id="receipt")]
            ),
            "Charged 129.00 EUR and sent the receipt.",
        ]
    )
    emulator = LLMToolEmulator(tools=[charge_card, "send_receipt"], model=ScriptedChatModel(default=emulate))
    return create_agent(model, [lookup_invoice, charge_card, send_receipt], middleware=[emulator])


def dry_run(use_async: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    agent = build()
    inp = {"messages": [HumanMessage("Settle invoice INV-7.")]}
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}

    def record(kind: str, chunk: Any) -> None:
        nonlocal final
        if kind == "custom":
            events.append(chunk)
            print(f"    event: {chunk}")
        else:
            final = chunk

    if use_async:

        async def consume() -> None:
            async for kind, chunk in agent.astream(inp, stream_mode=["custom", "values"]):
                record(kind, chunk)

        asyncio.run(consume())
    else:
        for kind, chunk in agent.stream(inp, stream_mode=["custom", "values"]):
            record(kind, chunk)
    return final, events


def main() -> None:
    for number, use_async in ((1, False), (2, True)):
        print(f"{number}. dry run under {'ainvoke' if use_async else 'invoke'}")
        final, events = dry_run(use_async)
        results = {m.tool_call_id: m for m in final["messages"] if isinstance(m, ToolMessage)}
        for key, message in results.items():
            print(f"    {key}: {message.content} {message.response_metadata or ''}")
        check(json.loads(str(results["lookup"].content))["amount_eur"] == 129.0, "lookup_invoice must really run")
        check("emulated" not in results["lookup"].response_metadata, "a real result must not be marked emulated")
        check(json.loads(str(results["charge"].content))["charge_id"] == "ch_dry_1", "charge_card must be emulated")
        check(str(results["receipt"].content) == "Receipt for 129.00 EUR queued to ann@example.com.", "receipt")
        check(all(results[k].response_metadata == {"emulated": True} for k in ("charge", "receipt")), "marks")
        check(
            [(e["event"], e["tool"]) for e in events]
            == [("tool_emulated", "charge_card"), ("tool_emulated", "send_receipt")],
            f"events: {events}",
        )
        check(final["messages"][-1].content == "Charged 129.00 EUR and sent the receipt.", "final answer")

    print("\nOK: the dry run went end to end; no card was charged and no e-mail was sent.")


if __name__ == "__main__":
    main()
