"""Stream hold-back (``AgentMiddleware.stream_holdback``): no stream surface carries text a vetting middleware later
rejects or rewrites, and the text streamed is the text the final state holds. Every surface: ``stream``/``astream``
in every mode (combined, subgraphs), ``astream_events`` v2 (the model's own callback events), ``stream_events`` v3."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from langchain_core.exceptions import ModelRefusalError
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool
from pydantic import BaseModel

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit._engine.holdback import Holdback
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares.guardrails import GuardrailsMiddleware, GuardrailTripped
from middleware_kit.middlewares.model_refusal import ModelRefusalMiddleware
from middleware_kit.middlewares.moderation import KeywordModerationChecker, ModerationMiddleware
from middleware_kit.middlewares.pii import PIIMiddleware
from middleware_kit.structured_output import ProviderStrategy, StructuredOutputError, ToolStrategy
from tests.streaming.conftest import INPUT, SURFACES, TokenModel, collect, model_end_text, streamed_text

EMAIL = "alice.smith@example.com"
SECRET = "ZEBRA-7731"
UNICODE = "Café ☕ 日本語 — naïve façade; "


@tool
def send_mail(to: str, body: str) -> str:
    """Send a mail."""
    return "sent"


def no_secret(request: Any, answer: AIMessage) -> str | None:
    return "the answer holds a secret code" if SECRET in answer.text else None


@dataclass(frozen=True)
class Case:
    make: Callable[[], Any]
    secret: str


CASES: dict[str, Case] = {
    "guardrails-trip": Case(lambda: create_agent(
        TokenModel(answers=[AIMessage(f"{UNICODE}the vault code is {SECRET}, keep it safe")]),
        middleware=[GuardrailsMiddleware(output_guards=[no_secret])]), SECRET),
    "pii-text-split": Case(lambda: create_agent(
        TokenModel(answers=[AIMessage(f"{UNICODE}write to {EMAIL} today. " + "More words follow here. " * 8)]),
        middleware=[PIIMiddleware("email", apply_to_output=True)]), EMAIL),
    "pii-short-answer": Case(lambda: create_agent(
        TokenModel(answers=[AIMessage(f"mail {EMAIL}")], size=2),
        middleware=[PIIMiddleware("email", strategy="mask", apply_to_output=True)]), EMAIL),
    "pii-tool-call-args": Case(lambda: create_agent(
        TokenModel(answers=[
            AIMessage("", tool_calls=[{"name": "send_mail", "args": {"to": EMAIL, "body": "hi"}, "id": "c1"}]),
            AIMessage("sent it")]),
        [send_mail], middleware=[PIIMiddleware("email", apply_to_output=True)]), EMAIL),
    "moderation-end": Case(lambda: create_agent(
        TokenModel(answers=[AIMessage(f"here is how: {SECRET} step by step")]),
        middleware=[ModerationMiddleware(KeywordModerationChecker([SECRET]), check_input=False)]), SECRET),
    "generic-fake-model": Case(lambda: create_agent(
        GenericFakeChatModel(messages=iter([AIMessage(f"the vault code is {SECRET} and more text after it")])),
        middleware=[GuardrailsMiddleware(output_guards=[no_secret])]), SECRET),
}


def _final_ai_text(case: Case) -> str:
    state = case.make().invoke(INPUT)
    return "".join(m.text for m in state["messages"] if isinstance(m, AIMessage))


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("case", list(CASES))
def test_no_surface_carries_what_a_guard_rejects(case: str, surface: str) -> None:
    items = collect(CASES[case].make(), surface)
    assert items
    assert CASES[case].secret not in repr(items)
    text = streamed_text(surface, items)
    if text is not None:
        assert text == _final_ai_text(CASES[case])
    if surface == "astream_events:v2":
        assert "".join(model_end_text(items)) == _final_ai_text(CASES[case])


def test_a_tripped_answer_streams_the_replacement_under_the_models_run() -> None:
    agent = CASES["guardrails-trip"].make()
    chunks = [c for c, _ in agent.stream(INPUT, stream_mode="messages") if isinstance(c, AIMessageChunk)]
    assert "".join(c.text for c in chunks).startswith("I can't help with that request.")
    assert {c.id for c in chunks} == {chunks[0].id} and str(chunks[0].id).startswith("lc_run--")
    assert chunks[-1].chunk_position == "last"
    state = CASES["guardrails-trip"].make().invoke(INPUT)
    assert SECRET not in repr(state["messages"])


def test_a_passing_answer_is_replayed_token_by_token() -> None:
    def make() -> Any:
        return create_agent(TokenModel(answers=[AIMessage("all clear, nothing to hide here")], size=4),
                            middleware=[GuardrailsMiddleware(output_guards=[no_secret])])

    chunks = [c for c, meta in make().stream(INPUT, stream_mode="messages") if isinstance(c, AIMessageChunk)]
    assert [c.text for c in chunks if c.text] == ["all ", "clea", "r, n", "othi", "ng t", "o hi", "de h", "ere"]
    events = asyncio.run(_events(make()))
    starts = [e for e in events if e["event"] == "on_chat_model_start"]
    streams = [e for e in events if e["event"] == "on_chat_model_stream"]
    ends = [e for e in events if e["event"] == "on_chat_model_end"]
    assert len(starts) == len(ends) == 1 and len(streams) >= 8
    assert {e["run_id"] for e in [*starts, *streams, *ends]} == {starts[0]["run_id"]}
    assert streams[0]["metadata"]["langgraph_node"] == "model"


async def _events(agent: Any) -> list[Any]:
    return [e async for e in agent.astream_events(INPUT, version="v2")]


def test_a_window_streams_before_the_answer_is_complete() -> None:
    """PII's window: text is released while the model still streams (and the value is never in it)."""
    agent = CASES["pii-text-split"].make()
    events = asyncio.run(_events(agent))
    kinds = [e["event"] for e in events if e["event"].startswith("on_chat_model")]
    first_stream = kinds.index("on_chat_model_stream")
    assert first_stream < len(kinds) - 2  # more than the closing chunk
    assert EMAIL not in repr(events)


# -- errors: the held answer is never shown ---------------------------------------------------------------------
def _until_error(agent: Any, surface: str) -> tuple[list[Any], BaseException | None]:
    items: list[Any] = []

    async def drain() -> None:
        if surface == "astream_events:v2":
            async for event in agent.astream_events(INPUT, version="v2"):
                items.append(event)
        else:
            async for item in agent.astream(INPUT, stream_mode=["messages", "updates", "custom"]):
                items.append(item)

    try:
        if surface == "stream":
            for item in agent.stream(INPUT, stream_mode=["messages", "updates", "custom"]):
                items.append(item)
        else:
            asyncio.run(drain())
    except Exception as exc:
        return items, exc
    return items, None


ERROR_CASES: dict[str, Any] = {
    "guardrails-error": (lambda: create_agent(
        TokenModel(answers=[AIMessage(f"the vault code is {SECRET}")]),
        middleware=[GuardrailsMiddleware(output_guards=[no_secret], on_trip="error")]), GuardrailTripped),
    "pii-block": (lambda: create_agent(
        TokenModel(answers=[AIMessage(f"write to {EMAIL} now")]),
        middleware=[PIIMiddleware("email", strategy="block", apply_to_output=True)]), Exception),
    "provider-strategy-rejects": (lambda: create_agent(
        TokenModel(answers=[AIMessage(f'{{"city": "{SECRET}"')]),  # not valid JSON: rejected
        response_format=ProviderStrategy(City)), StructuredOutputError),
}


class RefusingModel(TokenModel):
    """Streams a standard refusal block in pieces (as a provider's refusal deltas)."""

    def _pieces(self, answer: AIMessage) -> Any:
        text = str(answer.content)
        for i in range(0, len(text), self.size):
            yield AIMessageChunk(content=[{"type": "refusal", "refusal": text[i:i + self.size], "index": 0}])


ERROR_CASES["model-refusal"] = (lambda: create_agent(
    RefusingModel(answers=[AIMessage(f"I won't reveal {SECRET}.")]), middleware=[ModelRefusalMiddleware()]),
    ModelRefusalError)


class City(BaseModel):
    city: str


@pytest.mark.parametrize("surface", ["stream", "astream", "astream_events:v2"])
@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_a_rejected_answer_never_reaches_the_stream(case: str, surface: str) -> None:
    make, error = ERROR_CASES[case]
    items, exc = _until_error(make(), surface)
    assert isinstance(exc, error)
    secret = EMAIL if case == "pii-block" else SECRET
    if case == "model-refusal":  # its verdict event reports the refusal's own words, on purpose (custom stream)
        items = [i for i in items if not (isinstance(i, tuple) and i[0] == "custom")]
    assert secret not in repr(items)


def test_a_tool_strategy_that_handles_errors_streams_as_it_stores() -> None:
    answer = AIMessage("", tool_calls=[{"name": "City", "args": {"city": "Paris"}, "id": "c1"}])
    agent = create_agent(TokenModel(answers=[answer]), response_format=ToolStrategy(City))
    chunks = [c for c, _ in agent.stream(INPUT, stream_mode="messages") if isinstance(c, AIMessageChunk)]
    assert len(chunks) > 3  # argument deltas, live
    assert Holdback.of([("response_format", None)]) is None


# -- no guard: nothing is held back ----------------------------------------------------------------------------
class GatedModel(TokenModel):
    """Streams its first token, then waits (up to 0.2 s) for the consumer to have seen it."""

    seen: Any = None
    saw_consumer: bool | None = None

    async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGenerationChunk

        pieces = list(self._pieces(self._answer()))
        yield ChatGenerationChunk(message=pieces[0])
        try:
            await asyncio.wait_for(self.seen.wait(), 0.2)
            self.saw_consumer = True
        except TimeoutError:
            self.saw_consumer = False
        for piece in pieces[1:]:
            yield ChatGenerationChunk(message=piece)


async def _first_token_order(middleware: list[Any]) -> bool | None:
    model = GatedModel(answers=[AIMessage("one two three four five six")], seen=asyncio.Event())
    agent = create_agent(model, middleware=middleware)
    async for chunk, _ in agent.astream(INPUT, stream_mode="messages"):
        if isinstance(chunk, AIMessageChunk) and chunk.text:
            model.seen.set()
    return model.saw_consumer


def test_without_a_guard_the_first_token_arrives_while_the_model_streams() -> None:
    assert asyncio.run(_first_token_order([])) is True
    assert asyncio.run(_first_token_order([GuardrailsMiddleware(input_guards=[lambda r: None],
                                                                parallel=False)])) is True


def test_with_a_message_guard_the_first_token_waits_for_the_verdict() -> None:
    assert asyncio.run(_first_token_order([GuardrailsMiddleware(output_guards=[no_secret])])) is False


# -- declarations ----------------------------------------------------------------------------------------------
def test_the_bundled_vetting_middlewares_declare_their_holdback() -> None:
    assert PIIMiddleware("email", apply_to_output=True).stream_holdback == 128
    assert PIIMiddleware("email").stream_holdback is None
    assert GuardrailsMiddleware(output_guards=[no_secret]).stream_holdback == "message"
    assert GuardrailsMiddleware(input_guards=[lambda r: None]).stream_holdback == "message"  # beside the call
    assert GuardrailsMiddleware(input_guards=[lambda r: None], parallel=False).stream_holdback is None
    assert ModerationMiddleware(KeywordModerationChecker(["x"])).stream_holdback == "message"
    assert ModerationMiddleware(KeywordModerationChecker(["x"]), check_output=False).stream_holdback is None
    assert ModelRefusalMiddleware().stream_holdback == "message"


def test_the_strictest_declaration_wins() -> None:
    assert Holdback.of([("a", None), ("b", 10), ("c", 40)]) == Holdback(40, ("c",))
    assert Holdback.of([("a", 10), ("b", "message"), ("c", 40)]) == Holdback(None, ("b",))
    assert Holdback.of([("a", None)]) is None


class Shouting(AgentMiddleware):
    """A custom vetting middleware: rejects an answer in capitals, so it declares the whole message."""

    stream_holdback: int | Literal["message"] | None = "message"

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        response = handler(request)
        if any(m.text.isupper() for m in response.result if isinstance(m, AIMessage)):
            return type(response)(result=[AIMessage("(no shouting)")])
        return response

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        response = await handler(request)
        if any(m.text.isupper() for m in response.result if isinstance(m, AIMessage)):
            return type(response)(result=[AIMessage("(no shouting)")])
        return response


@pytest.mark.parametrize("surface", ["stream:messages", "astream:messages", "astream_events:v2", "stream_events:v3"])
def test_a_custom_middleware_declares_holdback_with_one_attribute(surface: str) -> None:
    def make() -> Any:
        return create_agent(TokenModel(answers=[AIMessage(f"GIVE ME {SECRET} NOW")]), middleware=[Shouting()])

    items = collect(make(), surface)
    assert SECRET not in repr(items) and streamed_text(surface, items) == "(no shouting)"


def test_without_the_declaration_the_custom_middleware_leaks() -> None:
    """The contrast: the same middleware without ``stream_holdback`` lets the raw tokens through."""
    mw = Shouting()
    mw.stream_holdback = None
    agent = create_agent(TokenModel(answers=[AIMessage(f"GIVE ME {SECRET} NOW")]), middleware=[mw])
    assert SECRET in "".join(c.text for c, _ in agent.stream(INPUT, stream_mode="messages"))


def test_a_bad_declaration_names_the_middleware_and_the_fix() -> None:
    mw = Shouting()
    mw.stream_holdback = "whole"  # type: ignore[assignment]
    with pytest.raises(MiddlewareConfigError) as err:
        create_agent(TokenModel(answers=[AIMessage("x")]), middleware=[mw])
    assert err.value.middleware == "Shouting" and err.value.hook == "stream_holdback"
    assert "Shouting.stream_holdback is 'whole'" in str(err.value) and '"message"' in str(err.value)


def test_state_and_checkpoints_are_unchanged_by_holdback(run: Any) -> None:
    state = run(CASES["pii-text-split"].make(), {"messages": [HumanMessage("tell me")]})
    assert "[REDACTED_EMAIL]" in state["messages"][-1].text and EMAIL not in repr(state)


# -- an input guard that trips beside the model call -----------------------------------------------------------
def tripping_input(request: Any) -> str | None:
    return "not allowed" if "forbidden" in request.messages[-1].text else None


@pytest.mark.parametrize("surface", ["stream:messages", "astream:all", "astream_events:v2", "astream_events:v3"])
def test_an_answer_discarded_by_an_input_guard_never_streams(surface: str) -> None:
    agent = create_agent(TokenModel(answers=[AIMessage(f"sure, the code is {SECRET}")]),
                         middleware=[GuardrailsMiddleware(input_guards=[tripping_input])])
    items = collect(agent, surface, {"messages": [HumanMessage("a forbidden request")]})
    assert SECRET not in repr(items)


# -- the agent as a subgraph of another graph --------------------------------------------------------------------
def _parent() -> Any:
    from langgraph.graph import END, START, StateGraph

    from middleware_kit.types import AgentState

    inner = CASES["guardrails-trip"].make()
    graph: Any = StateGraph(AgentState)
    graph.add_node("assistant", inner)
    graph.add_edge(START, "assistant")
    graph.add_edge("assistant", END)
    return graph.compile()


@pytest.mark.parametrize("surface", ["stream:messages+subgraphs", "astream:messages+subgraphs", "astream_events:v2",
                                     "stream_events:v3"])
def test_inside_a_parent_graph_the_hold_back_holds(surface: str) -> None:
    items = collect(_parent(), surface)
    assert items and SECRET not in repr(items)
    assert "I can't help with that request." in repr(items)


# -- several model calls in one node: a retry ------------------------------------------------------------------
class FlakyModel(TokenModel):
    """Streams a few tokens of its first answer, then fails; the retry streams the second answer."""

    failed: bool = False

    def _stream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        pieces = self._pieces(self._answer())
        if not self.failed:
            self.failed = True
            yield from (ChatGenerationChunk(message=next(pieces)) for _ in range(3))
            raise ConnectionError("connection reset")
        yield from (ChatGenerationChunk(message=piece) for piece in pieces)

    async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        for chunk in self._stream(messages):
            yield chunk


@pytest.mark.parametrize("surface", ["stream:messages", "astream:messages", "astream_events:v2"])
def test_a_retried_call_shows_only_the_answer_that_landed(surface: str) -> None:
    from middleware_kit.middlewares.retry import ModelRetryMiddleware

    answers = [AIMessage(f"partial {SECRET} first try"), AIMessage("the second answer, all clean")]
    agent = create_agent(FlakyModel(answers=answers), middleware=[
        GuardrailsMiddleware(output_guards=[no_secret]),
        ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False, retry_on=(ConnectionError,))])
    items = collect(agent, surface)
    assert SECRET not in repr(items)
    assert streamed_text(surface, items) == "the second answer, all clean"


def test_structured_output_holds_back_where_validation_rejects() -> None:
    from middleware_kit.structured_output import AutoStrategy, structured_holdback

    assert structured_holdback(ProviderStrategy(City)) == "message"
    assert structured_holdback(AutoStrategy(City)) == "message"
    assert structured_holdback(ToolStrategy(City, handle_errors=False)) == "message"
    assert structured_holdback(ToolStrategy(City, handle_errors=ValueError)) == "message"  # other errors raise
    assert structured_holdback(ToolStrategy(City)) is None
    assert structured_holdback(ToolStrategy(City, handle_errors="try again")) is None
    assert structured_holdback(None) is None


class RedactCodes(AgentMiddleware):
    """A custom window: its message guard rewrites the code wherever it appears, so ten characters suffice."""

    stream_holdback = 12

    def guard_messages(self, messages: Any, runtime: Any) -> Any:
        out = [m.model_copy(update={"content": _redacted(m.content)})
               if isinstance(m, AIMessage) and SECRET in repr(m.content) else m for m in messages]
        return out if any(a is not b for a, b in zip(out, messages, strict=True)) else None


def _redacted(content: Any) -> Any:
    if isinstance(content, str):
        return content.replace(SECRET, "[CODE]")
    return [{**b, "text": b["text"].replace(SECRET, "[CODE]")} if isinstance(b, dict) and "text" in b else b
            for b in content]


@pytest.mark.parametrize("surface", ["stream:messages", "astream_events:v2", "stream_events:v3", "astream_events:v3"])
def test_a_custom_window_streams_vetted_text_as_it_comes(surface: str) -> None:
    text = f"{UNICODE}the code {SECRET} and then a long tail of words after it to stream through the window"
    agent = create_agent(TokenModel(answers=[AIMessage(text)], size=4), middleware=[RedactCodes()])
    items = collect(agent, surface)
    assert SECRET not in repr(items)
    assert streamed_text(surface, items) == text.replace(SECRET, "[CODE]")
    if surface.endswith("v3"):
        deltas = [e for e in items if e.get("method") == "messages" and isinstance(e["params"]["data"][0], dict)
                  and e["params"]["data"][0].get("event") == "content-block-delta"
                  and e["params"]["data"][0]["delta"].get("text")]
        assert len(deltas) > 5  # released as it came, not in one piece at the end
