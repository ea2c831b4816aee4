"""PromptCachingMiddleware: cache breakpoints in the providers' own shapes, and the prefix-stability watch."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from middleware_kit import before_model, create_agent, dynamic_prompt, wrap_model_call
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.prompt_caching import (
    AnthropicPromptCachingMiddleware,
    PromptCachingMiddleware,
    cache_style,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add

EPHEMERAL = {"type": "ephemeral"}


class ChatAnthropic(ScriptedChatModel):
    """Recognised by class name, like langchain_anthropic.ChatAnthropic (which is never imported)."""


class ChatBedrock(ScriptedChatModel):
    model_id: str = "anthropic.claude-3-5-sonnet-20240620-v1:0"


class ChatBedrockConverse(ScriptedChatModel):
    model_id: str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


class ChatOpenAI(ScriptedChatModel):
    model_name: str = "gpt-5"


def test_cache_style_by_class_name_and_model_id() -> None:
    assert cache_style(ChatAnthropic()) == "cache_control"
    assert cache_style(ChatBedrock()) == "cache_control"
    assert cache_style(ChatBedrock(model_id="meta.llama3-70b")) is None
    assert cache_style(ChatBedrockConverse()) == "cache_point"
    assert cache_style(ChatOpenAI()) is None
    assert cache_style(ChatAnthropic().bind_tools([add])) == "cache_control"


def test_breakpoints_on_system_prompt_and_newest_message(run: Runner) -> None:
    model = ChatAnthropic(responses=[AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    agent = create_agent(model, [add], system_prompt="Long static prompt.", middleware=[PromptCachingMiddleware()])
    result = run(agent, {"messages": [HumanMessage("1+2?")]})
    first, second = model.calls
    assert first.messages[0].content == [{"type": "text", "text": "Long static prompt.", "cache_control": EPHEMERAL}]
    assert first.messages[1].content == [{"type": "text", "text": "1+2?", "cache_control": EPHEMERAL}]
    assert second.messages[1].content == "1+2?"  # the breakpoint moved on ...
    assert isinstance(second.messages[-1], ToolMessage)
    assert second.messages[-1].content == [{"type": "text", "text": "3", "cache_control": EPHEMERAL}]  # ... to here
    assert result["messages"][0].content == "1+2?"  # state is never touched
    assert "prompt_cache_fingerprint" not in result


def test_ttl_min_messages_and_list_content(run: Runner) -> None:
    model = ChatAnthropic(responses=["a", "b"])
    mw = PromptCachingMiddleware(ttl="1h", min_messages_to_cache=3)
    agent = create_agent(model, middleware=[mw], system_prompt="sys")
    run(agent, {"messages": [HumanMessage("short")]})
    assert model.calls[0].messages[1].content == "short"  # 2 messages < 3: no breakpoints
    run(agent, {"messages": [HumanMessage("one"), AIMessage("two"),
                             HumanMessage([{"type": "text", "text": "x"}, {"type": "image", "url": "u"}])]})
    assert model.calls[1].messages[-1].content[-1] == {"type": "image", "url": "u",
                                                        "cache_control": {"type": "ephemeral", "ttl": "1h"}}


def test_bedrock_converse_gets_cache_points(run: Runner) -> None:
    model = ChatBedrockConverse(responses=["ok"])
    run(create_agent(model, system_prompt="sys", middleware=[PromptCachingMiddleware()]),
        {"messages": [HumanMessage("hi")]})
    system, human = model.calls[0].messages
    assert system.content == [{"type": "text", "text": "sys"}, {"cachePoint": {"type": "default"}}]
    assert human.content == [{"type": "text", "text": "hi"}, {"cachePoint": {"type": "default"}}]


def test_other_models_are_left_untouched(run: Runner) -> None:
    model = ChatOpenAI(responses=["ok"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(create_agent(model, system_prompt="sys", middleware=[PromptCachingMiddleware()]),
            {"messages": [HumanMessage("hi")]})
    assert [m.content for m in model.calls[0].messages] == ["sys", "hi"]


def test_unsupported_model_behaviors(run: Runner) -> None:
    with pytest.warns(UserWarning, match="not ChatOpenAI"):
        run(create_agent(ChatOpenAI(responses=["ok"]), middleware=[AnthropicPromptCachingMiddleware()]),
            {"messages": [HumanMessage("hi")]})
    strict = AnthropicPromptCachingMiddleware(unsupported_model_behavior="raise")
    with pytest.raises(MiddlewareConfigError) as caught:
        run(create_agent(ChatOpenAI(responses=["ok"]), middleware=[strict]), {"messages": [HumanMessage("hi")]})
    assert isinstance(caught.value, ValueError) and caught.value.hook == "unsupported_model_behavior"


def _events(agent: Any, text: str, config: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in agent.stream({"messages": [HumanMessage(text)]}, config, stream_mode="custom")
            if e.get("event") == "prompt_cache_prefix_changed"]


def test_a_stable_prefix_emits_nothing_across_turns_and_tool_loops() -> None:
    model = ChatAnthropic(responses=[AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"], cycle=True)
    agent = create_agent(model, [add], system_prompt="static", middleware=[PromptCachingMiddleware()],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert _events(agent, "first", config) == []
    assert _events(agent, "second", config) == []
    assert len(model.calls) == 4


def test_a_changing_system_prompt_is_reported() -> None:
    counter = iter(range(100))

    @dynamic_prompt
    def stamped(request: Any) -> str:
        return f"You are helpful. Request #{next(counter)}"

    agent = create_agent(ChatAnthropic(responses=["ok"], cycle=True), middleware=[stamped, PromptCachingMiddleware()],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert _events(agent, "one", config) == []
    [event] = _events(agent, "two", config)
    assert (event["component"], event["message_index"], event["middleware"]) == (
        "system_prompt", None, "PromptCachingMiddleware")
    assert "Keep per-call text out of the system prompt" in event["detail"]


def test_a_request_rewrite_is_told_from_a_history_rewrite() -> None:
    @wrap_model_call
    def tag_first(request: Any, handler: Any) -> Any:  # rewrites message 0 for this call only, differently each turn
        first = request.messages[0]
        turn = len(request.messages)
        return handler(request.override(messages=[first.model_copy(update={"content": f"[{turn}] {first.content}"}),
                                                   *request.messages[1:]]))

    agent = create_agent(ChatAnthropic(responses=["ok"], cycle=True), middleware=[tag_first, PromptCachingMiddleware()],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert _events(agent, "one", config) == []
    [event] = _events(agent, "two", config)
    assert (event["component"], event["message_index"], event["changed_in"]) == ("messages", 0, "request")

    @before_model
    def compact(state: Any, runtime: Any) -> dict[str, Any] | None:  # rewrites history, like a summarizer
        messages = state["messages"]
        if len(messages) < 3:
            return None
        return {"messages": [RemoveMessage(id=messages[0].id), RemoveMessage(id=messages[1].id)]}

    agent = create_agent(ChatAnthropic(responses=["ok"], cycle=True), middleware=[compact, PromptCachingMiddleware()],
                         checkpointer=InMemorySaver())
    assert _events(agent, "one", config) == []
    [event] = _events(agent, "two", config)
    assert (event["component"], event["message_index"], event["changed_in"]) == ("messages", 0, "state")


def test_threads_do_not_share_fingerprints(run: Runner) -> None:
    agent = create_agent(ChatAnthropic(responses=["ok"], cycle=True), middleware=[PromptCachingMiddleware()],
                         checkpointer=InMemorySaver())
    assert _events(agent, "alpha", {"configurable": {"thread_id": "a"}}) == []
    assert _events(agent, "beta", {"configurable": {"thread_id": "b"}}) == []


def test_hook_is_the_same_under_invoke_and_ainvoke(run: Runner) -> None:
    model = ChatAnthropic(responses=["ok"])
    run(create_agent(model, middleware=[PromptCachingMiddleware()], system_prompt=SystemMessage("s")),
        {"messages": [HumanMessage("hi")]})
    assert model.calls[0].messages[1].content == [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]


def test_frozen_configuration(run: Runner) -> None:
    mw = PromptCachingMiddleware()
    changed = mw.replace(ttl="1h")
    model = ChatAnthropic(responses=["ok"])
    agent = create_agent(model, middleware=[changed])
    with pytest.raises(FrozenMiddlewareError):  # read-only once an agent adopts it
        changed.ttl = "5m"
    run(agent, {"messages": [HumanMessage("hi")]})
    assert model.calls[0].messages[0].content[0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert mw.ttl == "5m" and AnthropicPromptCachingMiddleware().unsupported_model_behavior == "warn"
    mw.ttl = "1h"  # before adoption, as in LangChain
    assert mw.ttl == "1h"


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"type": "persistent"}, "type"),
        ({"ttl": "10m"}, "ttl"),
        ({"min_messages_to_cache": -1}, "min_messages_to_cache"),
        ({"unsupported_model_behavior": "explode"}, "unsupported_model_behavior"),
    ],
)
def test_constructor_errors_name_class_and_parameter(kwargs: dict[str, Any], param: str) -> None:
    for cls in (PromptCachingMiddleware, AnthropicPromptCachingMiddleware):
        with pytest.raises(MiddlewareConfigError) as caught:
            cls(**kwargs)
        assert (caught.value.middleware, caught.value.hook) == (cls.__name__, param)
        assert str(caught.value).startswith(f"{cls.__name__}:")


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_the_reported_index_is_the_first_changed_message(data: st.DataObject) -> None:
    size = data.draw(st.integers(1, 6), label="history size")
    changed = data.draw(st.one_of(st.none(), st.integers(0, size - 1)), label="changed index")
    history = [HumanMessage(f"m{i}", id=f"id{i}") if i % 2 == 0 else AIMessage(f"a{i}", id=f"id{i}")
               for i in range(size)]
    agent = create_agent(ChatAnthropic(responses=["ok"], cycle=True), middleware=[PromptCachingMiddleware()],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert list(agent.stream({"messages": history}, config, stream_mode="custom")) == []
    update = [HumanMessage("next")]
    if changed is not None:  # add_messages replaces a message with the same id, in place
        update.insert(0, history[changed].model_copy(update={"content": "edited"}))
    events = list(agent.stream({"messages": update}, config, stream_mode="custom"))
    if changed is None:
        assert events == []
    else:
        assert [(e["component"], e["message_index"], e["changed_in"]) for e in events] == [
            ("messages", changed, "state")
        ]


def test_blocks_that_reject_cache_control_are_skipped(run: Runner) -> None:
    model = ChatAnthropic(responses=["ok"])
    last = AIMessage([
        {"type": "text", "text": "Let me compute."},
        {"type": "server_tool_use", "id": "s1", "name": "code_execution", "input": {"code": "1+1"}},
        {"type": "code_execution_tool_result", "tool_use_id": "s1", "content": {"stdout": "2"}},
    ])
    empty = HumanMessage([{"type": "text", "text": ""}])
    run(create_agent(model, middleware=[PromptCachingMiddleware()]),
        {"messages": [HumanMessage("compute"), last, empty]})
    sent = model.calls[0].messages
    assert sent[-1].content == [{"type": "text", "text": ""}]  # empty text: not markable, left alone
    assert sent[1].content[0]["cache_control"] == EPHEMERAL  # the breakpoint moved to the text block before them
    assert all("cache_control" not in block for block in sent[1].content[1:])


def test_a_fallback_to_another_provider_never_receives_markers(run: Runner) -> None:
    from middleware_kit.middlewares.fallback import ModelFallbackMiddleware

    primary = ChatAnthropic(responses=[RuntimeError("overloaded")])
    backup = ChatOpenAI(responses=["from the backup"])
    agent = create_agent(primary, system_prompt="sys",
                         middleware=[ModelFallbackMiddleware(backup), PromptCachingMiddleware()])
    result = run(agent, {"messages": [HumanMessage("hi")]})
    assert result["messages"][-1].content == "from the backup"
    assert primary.calls[0].messages[1].content[0]["cache_control"] == EPHEMERAL
    assert [m.content for m in backup.calls[0].messages] == ["sys", "hi"]


def test_concurrent_threads_keep_their_own_fingerprint() -> None:
    from concurrent.futures import ThreadPoolExecutor

    agent = create_agent(ChatAnthropic(responses=["ok"], cycle=True), system_prompt="static",
                         middleware=[PromptCachingMiddleware()], checkpointer=InMemorySaver())

    def conversation(i: int) -> list[Any]:
        config = {"configurable": {"thread_id": f"t{i}"}}
        chunks: list[Any] = []
        for turn in range(3):
            chunks += agent.stream({"messages": [HumanMessage(f"thread {i} turn {turn}")]}, config,
                                   stream_mode="custom")
        return chunks

    with ThreadPoolExecutor(6) as pool:
        everything = [chunk for chunks in pool.map(conversation, range(6)) for chunk in chunks]
    assert everything == []  # no thread saw another thread's prefix
