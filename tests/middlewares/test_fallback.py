"""ModelFallbackMiddleware: fallbacks in order, each derived from the original request; interrupts pass at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from middleware_kit import MiddlewareConfigError, MiddlewareError, create_agent, wrap_model_call
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add

Q = {"messages": [HumanMessage("q")]}


class OtherProviderModel(ScriptedChatModel):
    """A scripted model of another class (as if from another provider)."""


def stream_custom(agent: Any, inp: Any, mode: str) -> list[Any]:
    if mode == "invoke":
        return list(agent.stream(inp, stream_mode="custom"))

    async def collect() -> list[Any]:
        return [chunk async for chunk in agent.astream(inp, stream_mode="custom")]

    return asyncio.run(collect())


def test_primary_success_never_touches_the_fallbacks(run: Runner) -> None:
    primary, backup = ScriptedChatModel(["primary"]), ScriptedChatModel(["backup"])
    result = run(create_agent(primary, middleware=[ModelFallbackMiddleware(backup)]), Q)
    assert result["messages"][-1].content == "primary"
    assert backup.call_count == 0


def test_fallbacks_are_tried_in_order_until_one_succeeds(run: Runner) -> None:
    primary = ScriptedChatModel([ConnectionError("primary down")])
    first = ScriptedChatModel([ValueError("first down")])
    second = ScriptedChatModel(["second answers"])
    third = ScriptedChatModel(["never"])
    agent = create_agent(primary, middleware=[ModelFallbackMiddleware(first, second, third)])
    assert run(agent, Q)["messages"][-1].content == "second answers"
    assert (primary.call_count, first.call_count, second.call_count, third.call_count) == (1, 1, 1, 0)


def test_all_failing_raises_the_last_error(run: Runner) -> None:
    primary = ScriptedChatModel([ConnectionError("primary")])
    backup = ScriptedChatModel([TimeoutError("backup")])
    with pytest.raises(TimeoutError, match="backup"):
        run(create_agent(primary, middleware=[ModelFallbackMiddleware(backup)]), Q)


def test_each_fallback_gets_the_original_request(run: Runner) -> None:
    @wrap_model_call
    def tag(request: Any, handler: Any) -> Any:  # inside the fallback: runs once per model tried
        return handler(request.override(messages=[*request.messages, HumanMessage("tag")]))

    primary = ScriptedChatModel([ConnectionError()])
    backup = OtherProviderModel([ConnectionError()])
    last = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    agent = create_agent(primary, [add], system_prompt="Be brief.",
                         middleware=[ModelFallbackMiddleware(backup, last), tag])
    result = run(agent, Q)
    assert result["messages"][-1].content == "3"
    sent = [[m.content for m in model.calls[0].messages] for model in (primary, backup, last)]
    assert sent == [["Be brief.", "q", "tag"]] * 3  # one "tag" each: never a previous attempt's request
    assert primary.calls[0].tools == backup.calls[0].tools == last.calls[0].tools == ("add",)


def test_provider_specific_cache_settings_are_dropped_for_another_provider(run: Runner) -> None:
    @wrap_model_call
    def cache(request: Any, handler: Any) -> Any:  # outside the fallback, like a prompt-caching middleware
        return handler(request.override(model_settings={"cache_control": {"type": "ephemeral"}, "temperature": 0}))

    same_class = ScriptedChatModel(["same"])
    agent = create_agent(ScriptedChatModel([ConnectionError()]),
                         middleware=[cache, ModelFallbackMiddleware(same_class)])
    run(agent, Q)
    assert same_class.calls[0].kwargs == {"cache_control": {"type": "ephemeral"}, "temperature": 0}

    other = OtherProviderModel(["other"])
    agent = create_agent(ScriptedChatModel([ConnectionError()]), middleware=[cache, ModelFallbackMiddleware(other)])
    assert run(agent, Q)["messages"][-1].content == "other"
    assert other.calls[0].kwargs == {"temperature": 0}


def test_interrupts_propagate_at_once(run: Runner) -> None:
    @wrap_model_call
    def approval(request: Any, handler: Any) -> Any:
        return handler(request.override(system_prompt=f"approved: {interrupt('call the model?')}"))

    primary, backup = ScriptedChatModel(["primary"]), ScriptedChatModel(["backup"])
    agent = create_agent(primary, middleware=[ModelFallbackMiddleware(backup), approval],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert run(agent, Q, config=config)["__interrupt__"][0].value == "call the model?"
    assert primary.call_count == backup.call_count == 0

    result = run(agent, Command(resume="yes"), config=config)
    assert result["messages"][-1].content == "primary"
    assert primary.calls[0].messages[0].content == "approved: yes"
    assert backup.call_count == 0


def test_middleware_errors_are_not_masked_by_a_fallback(run: Runner) -> None:
    @wrap_model_call
    def forgot(request: Any, handler: Any) -> Any:
        handler(request)

    backup = ScriptedChatModel(["backup"])
    agent = create_agent(ScriptedChatModel(["primary"]), middleware=[ModelFallbackMiddleware(backup), forgot])
    with pytest.raises(MiddlewareError, match="forgot"):
        run(agent, Q)
    assert backup.call_count == 0


def test_retry_inside_fallback_retries_each_model_first(mode: str) -> None:
    primary = ScriptedChatModel([ConnectionError("primary")], cycle=True)
    backup = ScriptedChatModel([ConnectionError("blip"), "backup answers"])
    retry = ModelRetryMiddleware(max_retries=2, on_failure="error", jitter=False, sleep=lambda s: None)
    agent = create_agent(primary, middleware=[ModelFallbackMiddleware(backup), retry])
    events = stream_custom(agent, Q, mode)
    assert (primary.call_count, backup.call_count) == (3, 2)
    assert [e["event"] for e in events] == ["retry", "retry", "retry_gave_up", "fallback", "retry"]
    assert events[3] == {"event": "fallback", "middleware": "ModelFallbackMiddleware", "fallback": 1,
                         "model": "scripted", "error": "ConnectionError"}


def test_fallback_models_must_be_chat_model_instances() -> None:
    with pytest.raises(MiddlewareConfigError, match=r"fallback model #2 is 'openai:gpt-4o'.*init_chat_model"):
        ModelFallbackMiddleware(ScriptedChatModel([]), "openai:gpt-4o")  # type: ignore[arg-type]
