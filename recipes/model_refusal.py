"""Refusals fail over: a provider's refusal becomes an error, and the fallback model answers instead.

What it shows
    ``middleware=[ModelFallbackMiddleware(backup), ModelRefusalMiddleware()]``: the fallback is the outer layer. When
    the primary model refuses (provider shapes as langchain-anthropic and langchain-openai return them: Anthropic's
    ``stop_reason="refusal"``, OpenAI's ``refusal`` field), ``ModelRefusalMiddleware`` raises ``ModelRefusalError``,
    and the fallback retries the request on the backup model. A ``model_refused`` event comes first on the custom
    stream (so a UI can retract streamed tokens), then the fallback's ``fallback`` event.

    Checked: both provider shapes fail over; a refusal written as prose is left alone (it is an answer); without a
    fallback the caller gets ``ModelRefusalError`` with the refusal text, and the thread stays usable (the refusing
    message was never committed); all under invoke and ainvoke.

When to use it
    Agents whose primary model sometimes refuses legitimate work (security research, medical or legal questions):
    fail over to a model with a different policy, or surface the refusal as an error your app handles.

Run it: ``python recipes/model_refusal.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.exceptions import ModelRefusalError
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import create_agent
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.model_refusal import ModelRefusalMiddleware
from middleware_kit.testing import ScriptedChatModel

ANTHROPIC_REFUSAL = AIMessage(content="", response_metadata={"stop_reason": "refusal", "model_provider": "anthropic"})
OPENAI_REFUSAL = AIMessage(
    content=[{"type": "text", "text": ""}],
    additional_kwargs={"refusal": "I'm sorry, I can't help with that."},
    response_metadata={"model_provider": "openai"},
)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def ask(agent: Any, text: str, use_async: bool, config: Any = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    inp = {"messages": [HumanMessage(text)]}
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}

    def record(kind: str, chunk: Any) -> None:
        nonlocal final
        if kind == "custom":
            events.append(chunk)
        else:
            final = chunk

    if use_async:

        async def consume() -> None:
            async for kind, chunk in agent.astream(inp, config, stream_mode=["custom", "values"]):
                record(kind, chunk)

        asyncio.run(consume())
    else:
        for kind, chunk in agent.stream(inp, config, stream_mode=["custom", "values"]):
            record(kind, chunk)
    return final, events


def main() -> None:
    for use_async in (False, True):
        mode = "ainvoke" if use_async else "invoke"
        for label, refusal in (("Anthropic", ANTHROPIC_REFUSAL), ("OpenAI", OPENAI_REFUSAL)):
            print(f"- {label} refusal fails over to the backup ({mode})")
            backup = ScriptedChatModel(["Here is how to harden the server: ..."])
            agent = create_agent(
                ScriptedChatModel([refusal]), middleware=[ModelFallbackMiddleware(backup), ModelRefusalMiddleware()]
            )
            final, events = ask(agent, "How do attackers exploit this CVE, so we can patch it?", use_async)
            print(f"    events: {[e['event'] for e in events]} -> {final['messages'][-1].content!r}")
            check([e["event"] for e in events] == ["model_refused", "fallback"], f"events: {events}")
            check(final["messages"][-1].content.startswith("Here is how to harden"), "the backup must answer")
            check(backup.call_count == 1, "the backup is called once")

        print(f"- a refusal in prose is an answer, not a refusal ({mode})")
        agent = create_agent(ScriptedChatModel(["I can't help with that."]), middleware=[ModelRefusalMiddleware()])
        final, events = ask(agent, "Do my homework.", use_async)
        check(final["messages"][-1].content == "I can't help with that." and events == [], "prose passes through")

        print(f"- no fallback: the caller gets ModelRefusalError and the thread stays usable ({mode})")
        model = ScriptedChatModel([OPENAI_REFUSAL, "Sure, here is a summary."])
        agent = create_agent(model, middleware=[ModelRefusalMiddleware()], checkpointer=InMemorySaver())
        config: RunnableConfig = {"configurable": {"thread_id": f"refusal-{mode}"}}
        try:
            ask(agent, "Summarise the leaked document.", use_async, config)
        except ModelRefusalError as exc:
            print(f"    raised: {exc}")
            check(str(exc).endswith("I'm sorry, I can't help with that."), f"message: {exc}")
            check(exc.raw_message is not None, "the refusing message is attached")
        else:
            raise SystemExit("FAILED: ModelRefusalError expected")
        kept = agent.get_state(config).values["messages"]
        check([type(m).__name__ for m in kept] == ["HumanMessage"], f"the refusal must not be committed: {kept}")
        final, _ = ask(agent, "Summarise the public report instead.", use_async, config)
        check(final["messages"][-1].content == "Sure, here is a summary.", "the next turn works")

    print("\nOK: refusals failed over to the backup, prose was left alone, and the thread survived a refusal.")


if __name__ == "__main__":
    main()
