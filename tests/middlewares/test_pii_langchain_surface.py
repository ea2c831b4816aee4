"""PIIMiddleware's LangChain surface: the node hooks called directly, the stream transformer, bare-domain URLs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.runtime import Runtime

from middleware_kit import create_agent
from middleware_kit.middlewares.pii import PIIDetectionError, PIIMatch, PIIMiddleware, detect_email, detect_url
from middleware_kit.testing import ScriptedChatModel, tool_call

EMAIL = "ada@example.com"


def conversation() -> list[Any]:
    return [
        HumanMessage(f"I am {EMAIL}", id="h1", name="ada", additional_kwargs={"source": "web"}),
        AIMessage("", tool_calls=[tool_call("lookup", {"q": "ada"}, id="c1")], id="a1"),
        ToolMessage(f"found {EMAIL}", tool_call_id="c1", id="t1"),
    ]


def test_before_model_called_directly_returns_langchains_update() -> None:
    mw = PIIMiddleware("email", apply_to_tool_results=True)
    update = mw.before_model({"messages": conversation()}, Runtime())
    assert update is not None and len(update["messages"]) == 3  # the whole list, as LangChain returns it
    human, ai, result = update["messages"]
    assert human.content == "I am [REDACTED_EMAIL]" and (human.id, human.name) == ("h1", "ada")
    assert human.additional_kwargs == {"source": "web"}
    assert result.content == "found [REDACTED_EMAIL]" and result.id == "t1"
    assert ai is conversation()[1] or ai.id == "a1"
    assert mw.before_model({"messages": [HumanMessage("nothing here")]}, None) is None
    assert mw.before_model({"messages": []}, None) is None


def test_only_the_last_human_message_and_the_latest_tool_results_are_scanned() -> None:
    old = HumanMessage(f"old {EMAIL}", id="h0")
    update = PIIMiddleware("email").before_model({"messages": [old, *conversation()]}, Runtime())
    assert update is not None
    assert update["messages"][0] is old  # as in LangChain: earlier turns went through the hook already
    assert update["messages"][1].content == "I am [REDACTED_EMAIL]"
    assert update["messages"][3].content == f"found {EMAIL}"  # apply_to_tool_results is off


def test_after_model_called_directly_rewrites_the_last_ai_message() -> None:
    mw = PIIMiddleware("email", apply_to_input=False, apply_to_output=True)
    state: Any = {"messages": [HumanMessage(EMAIL), AIMessage(content=[{"type": "text", "text": f"mail {EMAIL}"}])]}
    update = mw.after_model(state, Runtime())
    assert update is not None and update["messages"][0].content == EMAIL
    assert update["messages"][1].content == [{"type": "text", "text": "mail [REDACTED_EMAIL]"}]
    assert PIIMiddleware("email").after_model(state, Runtime()) is None  # apply_to_output is off
    assert asyncio.run(mw.aafter_model(state, Runtime())) == update


def test_block_raises_from_the_hook_without_the_value() -> None:
    mw = PIIMiddleware("email", strategy="block")
    with pytest.raises(PIIDetectionError) as err:
        asyncio.run(mw.abefore_model({"messages": conversation()}, Runtime()))
    assert err.value.hook == "before_model" and err.value.pii_type == "email" and len(err.value.matches) == 1
    assert EMAIL not in str(err.value) and EMAIL not in repr(err.value.matches)


def test_a_custom_detector_may_return_text_instead_of_value() -> None:
    def detect(text: str) -> list[dict[str, Any]]:
        return [{"text": m["value"], "start": m["start"], "end": m["end"]} for m in detect_email(text)]

    mw = PIIMiddleware("contact", detector=detect, strategy="hash")
    update = mw.before_model({"messages": [HumanMessage(EMAIL)]}, Runtime())
    assert update is not None and update["messages"][0].content.startswith("<contact_hash:")


def test_an_agent_does_not_run_the_hooks_the_guard_does_that_work() -> None:
    seen: list[str] = []

    def counting(text: str) -> list[PIIMatch]:
        seen.append(text)
        return detect_email(text)

    mw = PIIMiddleware("email", detector=counting, apply_to_output=True)
    model = ScriptedChatModel([f"write to {EMAIL}"])
    agent: Any = create_agent(model, middleware=[mw])
    plan = str(agent.middleware_plan)
    assert "before_model" not in plan and "after_model" not in plan  # no node, no per-call work
    result = agent.invoke({"messages": [HumanMessage(f"I am {EMAIL}")]})
    assert [m.content for m in result["messages"]] == ["I am [REDACTED_EMAIL]", "write to [REDACTED_EMAIL]"]
    assert model.calls[0].messages[0].content == "I am [REDACTED_EMAIL]"
    assert f"I am {EMAIL}" in seen  # the guard scanned the input
    seen.clear()
    assert mw.before_model({"messages": [HumanMessage(f"I am {EMAIL}")]}, Runtime()) is not None  # a direct call
    assert seen == [f"I am {EMAIL}"]


def test_transformers_are_installed_when_output_or_tool_results_are_covered() -> None:
    assert PIIMiddleware("email").transformers == ()
    assert len(PIIMiddleware("email", apply_to_tool_results=True).transformers) == 1
    assert len(PIIMiddleware("email", strategy="block", apply_to_output=True).transformers) == 1


@tool
def lookup_user(user_id: str) -> str:
    """Look a user up."""
    return f"User {user_id}: {EMAIL}"


def _stream_surfaces(agent: Any, mode: str) -> list[str]:
    inp = {"messages": [HumanMessage("who is u1?")]}
    if mode == "invoke":
        return [repr(event) for event in agent.stream_events(inp, version="v3")]

    async def collect() -> list[str]:
        run = await agent.astream_events(inp, version="v3")
        return [repr(event) async for event in run]

    return asyncio.run(collect())


def _lookup_agent(strategy: str) -> Any:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("lookup_user", {"user_id": "u1"})]), "done"])
    mw = PIIMiddleware("email", strategy=strategy, apply_to_tool_results=True)  # type: ignore[arg-type]
    return create_agent(model, [lookup_user], middleware=[mw])


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
def test_tool_events_on_the_stream_are_redacted(mode: str) -> None:
    surfaces = _stream_surfaces(_lookup_agent("redact"), mode)
    assert any("tool-finished" in s for s in surfaces) and any("[REDACTED_EMAIL]" in s for s in surfaces)
    assert not [s for s in surfaces if EMAIL in s]


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
def test_block_fails_the_stream_before_the_value_is_shown(mode: str) -> None:
    with pytest.raises(PIIDetectionError) as err:
        _stream_surfaces(_lookup_agent("block"), mode)
    assert err.value.where == "stream" and EMAIL not in str(err.value)


def test_streamed_text_is_held_back_until_a_value_split_across_deltas_is_complete() -> None:
    (factory,) = PIIMiddleware("email", apply_to_output=True).transformers
    transformer = factory(())
    deltas = ["Reach me at ada", "@example", ".com today, or later " + "x" * 200]
    events: list[Any] = [
        {"type": "event", "method": "messages", "params": {"namespace": [], "timestamp": 0, "data": (
            {"event": "content-block-delta", "index": 0, "delta": {"type": "text-delta", "text": text}},
            {"run_id": "r"},
        )}}
        for text in deltas
    ]
    for event in events:
        transformer.process(event)
    streamed = "".join(e["params"]["data"][0]["delta"]["text"] for e in events)
    assert EMAIL not in streamed and "[REDACTED_EMAIL]" in streamed
    assert streamed.startswith("Reach me at [REDACTED_EMAIL] today")


def test_a_bare_domain_with_a_path_is_a_url() -> None:
    assert [m["value"] for m in detect_url("Go to example.com/page, not example.com.")] == ["example.com/page"]
    assert detect_url("write to ada@example.com/x") == []
