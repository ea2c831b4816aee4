"""Stream hold-back with the real clients (``ChatOpenAI`` on Chat Completions and Responses, ``ChatAnthropic``),
streamed over the wire in deltas of three characters (tool-call arguments included) from the local provider double.
No stream surface carries what a vetting middleware rejects; the text streamed is the text stored."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.tools import tool

from middleware_kit import create_agent
from middleware_kit.middlewares.guardrails import GuardrailsMiddleware
from middleware_kit.middlewares.moderation import KeywordModerationChecker, ModerationMiddleware
from middleware_kit.middlewares.pii import PIIMiddleware
from tests.providers.conftest import openai_model
from tests.providers.double import ProviderDouble, Reply, ToolCallReply
from tests.providers.test_clients import CLIENTS, SESSION_LOOP

EMAIL = "alice.smith@example.com"
SECRET = "ZEBRA-7731"
ASK = {"messages": [HumanMessage("go")]}


@tool
def send_mail(to: str, body: str) -> str:
    """Send a mail."""
    return "sent"


def no_secret(request: Any, answer: AIMessage) -> str | None:
    return "a secret code" if SECRET in answer.text else None


def _ai_text(state: dict[str, Any]) -> str:
    return "".join(m.text for m in state["messages"] if isinstance(m, AIMessage))


SCRIPTS: dict[str, tuple[list[Reply], Any, str]] = {
    "guardrails": ([Reply(text=f"Café ☕ the code is {SECRET}, keep it")], lambda: GuardrailsMiddleware(
        output_guards=[no_secret]), SECRET),
    "pii-text": ([Reply(text=f"write to {EMAIL} " + "and then some more words " * 8)], lambda: PIIMiddleware(
        "email", apply_to_output=True), EMAIL),
    "pii-tool-args": ([Reply(tool_calls=[ToolCallReply("send_mail", {"to": EMAIL, "body": "hi"})]), Reply(text="ok")],
                      lambda: PIIMiddleware("email", apply_to_output=True), EMAIL),
    "moderation": ([Reply(text=f"do it like {SECRET} says")], lambda: ModerationMiddleware(
        KeywordModerationChecker([SECRET]), check_input=False), SECRET),
}


@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.parametrize("script", list(SCRIPTS))
def test_stream_messages_over_the_wire(provider: ProviderDouble, script: str, client: str) -> None:
    replies, middleware, secret = SCRIPTS[script]
    provider.script(*replies, *replies)
    agent = create_agent(CLIENTS[client](provider), [send_mail], middleware=[middleware()])
    items = list(agent.stream(ASK, stream_mode=["messages", "updates", "values", "custom"]))
    assert secret not in repr(items)
    chunks = [data[0] for mode, data in items if mode == "messages" and isinstance(data[0], AIMessageChunk)]
    assert "".join(c.text for c in chunks) == _ai_text(agent.invoke(ASK))


@SESSION_LOOP
@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.parametrize("script", list(SCRIPTS))
async def test_astream_events_v2_over_the_wire(provider: ProviderDouble, script: str, client: str) -> None:
    replies, middleware, secret = SCRIPTS[script]
    provider.script(*replies, *replies)
    agent = create_agent(CLIENTS[client](provider), [send_mail], middleware=[middleware()])
    events = [e async for e in agent.astream_events(ASK, version="v2")]
    assert secret not in repr(events)
    streamed = "".join(e["data"]["chunk"].text for e in events if e["event"] == "on_chat_model_stream")
    assert streamed == _ai_text(await agent.ainvoke(ASK))


@SESSION_LOOP
async def test_stream_events_v3_over_the_wire(provider: ProviderDouble) -> None:
    replies, middleware, secret = SCRIPTS["guardrails"]
    provider.script(*replies)
    agent = create_agent(openai_model(provider), middleware=[middleware()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the v3 protocol is beta
        run = await agent.astream_events(ASK, version="v3")
    events = [e async for e in run]
    assert secret not in repr(events) and "I can't help with that request" in repr(events)


def test_without_a_guard_the_wire_streams_as_it_comes(provider: ProviderDouble) -> None:
    """The contrast: no vetting middleware, the secret streams in deltas (which is why the guards hold back)."""
    provider.script(Reply(text=f"the code is {SECRET}"))
    agent = create_agent(openai_model(provider))
    chunks = [c for c, _ in agent.stream(ASK, stream_mode="messages") if isinstance(c, AIMessageChunk) and c.text]
    assert len(chunks) > 5 and SECRET in "".join(c.text for c in chunks)
