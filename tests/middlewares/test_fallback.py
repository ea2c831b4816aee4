"""ModelFallbackMiddleware: fallbacks in order, each derived from the original request; interrupts pass at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from middleware_kit import MiddlewareConfigError, MiddlewareError, create_agent, wrap_model_call
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware, is_anthropic_compatible
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel, make_request, run_model_chain, tool_call
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


class ChatAnthropic(ScriptedChatModel):
    """Named like langchain-anthropic's class: recognised by name, no provider package imported."""


class ChatAnthropicVertex(ScriptedChatModel):
    """Anthropic on Vertex."""


class ChatBedrockConverse(ScriptedChatModel):
    """Bedrock: Anthropic-compatible only for a Claude model id."""


class ChatOpenAI(ScriptedChatModel):
    """Named like langchain-openai's class."""


class ChatFireworks(ScriptedChatModel):
    """Named like langchain-fireworks's class."""


MARK = {"type": "ephemeral"}
CACHE_SETTINGS = {"cache_control": MARK, "prompt_cache_key": "k", "prompt_cache_max_len": 100, "temperature": 0}


def cached_agent(fallback: ScriptedChatModel, seen: list[Any]) -> Any:
    """A failing primary, a cache-marking layer outside the fallback (like a prompt-caching middleware), and a
    recorder inside it that keeps each request the fallback sends."""

    @wrap_model_call
    def cache(request: Any, handler: Any) -> Any:
        marked = add.model_copy(update={"extras": {"cache_control": MARK, "other": 1}})
        system = SystemMessage([{"type": "text", "text": "Be brief.", "cache_control": MARK}])
        last = HumanMessage([{"type": "text", "text": "q", "cache_control": MARK}, {"cachePoint": {"type": "default"}}])
        return handler(request.override(model_settings=CACHE_SETTINGS, system_message=system,
                                        messages=[*request.messages[:-1], last], tools=[marked]))

    @wrap_model_call
    def record(request: Any, handler: Any) -> Any:
        seen.append(request)
        return handler(request)

    primary = ChatAnthropic([ConnectionError()])
    return create_agent(primary, [add], middleware=[cache, ModelFallbackMiddleware(fallback), record])


@pytest.mark.parametrize(
    "make",
    [
        lambda: ChatAnthropic(["ok"]),
        lambda: ChatAnthropicVertex(["ok"]),
        lambda: ChatBedrockConverse(["ok"], model_name="anthropic.claude-sonnet-4-5"),
    ],
    ids=["anthropic", "anthropic-vertex", "claude-on-bedrock"],
)
def test_cache_markers_are_kept_for_an_anthropic_compatible_fallback(run: Runner, make: Any) -> None:
    seen: list[Any] = []
    fallback = make()
    assert run(cached_agent(fallback, seen), Q)["messages"][-1].content == "ok"
    sent = seen[-1]
    assert sent.model is fallback
    assert dict(sent.model_settings) == {"cache_control": MARK, "temperature": 0}  # OpenAI/Fireworks keys removed
    assert sent.system_message.content[0]["cache_control"] == MARK
    assert sent.messages[-1].content[0]["cache_control"] == MARK
    assert sent.tools[0].extras == {"cache_control": MARK, "other": 1}


@pytest.mark.parametrize(
    ("make", "settings"),
    [
        (lambda: ScriptedChatModel(["ok"]), {"temperature": 0}),
        (lambda: ChatOpenAI(["ok"]), {"prompt_cache_key": "k", "temperature": 0}),
        (lambda: ChatFireworks(["ok"]), {"prompt_cache_key": "k", "prompt_cache_max_len": 100, "temperature": 0}),
        (lambda: ChatBedrockConverse(["ok"], model_name="amazon.titan-text"), {"temperature": 0}),
    ],
    ids=["other", "openai", "fireworks", "titan-on-bedrock"],
)
def test_cache_markers_are_cleaned_everywhere_for_another_provider(
    run: Runner, make: Any, settings: dict[str, Any]
) -> None:
    seen: list[Any] = []
    fallback = make()
    assert run(cached_agent(fallback, seen), Q)["messages"][-1].content == "ok"
    first, sent = seen[0], seen[-1]
    assert dict(sent.model_settings) == settings
    assert sent.system_message.content == [{"type": "text", "text": "Be brief."}]
    assert sent.messages[-1].content == [{"type": "text", "text": "q"}]  # marker and cachePoint block removed
    assert sent.tools[0].extras == {"other": 1}
    assert fallback.calls[0].kwargs == settings
    # The primary's request is untouched (the fallback request is a cleaned copy).
    assert first.messages[-1].content[0]["cache_control"] == MARK and "cache_control" in first.tools[0].extras


def test_anthropic_compatibility_is_read_from_class_and_model_id() -> None:
    assert is_anthropic_compatible(ChatAnthropic([]))
    assert is_anthropic_compatible(ChatAnthropic([]).bind(temperature=0))  # a bound model
    assert is_anthropic_compatible(ChatBedrockConverse([], model_name="us.anthropic.claude-3-haiku"))
    assert not is_anthropic_compatible(ChatBedrockConverse([], model_name="meta.llama3"))
    assert not is_anthropic_compatible(ChatOpenAI([], model_name="claude-lookalike"))
    assert not is_anthropic_compatible(ScriptedChatModel([]))


class _ReportsLlmType(ScriptedChatModel):
    """A model known only by its ``_llm_type`` (as LangChain 1.5 identifies providers)."""

    llm_type: str = "scripted"

    @property
    def _llm_type(self) -> str:
        return self.llm_type


@pytest.mark.parametrize("llm_type", ["anthropic-chat", "anthropic-bedrock-chat", "anthropic-chat-vertexai"])
def test_anthropic_compatibility_is_read_from_llm_type(llm_type: str) -> None:
    assert is_anthropic_compatible(_ReportsLlmType([], llm_type=llm_type))
    assert not is_anthropic_compatible(_ReportsLlmType([], llm_type="openai-chat"))


def _fail_primary(seen: list[Any]) -> Any:
    def handler(request: Any) -> AIMessage:
        seen.append(request)
        if len(seen) == 1:
            raise ConnectionError("primary down")
        return AIMessage("ok")

    return handler


@pytest.mark.parametrize(
    ("llm_type", "expected"),
    [
        ("generic", {"temperature": 0, "extra_headers": {"X-Request-ID": "r"}}),
        ("openai-chat", {"temperature": 0, "prompt_cache_key": "k", "extra_headers": {"X-Request-ID": "r"}}),
        ("azure-openai-chat", {"temperature": 0, "prompt_cache_key": "k", "extra_headers": {"X-Request-ID": "r"}}),
        ("fireworks-chat", None),  # Fireworks keeps its affinity header and the cache key
    ],
)
def test_fireworks_affinity_and_cache_key_reach_only_the_providers_that_take_them(
    llm_type: str, expected: dict[str, Any] | None
) -> None:
    settings_in = {"temperature": 0, "prompt_cache_key": "k",
                   "extra_headers": {"X-Request-ID": "r", "x-session-affinity": "thread-1"}}
    fallback = _ReportsLlmType([], llm_type=llm_type)
    seen: list[Any] = []
    request = make_request(["q"], model=ScriptedChatModel([]), model_settings=settings_in)
    run_model_chain(ModelFallbackMiddleware(fallback), request, handler=_fail_primary(seen))
    assert dict(seen[-1].model_settings) == (expected or settings_in)
    assert dict(request.model_settings) == settings_in  # the original request is untouched


def test_only_the_affinity_header_empties_extra_headers_away() -> None:
    seen: list[Any] = []
    request = make_request(["q"], model=ScriptedChatModel([]),
                           model_settings={"extra_headers": {"X-Session-Affinity": "t"}, "temperature": 1})
    run_model_chain(ModelFallbackMiddleware(ScriptedChatModel([])), request, handler=_fail_primary(seen))
    assert dict(seen[-1].model_settings) == {"temperature": 1}


def test_markers_nested_in_extras_and_metadata_are_removed_and_empty_extras_become_none() -> None:
    marked_tool = add.model_copy(update={"extras": {"cache_control": MARK}})
    dict_tool = {"name": "d", "cache_control": MARK, "extras": {"cache_control": MARK, "defer_loading": True}}
    block = {"type": "text", "text": "q", "extras": {"turn": 1, "cache_control": MARK},
             "metadata": {"source": "user", "cache_control": MARK}}
    request = make_request([HumanMessage([block])], model=ChatAnthropic([]), tools=[marked_tool, dict_tool])
    seen: list[Any] = []
    run_model_chain(ModelFallbackMiddleware(ScriptedChatModel([])), request, handler=_fail_primary(seen))
    sent = seen[-1]
    assert sent.messages[0].content == [{"type": "text", "text": "q", "extras": {"turn": 1},
                                         "metadata": {"source": "user"}}]
    assert sent.tools[0].extras is None
    assert sent.tools[1] == {"name": "d", "extras": {"defer_loading": True}}
    assert seen[0].messages[0].content == [block] and marked_tool.extras == {"cache_control": MARK}


def test_a_request_with_nothing_to_clean_keeps_its_fields() -> None:
    seen: list[Any] = []
    request = make_request(["q"], model=ScriptedChatModel([]), model_settings={"temperature": 0})
    run_model_chain(ModelFallbackMiddleware(ScriptedChatModel([])), request, handler=_fail_primary(seen))
    sent = seen[-1]
    assert sent.messages is request.messages and sent.tools is request.tools
    assert sent.model_settings is request.model_settings


def test_an_error_preparing_a_fallback_request_is_never_masked() -> None:
    class Strict(ModelFallbackMiddleware):
        def fallback_request(self, request: Any, model: Any) -> Any:
            if model is first:
                raise RuntimeError("cannot adapt the request")
            return super().fallback_request(request, model)

    first, second = ScriptedChatModel([]), ScriptedChatModel([])
    seen: list[Any] = []
    request = make_request(["q"], model=ScriptedChatModel([]))
    with pytest.raises(RuntimeError, match="cannot adapt"):
        Strict(first, second).wrap_model_call(request, _fail_primary(seen))
    assert len(seen) == 1  # the second fallback, which would have succeeded, was never tried

    async def ahandler(request: Any) -> AIMessage:
        return _fail_primary(seen)(request)

    seen.clear()
    with pytest.raises(RuntimeError, match="cannot adapt"):
        asyncio.run(Strict(first, second).awrap_model_call(request, ahandler))


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


def test_fallback_models_must_be_chat_models_or_model_strings() -> None:
    with pytest.raises(MiddlewareConfigError, match=r"fallback model #2 is 42 \(int\)"):
        ModelFallbackMiddleware(ScriptedChatModel([]), 42)  # type: ignore[arg-type]
    with pytest.raises(MiddlewareConfigError, match=r"pip install -U langchain-groq") as err:
        ModelFallbackMiddleware("groq:llama-3.1-8b-instant")
    assert (err.value.middleware, err.value.hook) == ("ModelFallbackMiddleware", "models")


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    first, second = ScriptedChatModel(["first"]), ScriptedChatModel(["second"])
    mw = ModelFallbackMiddleware(first)
    create_agent(ScriptedChatModel(["hi"]), middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'models'"):
        mw.models = (second,)
    changed = mw.replace(first_model=second)
    assert mw.models == (first,) and changed.models == (second,)
    agent = create_agent(ScriptedChatModel([ConnectionError()]), middleware=[changed])
    assert run(agent, Q)["messages"][-1].content == "second"


_BLOCK = st.one_of(
    st.text(max_size=5),
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": st.text(max_size=5)},
        optional={"cache_control": st.just({"type": "ephemeral"}), "extra": st.integers()},
    ),
    st.just({"cachePoint": {"type": "default"}}),
)


@settings(max_examples=200, deadline=None)
@given(contents=st.lists(st.one_of(st.text(max_size=5), st.lists(_BLOCK, max_size=4)), min_size=1, max_size=4),
       marked_settings=st.booleans())
def test_cleaning_for_another_provider_removes_every_marker_and_never_touches_the_original(
    contents: list[Any], marked_settings: bool
) -> None:
    import copy

    messages = [HumanMessage(content=c) for c in contents]
    originals = [copy.deepcopy(m.content) for m in messages]
    settings_in = {"cache_control": {"type": "ephemeral"}, "temperature": 0} if marked_settings else {}
    seen: list[Any] = []

    def handler(request: Any) -> AIMessage:
        seen.append(request)
        if request.model is primary:
            raise ConnectionError("down")
        return AIMessage("ok")

    primary = ChatAnthropic([])
    request = make_request(messages, model=primary, model_settings=settings_in)
    run_model_chain(ModelFallbackMiddleware(ScriptedChatModel([])), request, handler=handler)
    sent = seen[-1]
    for message in sent.messages:
        if isinstance(message.content, list):
            for block in message.content:
                assert not (isinstance(block, dict) and ("cache_control" in block or "cachePoint" in block))
    assert "cache_control" not in sent.model_settings
    assert [m.content for m in messages] == originals  # the caller's messages are untouched
    assert [m.content for m in seen[0].messages] == originals  # and so is the primary's request
