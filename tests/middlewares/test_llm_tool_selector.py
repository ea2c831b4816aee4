"""LLMToolSelectorMiddleware: the selector narrows the tools, its tokens never stream, its failures never break runs."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, tool

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit._engine.internal_calls import INTERNAL_CALL_METADATA_KEY, internal_call_metadata
from middleware_kit.middlewares import llm_tool_selector
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.llm_tool_selector import (
    DEFAULT_SYSTEM_PROMPT,
    SELECT_TOOLS_NAME,
    LLMToolSelectorMiddleware,
    ToolSelectionError,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

_NAME = "LLMToolSelectorMiddleware"


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def search_web(query: str) -> str:
    """Search the web."""
    return "results"


@tool
def send_email(to: str, body: str) -> str:
    """Send an e-mail."""
    return "sent"


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return "42"


TOOLS: list[BaseTool] = [get_weather, search_web, send_email, calculator]
NAMES = [t.name for t in TOOLS]
Q = {"messages": [HumanMessage("What's the weather in Paris?")]}


def select(*names: str) -> AIMessage:
    """The selection model's answer, as a structured ``select_tools`` call."""
    return AIMessage("", tool_calls=[tool_call(SELECT_TOOLS_NAME, {"tools": list(names)})])


def stream(agent: Any, inp: Any, mode: str, stream_mode: Any) -> list[Any]:
    if mode == "invoke":
        return list(agent.stream(inp, stream_mode=stream_mode))

    async def collect() -> list[Any]:
        return [chunk async for chunk in agent.astream(inp, stream_mode=stream_mode)]

    return asyncio.run(collect())


def events(agent: Any, inp: Any, mode: str) -> list[dict[str, Any]]:
    return [e for e in stream(agent, inp, mode, "custom") if isinstance(e, dict) and "event" in e]


# -- selection ------------------------------------------------------------------------------------------------------
def test_the_main_model_sees_only_the_selected_tools_in_request_order(run: Runner) -> None:
    selector = ScriptedChatModel([select("calculator", "get_weather")])
    main = ScriptedChatModel(["It is sunny."])
    agent = create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=selector)])
    assert run(agent, Q)["messages"][-1].content == "It is sunny."
    assert main.calls[0].tools == ("get_weather", "calculator")  # the request's order, not the selector's ranking
    sent = selector.calls[0]
    assert sent.tools == (SELECT_TOOLS_NAME,) and sent.kwargs["tool_choice"] == "any"
    assert str(sent.messages[0].content).startswith(DEFAULT_SYSTEM_PROMPT)
    assert all(f"- {name}:" in sent.messages[0].content for name in NAMES)
    assert sent.messages[1].content == "What's the weather in Paris?"


def test_max_tools_keeps_the_first_selected_and_always_include_does_not_count(run: Runner) -> None:
    selector = ScriptedChatModel([select("search_web", "calculator", "get_weather")])
    main = ScriptedChatModel(["ok"])
    mw = LLMToolSelectorMiddleware(model=selector, max_tools=2, always_include=[send_email])
    run(create_agent(main, TOOLS, middleware=[mw]), Q)
    assert main.calls[0].tools == ("search_web", "send_email", "calculator")
    assert "Select at most 2 tool(s)" in selector.calls[0].messages[0].content
    assert "- send_email:" not in selector.calls[0].messages[0].content  # always included: not a candidate


def test_the_agents_model_selects_when_no_model_is_given(run: Runner) -> None:
    main = ScriptedChatModel([select("get_weather"), "sunny"])
    run(create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware()]), Q)
    assert [c.tools for c in main.calls] == [(SELECT_TOOLS_NAME,), ("get_weather",)]


def test_selection_runs_before_every_model_call_and_tools_still_execute(run: Runner) -> None:
    selector = ScriptedChatModel([select("get_weather"), select("get_weather", "send_email")])
    main = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Paris"})]), "done"])
    result = run(create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=selector)]), Q)
    assert result["messages"][2].content == "sunny in Paris"
    assert [c.tools for c in main.calls] == [("get_weather",), ("get_weather", "send_email")]
    assert selector.call_count == 2


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('["calculator", "search_web"]', ("search_web", "calculator")),
        ('{"tools": ["send_email"]}', ("send_email",)),
        ('```json\n["get_weather"]\n```', ("get_weather",)),
        ("get_weather, calculator", ("get_weather", "calculator")),
        ("- get_weather\n- search_web", ("get_weather", "search_web")),
        ("[]", ()),
    ],
)
def test_a_text_answer_is_read_too(run: Runner, answer: str, expected: tuple[str, ...]) -> None:
    main = ScriptedChatModel(["ok"])
    run(create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=ScriptedChatModel([answer]))]), Q)
    assert main.calls[0].tools == expected


def test_dict_tools_are_never_filtered(run: Runner) -> None:
    from middleware_kit import wrap_model_call

    @wrap_model_call
    def provider_tool(request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[*request.tools, {"type": "web_search"}]))

    main = ScriptedChatModel(["ok"])
    mw = LLMToolSelectorMiddleware(model=ScriptedChatModel([select("calculator")]))
    run(create_agent(main, TOOLS, middleware=[provider_tool, mw]), Q)
    assert main.calls[0].tools == ("calculator", "?")  # ScriptedChatModel names a non-function tool "?"


def test_nothing_to_select_calls_no_selector(run: Runner) -> None:
    selector = ScriptedChatModel([])
    run(create_agent(ScriptedChatModel(["a"]), [], middleware=[LLMToolSelectorMiddleware(model=selector)]), Q)
    only_always = LLMToolSelectorMiddleware(model=selector, always_include=["get_weather"])
    run(create_agent(ScriptedChatModel(["b"]), [get_weather], middleware=[only_always]), Q)
    assert selector.call_count == 0


# -- failures ----------------------------------------------------------------------------------------------------
MALFORMED: list[AIMessage | str] = [
    AIMessage("", tool_calls=[tool_call(SELECT_TOOLS_NAME, {"names": ["x"]})]),
    AIMessage("", tool_calls=[tool_call(SELECT_TOOLS_NAME, {"tools": "get_weather"})]),
    "I think you should use the weather tool.",
    '{"choice": 1}',
    "",
]


def test_a_selection_model_that_raises_falls_back_to_all_tools_with_an_event(mode: str) -> None:
    main = ScriptedChatModel(["answer"])
    selector = ScriptedChatModel([ConnectionError("selector down")])
    agent = create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=selector)])
    seen = events(agent, Q, mode)
    assert main.calls[0].tools == tuple(NAMES) and selector.call_count == 1
    assert [e["event"] for e in seen] == ["tool_selection_failed"]
    assert seen[0]["reason"] == "the selection model raised" and seen[0]["middleware"] == "LLMToolSelectorMiddleware"
    assert seen[0]["error"] == "ConnectionError: selector down"


@pytest.mark.parametrize("reply", MALFORMED)
def test_a_malformed_selection_is_retried_then_raises_by_default(run: Runner, reply: Any) -> None:
    selector = ScriptedChatModel([reply], cycle=True)
    main = ScriptedChatModel(["never"])
    agent = create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=selector)])
    with pytest.raises(ToolSelectionError, match="malformed response after 1 retries") as err:
        run(agent, Q)
    assert isinstance(err.value, ValueError) and (err.value.middleware, err.value.hook) == (_NAME, "wrap_model_call")
    assert selector.call_count == 2 and main.call_count == 0  # the first answer and one retry


def test_a_retry_that_answers_well_is_used(run: Runner) -> None:
    selector = ScriptedChatModel([MALFORMED[0], MALFORMED[2], select("calculator")])
    main = ScriptedChatModel(["ok"])
    run(create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=selector, max_retries=2)]), Q)
    assert selector.call_count == 3 and main.calls[0].tools == ("calculator",)


def test_settings_may_be_changed_before_an_agent_adopts_the_selector(run: Runner) -> None:
    """As in LangChain: ``mw.on_parsing_failure = ...`` before ``create_agent``, validated as a constructor argument."""
    mw = LLMToolSelectorMiddleware(model=ScriptedChatModel([MALFORMED[0]], cycle=True))
    mw.on_parsing_failure = ["calculator"]
    mw.max_retries = 0
    with pytest.raises(MiddlewareConfigError, match="max_retries must be >= 0"):
        mw.max_retries = -1
    main = ScriptedChatModel(["ok"])
    run(create_agent(main, TOOLS, middleware=[mw]), Q)
    assert main.calls[0].tools == ("calculator",)


@pytest.mark.parametrize("reply", MALFORMED)
def test_on_parsing_failure_all_sends_every_tool_with_an_event(mode: str, reply: Any) -> None:
    main = ScriptedChatModel(["answer"])
    mw = LLMToolSelectorMiddleware(model=ScriptedChatModel([reply]), max_retries=0, on_parsing_failure="all")
    seen = events(create_agent(main, TOOLS, middleware=[mw]), Q, mode)
    assert main.calls[0].tools == tuple(NAMES)
    assert [e["event"] for e in seen] == ["tool_selection_failed"]
    assert seen[0]["reason"].startswith("unreadable selection") and seen[0]["error"] is None


@pytest.mark.parametrize(
    ("policy", "sent"),
    [
        ("none", ("get_weather",)),
        (["calculator", "search_web"], ("get_weather", "search_web", "calculator")),  # the request's order
        (lambda answer: ["send_email"] if answer == {"names": ["x"]} else [], ("get_weather", "send_email")),
    ],
)
def test_fallback_selections_keep_always_include_and_ignore_max_tools(run: Runner, policy: Any, sent: Any) -> None:
    main = ScriptedChatModel(["ok"])
    mw = LLMToolSelectorMiddleware(
        model=ScriptedChatModel([MALFORMED[0]], cycle=True),
        max_tools=1,
        always_include=["get_weather"],
        on_parsing_failure=policy,
    )
    run(create_agent(main, TOOLS, middleware=[mw]), Q)
    assert main.calls[0].tools == sent


def test_invented_names_are_dropped_and_reported(mode: str) -> None:
    main = ScriptedChatModel(["answer"])
    mw = LLMToolSelectorMiddleware(model=ScriptedChatModel([select("get_weather", "teleport", "get_weather")]))
    seen = events(create_agent(main, TOOLS, middleware=[mw]), Q, mode)
    assert main.calls[0].tools == ("get_weather",)
    assert seen == [
        {
            "event": "tools_selected",
            "middleware": "LLMToolSelectorMiddleware",
            "selected": ["get_weather"],
            "dropped": ["search_web", "send_email", "calculator"],
            "invalid": ["teleport"],
        }
    ]


def test_no_user_message_falls_back_to_all_tools(run: Runner) -> None:
    selector = ScriptedChatModel([])
    main = ScriptedChatModel(["ok"])
    agent = create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=selector)])
    run(agent, {"messages": [AIMessage("Hello, how can I help?")]})
    assert selector.call_count == 0 and main.calls[0].tools == tuple(NAMES)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(max_size=60),
        st.lists(st.sampled_from([*NAMES, "nope", ""]), max_size=6).map(lambda names: select(*names)),
        st.dictionaries(st.sampled_from(["tools", "x"]), st.one_of(st.none(), st.integers(), st.text(max_size=5))).map(
            lambda args: AIMessage("", tool_calls=[tool_call(SELECT_TOOLS_NAME, args)])
        ),
    ),
    st.sampled_from(["invoke", "ainvoke"]),
)
def test_any_selector_answer_never_breaks_the_run(reply: Any, mode: str) -> None:
    main = ScriptedChatModel(["fine"])
    mw = LLMToolSelectorMiddleware(model=ScriptedChatModel([reply]), max_retries=0, on_parsing_failure="all")
    agent = create_agent(main, TOOLS, middleware=[mw])
    result = agent.invoke(Q) if mode == "invoke" else asyncio.run(agent.ainvoke(Q))
    assert result["messages"][-1].content == "fine"
    assert set(main.calls[0].tools) <= set(NAMES)
    if isinstance(reply, AIMessage) and isinstance(reply.tool_calls[0]["args"].get("tools"), list):
        chosen = {n for n in reply.tool_calls[0]["args"]["tools"] if n in NAMES}
        assert set(main.calls[0].tools) == chosen


def test_always_include_naming_a_missing_tool_is_an_error(run: Runner) -> None:
    mw = LLMToolSelectorMiddleware(model=ScriptedChatModel([]), always_include=["delete_everything"])
    with pytest.raises(MiddlewareConfigError, match=r"^Tools in always_include not found in request: \['delete_"):
        run(create_agent(ScriptedChatModel(["x"]), TOOLS, middleware=[mw]), Q)


# -- the selector's tokens stay out of the user's stream ----------------------------------------------------------
class _Runs(BaseCallbackHandler):
    def __init__(self) -> None:
        self.names: list[tuple[str, tuple[str, ...]]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.names.append((kwargs.get("name") or "", tuple(kwargs.get("tags") or ())))


def test_selector_tokens_never_reach_the_messages_stream(mode: str) -> None:
    secret = AIMessage("SELECTOR-SECRET", tool_calls=[tool_call(SELECT_TOOLS_NAME, {"tools": ["get_weather"]})])
    selector = ScriptedChatModel([secret], cycle=True)
    main = ScriptedChatModel(["Sunny in Paris."], cycle=True)
    agent = create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=selector)])
    runs = _Runs()
    chunks = stream(agent, Q, mode, "messages")
    texts = [chunk.text for chunk, _meta in chunks if isinstance(chunk, BaseMessage)]
    assert "".join(texts) == "Sunny in Paris."
    assert not any("SELECTOR" in t for t in texts)
    if mode == "invoke":
        agent.invoke(Q, {"callbacks": [runs]})
    else:
        asyncio.run(agent.ainvoke(Q, {"callbacks": [runs]}))
    selector_runs = [tags for name, tags in runs.names if name == "LLMToolSelectorMiddleware.select_tools"]
    assert selector_runs and "nostream" in selector_runs[0] and "middleware_kit:select_tools" in selector_runs[0]


def test_the_selection_call_carries_langchains_internal_call_metadata(mode: str) -> None:
    seen: list[Any] = []

    class Capturing(ScriptedChatModel):
        def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            seen.append(config)
            return super().invoke(input, config, **kwargs)

        async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            seen.append(config)
            return await super().ainvoke(input, config, **kwargs)

    mw = LLMToolSelectorMiddleware(model=Capturing(responses=[select("get_weather")]))
    events(create_agent(ScriptedChatModel(["ok"]), TOOLS, middleware=[mw]), Q, mode)
    [config] = seen
    assert config["metadata"]["lc_source"] == "tool_selection" and "nostream" in config["tags"]
    assert config["metadata"][INTERNAL_CALL_METADATA_KEY] == internal_call_metadata()[INTERNAL_CALL_METADATA_KEY]


# -- stateless under concurrency ----------------------------------------------------------------------------------
def test_one_instance_serves_concurrent_runs_each_with_its_own_selection() -> None:
    def choose(messages: list[BaseMessage]) -> AIMessage:
        wanted = str(messages[-1].content).split()[-1]  # "... use <tool>"
        return select(wanted)

    selector = ScriptedChatModel(default=choose)

    def answer(messages: list[BaseMessage]) -> str:
        return "done"

    main = ScriptedChatModel(default=answer)
    agent = create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=selector)])
    wanted = [NAMES[i % len(NAMES)] for i in range(24)]

    def one(name: str) -> tuple[str, ...]:
        agent.invoke({"messages": [HumanMessage(f"please use {name}")]})
        return (name,)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, wanted))
    by_question = {str(c.messages[-1].content).split()[-1]: c.tools for c in main.calls}
    assert by_question == {name: (name,) for name in NAMES}
    assert main.call_count == 24


async def _cancel_during_selection() -> bool:
    started = asyncio.Event()

    class SlowSelector(ScriptedChatModel):
        async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
            started.set()
            await asyncio.sleep(30)
            raise AssertionError("not reached")

    main = ScriptedChatModel(["never"])
    agent = create_agent(main, TOOLS, middleware=[LLMToolSelectorMiddleware(model=SlowSelector(responses=[]))])
    task = asyncio.create_task(agent.ainvoke(Q))
    await started.wait()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return main.call_count == 0
    return False


def test_cancellation_during_selection_is_not_swallowed_as_a_failure() -> None:
    assert asyncio.run(asyncio.wait_for(_cancel_during_selection(), 10))


# -- configuration ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "parameter", "text"),
    [
        ({"max_tools": 0}, "max_tools", "max_tools must be a positive int or None; got 0"),
        ({"max_tools": True}, "max_tools", "max_tools must be a positive int"),
        ({"max_tools": "3"}, "max_tools", "max_tools must be a positive int"),
        ({"always_include": [3]}, "always_include", "always_include must hold tool names or BaseTool"),
        ({"system_prompt": " "}, "system_prompt", "system_prompt must be a non-empty str"),
        ({"model": 42}, "model", "model must be a BaseChatModel instance or a model name"),
        ({"max_retries": -1}, "max_retries", "max_retries must be >= 0"),
        ({"max_retries": 1.5}, "max_retries", "max_retries must be >= 0"),
        ({"on_parsing_failure": "ignore"}, "on_parsing_failure", "on_parsing_failure must be 'error', 'none'"),
        ({"on_parsing_failure": [1]}, "on_parsing_failure", "on_parsing_failure must be 'error', 'none'"),
    ],
)
def test_constructor_errors_name_the_class_and_parameter(kwargs: dict[str, Any], parameter: str, text: str) -> None:
    with pytest.raises(MiddlewareConfigError, match=f"^LLMToolSelectorMiddleware: {text}") as err:
        LLMToolSelectorMiddleware(**kwargs)
    assert (err.value.middleware, err.value.hook) == ("LLMToolSelectorMiddleware", parameter)
    assert isinstance(err.value, ValueError)


def test_a_model_name_that_cannot_be_resolved_says_to_pass_an_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise ImportError("no provider package")

    monkeypatch.setattr(llm_tool_selector, "init_chat_model", missing)
    with pytest.raises(MiddlewareConfigError, match="Pass a model instance instead") as err:
        LLMToolSelectorMiddleware(model="openai:gpt-4o-mini")
    assert err.value.hook == "model" and "'openai:gpt-4o-mini'" in str(err.value)


def test_a_model_name_is_resolved_through_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    resolved = ScriptedChatModel([select("get_weather")])
    asked: list[str] = []

    def resolve_model(name: str) -> ScriptedChatModel:
        asked.append(name)
        return resolved

    monkeypatch.setattr(llm_tool_selector, "init_chat_model", resolve_model)
    mw = LLMToolSelectorMiddleware(model="openai:gpt-4o-mini")
    assert mw.model is resolved and asked == ["openai:gpt-4o-mini"]


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    names = ["get_weather"]
    mw = LLMToolSelectorMiddleware(model=ScriptedChatModel([select()]), always_include=names)
    names.append("send_email")
    assert mw.always_include == ("get_weather",)
    create_agent(ScriptedChatModel([]), TOOLS, middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'max_tools'"):
        mw.max_tools = 3
    changed = mw.replace(max_tools=1, model=ScriptedChatModel([select("calculator", "search_web")]))
    assert (changed.max_tools, changed.always_include, mw.max_tools) == (1, ("get_weather",), None)
    main = ScriptedChatModel(["ok"])
    run(create_agent(main, TOOLS, middleware=[changed]), Q)
    assert main.calls[0].tools == ("get_weather", "calculator")
    with pytest.raises(MiddlewareConfigError, match="max_tools"):
        mw.replace(max_tools=-1)


@pytest.mark.parametrize(
    "choice", ["send_email", {"type": "function", "function": {"name": "send_email"}}, {"name": "send_email"}]
)
def test_a_tool_forced_by_tool_choice_is_never_dropped(run: Runner, choice: Any) -> None:
    from middleware_kit import wrap_model_call

    @wrap_model_call
    def force(request: Any, handler: Any) -> Any:
        return handler(request.override(tool_choice=choice))

    selector = ScriptedChatModel([select("get_weather")])
    main = ScriptedChatModel(["ok"])
    run(create_agent(main, TOOLS, middleware=[force, LLMToolSelectorMiddleware(model=selector)]), Q)
    assert main.calls[0].tools == ("get_weather", "send_email")
    assert "- send_email:" not in str(selector.calls[0].messages[0].content)  # kept, so not a candidate


def test_an_interrupt_raised_while_selecting_pauses_the_run_instead_of_falling_back(run: Runner) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import interrupt

    def ask_a_human(messages: list[BaseMessage]) -> str:
        return str(interrupt("which tools?"))

    main = ScriptedChatModel(["never"])
    agent = create_agent(
        main,
        TOOLS,
        middleware=[LLMToolSelectorMiddleware(model=ScriptedChatModel(default=ask_a_human))],
        checkpointer=InMemorySaver(),
    )
    paused = run(agent, Q, config={"configurable": {"thread_id": "i"}})
    assert paused["__interrupt__"][0].value == "which tools?" and main.call_count == 0
