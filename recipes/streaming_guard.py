"""Stream an agent's answer token by token, with guards that still hold: no chunk or event shows what they reject.

What it shows
    A model that streams (langchain-core's ``GenericFakeChatModel``, word by word) behind two vetting middlewares:
    ``PIIMiddleware(apply_to_output=True)`` (a window: text streams as soon as the 128 characters behind it are
    checked, an e-mail address is redacted before it is shown) and ``GuardrailsMiddleware`` with an output guard
    (the whole answer waits for the guard). Three runs: a clean answer streams token by token; an answer with an
    address streams redacted; an answer the guard rejects never streams, its replacement does. Each run is read
    from ``stream_mode="messages"`` and from ``astream_events(version="v2")`` (what most UIs and LangGraph Server's
    ``events`` mode consume), and checked: the secret appears in no chunk or event, and the text streamed is the
    text stored. A custom middleware declares its hold-back with one attribute (``stream_holdback``).

When to use it
    Any agent whose answers are streamed to a user and vetted by a middleware: PII, output guardrails, moderation,
    refusal handling, or your own check.

Run it: ``python recipes/streaming_guard.py`` (exits non-zero if a promise fails).
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.middlewares.guardrails import GuardrailsMiddleware
from middleware_kit.middlewares.pii import PIIMiddleware

SECRET = "vault code 7731"
EMAIL = "alice@example.com"
ASK = {"messages": [HumanMessage("What should I know?")]}


def no_vault_codes(request: Any, answer: AIMessage) -> str | None:
    """An output guard: trips on an answer that gives the vault code away."""
    return "the answer gives the vault code away" if SECRET in answer.text else None


class NoShouting(AgentMiddleware):
    """Your own vetting middleware: replaces an answer in capitals, so it declares the whole message."""

    stream_holdback = "message"

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        last = state["messages"][-1]
        if last.text.isupper():
            return {"messages": [AIMessage("(calm answer)", id=last.id)]}
        return None


def agent_saying(text: str) -> Any:
    model = GenericFakeChatModel(messages=iter([AIMessage(text)]))
    middleware: list[AgentMiddleware] = [
        PIIMiddleware("email", apply_to_output=True), GuardrailsMiddleware(output_guards=[no_vault_codes]), NoShouting()
    ]
    return create_agent(model, middleware=middleware)


def messages_mode(text: str) -> tuple[list[str], str]:
    """The text chunks ``stream_mode="messages"`` shows, and the answer stored."""
    chunks = [str(c.text) for c, _ in agent_saying(text).stream(ASK, stream_mode="messages")
              if isinstance(c, AIMessageChunk) and c.text]
    return chunks, str(agent_saying(text).invoke(ASK)["messages"][-1].text)


async def event_stream(text: str) -> list[Any]:
    return [event async for event in agent_saying(text).astream_events(ASK, version="v2")]


def check(label: str, text: str, secret: str, expected: str) -> None:
    chunks, stored = messages_mode(text)
    events = asyncio.run(event_stream(text))
    streamed = "".join(e["data"]["chunk"].text for e in events if e["event"] == "on_chat_model_stream")
    print(f"{label}: {len(chunks)} chunks, stored {stored!r}")
    if secret in repr(chunks) or secret in repr(events):
        raise SystemExit(f"FAIL {label}: {secret!r} reached the stream")
    if "".join(chunks) != stored or streamed != stored or not stored.startswith(expected):
        raise SystemExit(f"FAIL {label}: streamed {''.join(chunks)!r} / {streamed!r}, stored {stored!r}")


def main() -> None:
    check("clean", "Sunny all week, bring a hat.", "never-there", "Sunny all week")
    check("address", f"Write to {EMAIL} for the keys.", EMAIL, "Write to [REDACTED_EMAIL]")
    check("tripped", f"The {SECRET} opens it.", SECRET, "I can't help with that request.")
    check("shouting", "GIVE ME THE KEYS", "GIVE ME", "(calm answer)")
    print("OK: every stream showed only vetted text, and the text stored")


if __name__ == "__main__":
    main()
