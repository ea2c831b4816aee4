"""LLMToolEmulator: chosen tools are answered by a model (scripted here) and never run; the rest run normally."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit._engine.internal_calls import INTERNAL_CALL_METADATA_KEY, internal_call_metadata
from middleware_kit.middlewares import llm_tool_emulator
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.llm_tool_emulator import EMULATION_PROMPT, LLMToolEmulator
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

RAN: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    RAN.append("get_weather")
    return f"real weather in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an e-mail to someone."""
    RAN.append("send_email")
    raise RuntimeError("a real e-mail must never be sent by a test")


@pytest.fixture(autouse=True)
def _clear_ran() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


Q = {"messages": [HumanMessage("Weather in Paris, then mail it to ann@example.com")]}


def both_calls() -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            tool_call("get_weather", {"city": "Paris"}, id="w"),
            tool_call("send_email", {"to": "ann@example.com", "body": "sunny"}, id="m"),
        ],
    )


def tool_messages(result: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}


def test_all_tools_are_emulated_by_default_and_never_run(run: Runner) -> None:
    emulator = ScriptedChatModel(["18°C and sunny", "Email queued (id 42)"])
    agent = create_agent(
        ScriptedChatModel([both_calls(), "Done."]),
        [get_weather, send_email],
        middleware=[LLMToolEmulator(model=emulator)],
    )
    result = run(agent, Q)
    answers = tool_messages(result)
    assert RAN == []
    assert (answers["w"].content, answers["m"].content) == ("18°C and sunny", "Email queued (id 42)")
    assert (answers["w"].name, answers["m"].name) == ("get_weather", "send_email")
    assert answers["w"].response_metadata == {"emulated": True} and answers["w"].status == "success"
    assert result["messages"][-1].content == "Done."


@pytest.mark.parametrize("chosen", [["send_email"], [send_email]], ids=["by name", "by instance"])
def test_only_the_chosen_tools_are_emulated(run: Runner, chosen: list[Any]) -> None:
    emulator = ScriptedChatModel(["Email queued"])
    agent = create_agent(
        ScriptedChatModel([both_calls(), "Done."]),
        [get_weather, send_email],
        middleware=[LLMToolEmulator(tools=chosen, model=emulator)],
    )
    answers = tool_messages(run(agent, Q))
    assert RAN == ["get_weather"]
    assert answers["w"].content == "real weather in Paris" and "emulated" not in answers["w"].response_metadata
    assert answers["m"].content == "Email queued" and emulator.call_count == 1


def test_an_empty_list_emulates_nothing(run: Runner) -> None:
    agent = create_agent(
        ScriptedChatModel([AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Oslo"})]), "ok"]),
        [get_weather],
        middleware=[LLMToolEmulator(tools=[], model=ScriptedChatModel([]))],
    )
    assert tool_messages(run(agent, Q))
    assert RAN == ["get_weather"]


def test_the_prompt_carries_the_tool_description_and_arguments_so_a_script_can_answer_per_tool(run: Runner) -> None:
    def emulate(messages: list[BaseMessage]) -> str:
        prompt = str(messages[-1].content)
        args = json.loads(prompt.split("Arguments: ", 1)[1].split("\n", 1)[0])
        return f"fake {prompt.split('Tool: ', 1)[1].split(chr(10), 1)[0]} for {sorted(args.values())}"

    emulator = ScriptedChatModel(default=emulate)
    agent = create_agent(
        ScriptedChatModel([both_calls(), "Done."]),
        [get_weather, send_email],
        middleware=[LLMToolEmulator(model=emulator)],
    )
    answers = tool_messages(run(agent, Q))
    assert answers["w"].content == "fake get_weather for ['Paris']"
    assert answers["m"].content == "fake send_email for ['ann@example.com', 'sunny']"
    prompt = next(c for c in emulator.calls if "get_weather" in str(c.messages[-1].content)).messages[-1].content
    assert prompt == EMULATION_PROMPT.format(
        tool="get_weather", description="Current weather for a city.", args='{"city": "Paris"}'
    )


def test_a_tool_the_agent_lacks_is_emulated_when_chosen_by_name(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("book_flight", {"to": "Oslo"}, id="b")]), "ok"])
    emulator = ScriptedChatModel(["Booked: ABC123"])
    agent = create_agent(model, [get_weather], middleware=[LLMToolEmulator(tools=["book_flight"], model=emulator)])
    answers = tool_messages(run(agent, Q))
    assert answers["b"].content == "Booked: ABC123"
    assert "Description: (no description)" in str(emulator.calls[0].messages[0].content)


def test_each_emulated_call_is_an_event_and_never_streams_tokens(mode: str) -> None:
    emulator = ScriptedChatModel(["EMULATED-WEATHER", "EMULATED-MAIL"], cycle=True)
    agent = create_agent(
        ScriptedChatModel([both_calls(), "Done."], cycle=True),
        [get_weather, send_email],
        middleware=[LLMToolEmulator(model=emulator)],
    )

    def collect(stream_mode: Any) -> list[Any]:
        if mode == "invoke":
            return list(agent.stream(Q, stream_mode=stream_mode))

        async def go() -> list[Any]:
            return [c async for c in agent.astream(Q, stream_mode=stream_mode)]

        return asyncio.run(go())

    events = [e for e in collect("custom") if isinstance(e, dict)]
    assert sorted((e["event"], e["tool"], e["tool_call_id"]) for e in events) == [
        ("tool_emulated", "get_weather", "w"),
        ("tool_emulated", "send_email", "m"),
    ]
    streamed = [chunk for chunk, _ in collect("messages")]
    ai_texts = [c.text for c in streamed if isinstance(c, AIMessage)]
    assert not any("EMULATED" in t for t in ai_texts)  # the emulator's own tokens never stream
    assert {c.content for c in streamed if isinstance(c, ToolMessage)} == {"EMULATED-WEATHER", "EMULATED-MAIL"}


def test_an_emulation_model_error_propagates(run: Runner) -> None:
    agent = create_agent(
        ScriptedChatModel([both_calls(), "Done."]),
        [get_weather, send_email],
        middleware=[LLMToolEmulator(tools=["send_email"], model=ScriptedChatModel([TimeoutError("emulator down")]))],
    )
    with pytest.raises(TimeoutError, match="emulator down"):
        run(agent, Q)
    assert "send_email" not in RAN


def test_parallel_calls_each_get_their_own_emulated_answer(run: Runner) -> None:
    cities = [f"city{i}" for i in range(12)]
    calls = AIMessage("", tool_calls=[tool_call("get_weather", {"city": c}, id=c) for c in cities])

    def emulate(messages: list[BaseMessage]) -> str:
        return "weather of " + str(
            json.loads(str(messages[-1].content).split("Arguments: ", 1)[1].split("\n")[0])["city"]
        )

    agent = create_agent(
        ScriptedChatModel([calls, "ok"]),
        [get_weather],
        middleware=[LLMToolEmulator(model=ScriptedChatModel(default=emulate))],
    )
    answers = tool_messages(run(agent, Q))
    assert {k: v.content for k, v in answers.items()} == {c: f"weather of {c}" for c in cities}
    assert RAN == []


# -- configuration ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "parameter", "text"),
    [
        ({"tools": "send_email", "model": ScriptedChatModel([])}, "tools", "tools must be None"),
        ({"tools": send_email, "model": ScriptedChatModel([])}, "tools", "tools must be None"),
        ({"tools": [3], "model": ScriptedChatModel([])}, "tools", "tools must hold tool names or BaseTool"),
        ({"model": 3}, "model", "model must be a BaseChatModel instance or a model name"),
    ],
)
def test_constructor_errors_name_the_class_and_parameter(kwargs: dict[str, Any], parameter: str, text: str) -> None:
    with pytest.raises(MiddlewareConfigError, match=f"^LLMToolEmulator: {text}") as err:
        LLMToolEmulator(**kwargs)
    assert (err.value.middleware, err.value.hook) == ("LLMToolEmulator", parameter)


def test_the_default_model_is_deprecated_and_resolved_at_temperature_1(monkeypatch: pytest.MonkeyPatch) -> None:
    resolved = ScriptedChatModel(["x"])
    asked: list[tuple[str, dict[str, Any]]] = []

    def resolve(name: str, **kwargs: Any) -> Any:
        asked.append((name, kwargs))
        return resolved if name.startswith("anthropic:") else None

    monkeypatch.setattr(llm_tool_emulator, "init_chat_model", resolve)
    with pytest.warns(DeprecationWarning, match="default model .* is deprecated"):
        assert LLMToolEmulator().model is resolved
    assert asked == [("anthropic:claude-sonnet-4-5-20250929", {"temperature": 1})]
    with pytest.raises(MiddlewareConfigError, match="resolved to NoneType, not a chat model"):
        LLMToolEmulator(model="openai:gpt-4o")


def test_without_langchain_anthropic_the_default_model_is_an_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str, **kwargs: Any) -> Any:
        raise MiddlewareConfigError("Unable to import langchain_anthropic", middleware="resolve_model", hook="model")

    monkeypatch.setattr(llm_tool_emulator, "init_chat_model", missing)
    with pytest.warns(DeprecationWarning), pytest.raises(ImportError, match="requires `langchain-anthropic`"):
        LLMToolEmulator(tools=["get_weather"])


def test_the_emulation_call_carries_langchains_internal_call_metadata(run: Runner) -> None:
    seen: list[Any] = []

    class Capturing(ScriptedChatModel):
        def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            seen.append(config)
            return super().invoke(input, config, **kwargs)

        async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            seen.append(config)
            return await super().ainvoke(input, config, **kwargs)

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Rome"}, id="w")]), "ok"])
    emulator = LLMToolEmulator(tools=["get_weather"], model=Capturing(responses=["sunny"]))
    run(create_agent(model, [get_weather], middleware=[emulator]), {"messages": [HumanMessage("weather?")]})
    [config] = seen
    assert config["metadata"]["lc_source"] == "tool_emulation" and "nostream" in config["tags"]
    assert config["metadata"][INTERNAL_CALL_METADATA_KEY] == internal_call_metadata()[INTERNAL_CALL_METADATA_KEY]


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    chosen = ["send_email"]
    mw = LLMToolEmulator(tools=chosen, model=ScriptedChatModel([]))
    chosen.append("get_weather")
    assert mw.tools_to_emulate == frozenset({"send_email"}) and not mw.emulate_all
    create_agent(ScriptedChatModel([]), [get_weather], middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'model'"):
        mw.model = ScriptedChatModel([])
    changed = mw.replace(tools=["get_weather"], model=ScriptedChatModel(["fake"]))
    agent = create_agent(
        ScriptedChatModel([AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Rome"}, id="w")]), "ok"]),
        [get_weather],
        middleware=[changed],
    )
    assert tool_messages(run(agent, Q))["w"].content == "fake" and RAN == []
    assert mw.tools_to_emulate == frozenset({"send_email"})


def test_one_instance_emulates_concurrent_runs_in_isolation() -> None:
    import re
    from concurrent.futures import ThreadPoolExecutor

    def main(messages: list[BaseMessage]) -> AIMessage | str:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return str(last.content)
        city = str(last.content).split()[-1]
        return AIMessage("", tool_calls=[tool_call("get_weather", {"city": city}, id="call_0")])

    def emulate(messages: list[BaseMessage]) -> str:
        found = re.search(r'"city": "(\w+)"', str(messages[-1].content)) or re.search(
            r'"city": "(\w+)"', "".join(str(m.content) for m in messages)
        )
        assert found is not None
        return f"emulated weather in {found.group(1)}"

    emulator = LLMToolEmulator(model=ScriptedChatModel([emulate], cycle=True))
    agent = create_agent(ScriptedChatModel([main], cycle=True), [get_weather], middleware=[emulator])

    def ask(i: int) -> dict[str, Any]:
        return {"messages": [HumanMessage(f"weather in City{i}")]}

    async def many(ids: list[int]) -> list[Any]:
        return list(await asyncio.gather(*(agent.ainvoke(ask(i)) for i in ids)))

    with ThreadPoolExecutor(4) as pool:
        threaded = {i: pool.submit(agent.invoke, ask(i)) for i in range(0, 16, 2)}
        gathered = dict(zip(range(1, 16, 2), asyncio.run(many(list(range(1, 16, 2)))), strict=True))
        results = {i: f.result() for i, f in threaded.items()} | gathered
    assert RAN == []
    for i, result in results.items():
        assert result["messages"][-1].content == f"emulated weather in City{i}", i
