"""Bundled middlewares whose job depends on what real provider clients do, over the wire to the provider double.

Every assertion is on what the provider received (the recorded request) or on what the user got back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.tools import tool
from pydantic import BaseModel

import middleware_kit.flow
from middleware_kit import create_agent
from middleware_kit.middlewares.budget import BudgetLimit, BudgetMiddleware, ModelPrice
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.model_refusal import ModelRefusalMiddleware
from middleware_kit.middlewares.pii import PIIMiddleware
from middleware_kit.middlewares.prompt_caching import AnthropicPromptCachingMiddleware
from middleware_kit.middlewares.provider_tool_search import ProviderToolSearchMiddleware
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.middlewares.summarization import SummarizationMiddleware
from middleware_kit.models import resolve_model
from middleware_kit.structured_output import ToolStrategy
from tests.providers.conftest import anthropic_model, openai_model
from tests.providers.double import ProviderDouble, Reply, ToolCallReply
from tests.providers.test_clients import SESSION_LOOP, run

MODES = ["invoke", "ainvoke"]

ASK = {"messages": [HumanMessage("hi")]}


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def query_crm(customer: str) -> str:
    """Look a customer up in the CRM."""
    return f"{customer}: gold"


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """What retries waited, under invoke (``flow.sleep``) and ainvoke (``flow.asleep``)."""
    waits: list[float] = []

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(middleware_kit.flow, "sleep", waits.append)
    monkeypatch.setattr(middleware_kit.flow, "asleep", asleep)
    return waits


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
async def test_retry_honours_retry_after_from_openai(provider: ProviderDouble, slept: list[float], mode: str) -> None:
    provider.script(Reply(status=429, headers={"retry-after": "3"}), Reply(text="ok"))
    agent = create_agent(openai_model(provider), middleware=[ModelRetryMiddleware(max_retries=2, jitter=False)])
    assert (await run(agent, mode, ASK))["messages"][-1].content == "ok"
    assert len(provider.requests) == 2
    assert slept == [3.0]  # the provider's Retry-After, not the 1 s backoff


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
async def test_retry_retries_anthropic_overloaded_529(provider: ProviderDouble, slept: list[float], mode: str) -> None:
    provider.script(Reply(status=529, error_type="overloaded_error"), Reply(text="ok"))
    agent = create_agent(anthropic_model(provider), middleware=[ModelRetryMiddleware(max_retries=2, jitter=False)])
    assert (await run(agent, mode, ASK))["messages"][-1].content == "ok"
    assert len(provider.requests) == 2 and len(slept) == 1


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
async def test_retry_does_not_retry_a_bad_request(provider: ProviderDouble, slept: list[float], mode: str) -> None:
    import openai

    provider.script(Reply(status=400, error_type="invalid_request_error"), Reply(text="never"))
    agent = create_agent(openai_model(provider), middleware=[ModelRetryMiddleware(max_retries=3, jitter=False)])
    with pytest.raises(openai.BadRequestError):
        await run(agent, mode, ASK)
    assert len(provider.requests) == 1 and slept == []


def _has_cache_control(value: Any) -> bool:
    return "cache_control" in json.dumps(value)


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
async def test_anthropic_prompt_caching_marks_at_most_four_breakpoints(provider: ProviderDouble, mode: str) -> None:
    provider.script(Reply(text="ok"))
    history = [HumanMessage(f"turn {i}") for i in range(6)]
    agent = create_agent(anthropic_model(provider), [get_weather], system_prompt="Be brief. " * 50,
                         middleware=[AnthropicPromptCachingMiddleware()])
    await run(agent, mode, {"messages": history})
    (body,) = provider.bodies("/v1/messages")
    marks = json.dumps(body).count('"cache_control"')
    assert 1 <= marks <= 4
    assert all(m.get("type") == "ephemeral" for m in _find(body, "cache_control"))


def _find(value: Any, key: str) -> list[Any]:
    found: list[Any] = []
    if isinstance(value, dict):
        for k, v in value.items():
            found += [v] if k == key else _find(v, key)
    elif isinstance(value, list):
        for item in value:
            found += _find(item, key)
    return found


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
async def test_fallback_from_anthropic_to_openai_sends_openai_no_cache_markers(
    provider: ProviderDouble, mode: str
) -> None:
    provider.script(Reply(status=500, error_type="api_error"), Reply(text="from openai"))
    agent = create_agent(
        anthropic_model(provider), system_prompt="Be brief. " * 50,
        middleware=[ModelFallbackMiddleware(openai_model(provider)),
                    AnthropicPromptCachingMiddleware(unsupported_model_behavior="ignore")],
    )
    assert (await run(agent, mode, ASK))["messages"][-1].content == "from openai"
    first, second = provider.requests
    assert first.path == "/v1/messages" and _has_cache_control(first.body)
    assert second.path == "/v1/chat/completions" and not _has_cache_control(second.body)


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("client", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_budget_charges_what_the_provider_reported(
    provider: ProviderDouble, client: str, stream: bool, mode: str
) -> None:
    provider.script(Reply(text="ok", input_tokens=1000, output_tokens=50, cached_tokens=600))
    model = openai_model(provider, streaming=stream) if client == "openai" else anthropic_model(provider,
                                                                                               streaming=stream)
    name = "gpt-4.1-mini" if client == "openai" else "claude-sonnet-4-6"
    price = ModelPrice(input=1.0, output=2.0, cached_input=0.1)
    budget = BudgetMiddleware(run=BudgetLimit(tokens=100_000), prices={name: price})
    result = await run(create_agent(model, middleware=[budget]), mode, ASK)
    used = result["budget"]["run"]
    reported = result["messages"][-1].usage_metadata
    assert used["input_tokens"] == reported["input_tokens"] and used["output_tokens"] == 50
    assert used["calls"] == 1
    cached = reported["input_token_details"]["cache_read"]
    assert cached == 600
    assert used["cost"] == pytest.approx(price.cost(reported["input_tokens"], 50, cached_input_tokens=cached))


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("client", ["openai", "openai-responses", "anthropic"])
async def test_a_refusal_is_read_from_each_provider(provider: ProviderDouble, client: str, mode: str) -> None:
    from langchain_core.exceptions import ModelRefusalError

    provider.script(Reply(refusal="I can't help with that."))
    model = {"openai": lambda: openai_model(provider),
             "openai-responses": lambda: openai_model(provider, use_responses_api=True),
             "anthropic": lambda: anthropic_model(provider)}[client]()
    agent = create_agent(model, middleware=[ModelRefusalMiddleware()])
    with pytest.raises(ModelRefusalError):
        await run(agent, mode, ASK)


class Weather(BaseModel):
    city: str
    sunny: bool


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("client", ["openai", "anthropic"])
async def test_structured_output_with_the_tool_strategy(provider: ProviderDouble, client: str, mode: str) -> None:
    provider.script(Reply(tool_calls=[ToolCallReply("Weather", {"city": "Paris", "sunny": True})]))
    model = openai_model(provider) if client == "openai" else anthropic_model(provider)
    result = await run(create_agent(model, response_format=ToolStrategy(Weather)), mode, ASK)
    assert result["structured_response"] == Weather(city="Paris", sunny=True)
    (body,) = provider.bodies()
    assert "Weather" in json.dumps(body.get("tools"))


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_pii_holds_back_an_address_split_across_streamed_tokens(provider: ProviderDouble, client: str) -> None:
    provider.script(Reply(text="Write to jane.doe@example.com today.", chunk_size=3))
    model = openai_model(provider) if client == "openai" else anthropic_model(provider)
    agent = create_agent(model, middleware=[PIIMiddleware("email", strategy="redact", apply_to_output=True)])
    streamed = "".join(c.text for c, _ in agent.stream(ASK, stream_mode="messages") if isinstance(c, AIMessageChunk))
    assert "jane.doe" not in streamed and "example.com" not in streamed


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
async def test_summarization_through_a_real_client(provider: ProviderDouble, mode: str) -> None:
    provider.script(Reply(text="They talked about the weather."), Reply(text="final"))
    model = openai_model(provider)
    history = [HumanMessage(f"message {i} " + "words " * 30) for i in range(12)]
    mw = SummarizationMiddleware(model, trigger=("messages", 10), keep=("messages", 2))
    result = await run(create_agent(model, middleware=[mw]), mode, {"messages": history})
    assert result["messages"][-1].content == "final"
    summarize, answer = provider.bodies()
    assert "message 0" in json.dumps(summarize)
    sent = json.dumps(answer["messages"])
    assert "They talked about the weather." in sent and "message 0 " not in sent


def test_a_model_string_resolves_to_the_real_client(provider: ProviderDouble) -> None:
    provider.script(Reply(text="resolved"))
    model = resolve_model("openai:gpt-4.1-mini", api_key="sk-test", base_url=provider.url + "/v1", max_retries=0)
    assert type(model).__name__ == "ChatOpenAI"
    assert create_agent(model).invoke(ASK)["messages"][-1].content == "resolved"
    assert provider.bodies()[0]["model"] == "gpt-4.1-mini"


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
async def test_provider_tool_search_defers_tools_on_anthropic(provider: ProviderDouble, mode: str) -> None:
    provider.script(Reply(text="ok"))
    agent = create_agent(anthropic_model(provider), [get_weather, query_crm],
                         middleware=[ProviderToolSearchMiddleware(searchable_tools=[query_crm])])
    await run(agent, mode, ASK)
    (body,) = provider.bodies()
    tools = {t.get("name"): t for t in body["tools"]}
    assert tools["query_crm"].get("defer_loading") is True
    assert not tools["get_weather"].get("defer_loading")
    assert any("tool_search" in str(t.get("type", "")) or "tool_search" in str(t.get("name", ""))
               for t in body["tools"])


def test_a_system_prompt_reaches_anthropic_as_its_system_field(provider: ProviderDouble) -> None:
    provider.script(Reply(text="ok"))
    create_agent(anthropic_model(provider), system_prompt=SystemMessage("Be brief.")).invoke(ASK)
    (body,) = provider.bodies()
    assert "Be brief." in json.dumps(body["system"])
    assert all(m["role"] != "system" for m in body["messages"])


def test_the_router_sends_each_request_to_the_provider_its_model_string_names(
    provider: ProviderDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    from middleware_kit.middlewares.model_router import ModelChoice, ModelRouterMiddleware

    # Model strings resolve to the real clients, configured the way users configure them: by environment.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", provider.url + "/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", provider.url)
    router = ModelRouterMiddleware(
        choices={
            "fast": ModelChoice("openai:gpt-4.1-mini", "Small talk."),
            "strong": ModelChoice("anthropic:claude-sonnet-4-6", "Proofs."),
        },
        instructions="Which model?",
        classifier=lambda message: "strong" if "prove" in message.text else "fast",
    )
    agent = create_agent(openai_model(provider), middleware=[router])
    provider.script(Reply(text="hello!"), Reply(text="QED"))
    assert agent.invoke({"messages": [HumanMessage("hi there")]})["messages"][-1].content == "hello!"
    assert agent.invoke({"messages": [HumanMessage("prove it")]})["messages"][-1].content == "QED"
    assert [(r.path, r.body["model"]) for r in provider.requests] == [
        ("/v1/chat/completions", "gpt-4.1-mini"), ("/v1/messages", "claude-sonnet-4-6")]


@SESSION_LOOP
@pytest.mark.parametrize("client", ["openai", "openai-responses", "anthropic"])
async def test_pii_holds_back_an_address_in_astream_messages(provider: ProviderDouble, client: str) -> None:
    provider.script(Reply(text="Mail jane.doe@example.com or call.", chunk_size=2))
    model = {"openai": lambda: openai_model(provider),
             "openai-responses": lambda: openai_model(provider, use_responses_api=True),
             "anthropic": lambda: anthropic_model(provider)}[client]()
    agent = create_agent(model, middleware=[PIIMiddleware("email", strategy="redact", apply_to_output=True)])
    streamed, final = "", None
    async for mode, part in agent.astream(ASK, stream_mode=["messages", "values"]):
        if mode == "messages" and isinstance(part[0], AIMessageChunk):
            streamed += part[0].text
        if mode == "values":
            final = part
    assert "jane.doe" not in streamed and "example.com" not in streamed
    assert final is not None and final["messages"][-1].text == "Mail [REDACTED_EMAIL] or call."


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("responses_api", [False, True])
async def test_structured_output_with_openais_native_json_mode(
    provider: ProviderDouble, responses_api: bool, mode: str
) -> None:
    from middleware_kit.structured_output import ProviderStrategy

    provider.script(Reply(text='{"city": "Paris", "sunny": true}'))
    model = openai_model(provider, use_responses_api=responses_api)
    result = await run(create_agent(model, response_format=ProviderStrategy(Weather)), mode, ASK)
    assert result["structured_response"] == Weather(city="Paris", sunny=True)
    (body,) = provider.bodies()
    # The provider was asked for its JSON mode with the schema, and offered no structured-output tool.
    wire = body.get("response_format") or body.get("text", {}).get("format")
    assert wire is not None and "json_schema" in json.dumps(wire) and "sunny" in json.dumps(wire)
    assert "Weather" not in json.dumps(body.get("tools") or [])


@SESSION_LOOP
@pytest.mark.parametrize("mode", MODES)
async def test_a_bare_schema_picks_the_native_mode_for_a_model_that_has_it(provider: ProviderDouble, mode: str) -> None:
    # LangChain 1.5's AutoStrategy: gpt-4.1 has native structured output, so the schema goes as response_format.
    provider.script(Reply(text='{"city": "Rome", "sunny": false}'))
    result = await run(create_agent(openai_model(provider, model="gpt-4.1"), response_format=Weather), mode, ASK)
    assert result["structured_response"] == Weather(city="Rome", sunny=False)
    (body,) = provider.bodies()
    assert "json_schema" in json.dumps(body.get("response_format"))
