"""``create_agent`` surface added in LangChain 1.5: provider-native structured output, ``cache``, the agent's name on
its messages and stream metadata, ``messages`` on a ``DeltaChannel``, invalid tool calls answered, and
``typing_extensions.TypedDict`` context schemas; each through the public API under ``invoke`` and ``ainvoke``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Required

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.cache.memory import InMemoryCache
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from pydantic import BaseModel
from typing_extensions import TypedDict

from middleware_kit import (
    AgentState,
    ModelRequest,
    StateSchemaConflictError,
    before_model,
    create_agent,
    wrap_model_call,
)
from middleware_kit.structured_output import (
    AutoStrategy,
    ProviderStrategy,
    StructuredOutputValidationError,
    ToolStrategy,
    supports_provider_strategy,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add


class Weather(BaseModel):
    """A weather report."""

    city: str
    temperature: float


# -- ProviderStrategy / AutoStrategy ---------------------------------------------------------------------------
def test_provider_strategy_parses_the_json_answer(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]),
                               '{"city": "Oslo", "temperature": 3}'])
    agent = create_agent(model, [add], response_format=ProviderStrategy(Weather, strict=True))
    result = run(agent, {"messages": [HumanMessage("q")]})
    assert result["structured_response"] == Weather(city="Oslo", temperature=3)
    assert [type(m) for m in result["messages"]] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    bound = model.calls[0].kwargs["response_format"]
    assert bound["type"] == "json_schema" and bound["json_schema"]["name"] == "Weather"
    assert bound["json_schema"]["strict"] is True
    assert model.calls[0].tools == ("add",)  # no structured tool, and tool use is not forced
    assert "tool_choice" not in model.calls[0].kwargs


def test_provider_strategy_without_tools_binds_no_tools(run: Runner) -> None:
    model = ScriptedChatModel(['{"city": "Oslo", "temperature": 3}'])
    result = run(create_agent(model, response_format=ProviderStrategy(Weather)), {"messages": [HumanMessage("q")]})
    assert result["structured_response"] == Weather(city="Oslo", temperature=3)
    assert model.calls[0].tools == () and "response_format" in model.calls[0].kwargs


def test_provider_strategy_invalid_json_raises_naming_the_schema(run: Runner) -> None:
    agent = create_agent(ScriptedChatModel(["not json"]), response_format=ProviderStrategy(Weather))
    with pytest.raises(StructuredOutputValidationError, match="Weather") as info:
        run(agent, {"messages": [HumanMessage("q")]})
    assert info.value.ai_message is not None and info.value.ai_message.content == "not json"


def test_bare_schema_is_auto_provider_for_capable_models(run: Runner) -> None:
    seen: list[Any] = []

    @wrap_model_call
    def look(request: ModelRequest, handler: Any) -> Any:
        seen.append(request.response_format)
        return handler(request)

    model = ScriptedChatModel(['{"city": "Oslo", "temperature": 3}'], profile={"structured_output": True})
    result = run(create_agent(model, middleware=[look], response_format=Weather), {"messages": [HumanMessage("q")]})
    assert result["structured_response"] == Weather(city="Oslo", temperature=3)
    assert isinstance(seen[0], AutoStrategy) and seen[0].schema is Weather
    assert "response_format" in model.calls[0].kwargs


def test_bare_schema_is_tool_strategy_for_other_models(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("Weather", {"city": "Oslo", "temperature": 3})])])
    result = run(create_agent(model, response_format=Weather), {"messages": [HumanMessage("q")]})
    assert result["structured_response"] == Weather(city="Oslo", temperature=3)
    assert model.calls[0].tools == ("Weather",) and model.calls[0].kwargs["tool_choice"] == "any"


def test_known_model_names_support_native_output() -> None:
    assert supports_provider_strategy("openai:gpt-5.5") and supports_provider_strategy("claude-sonnet-4-5")
    assert not supports_provider_strategy("gpt-5.4-pro") and not supports_provider_strategy("gpt-oss-120b")
    gemini = ScriptedChatModel([], model_name="gemini-2.5-flash", profile={"structured_output": True})
    assert supports_provider_strategy(gemini) and not supports_provider_strategy(gemini, tools=[add])


def test_untitled_json_schema_gets_a_stable_name(run: Runner) -> None:
    schema = {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]}
    name = ToolStrategy(schema).schema_specs[0].name
    assert name.startswith("response_format_") and name == ToolStrategy(dict(schema)).schema_specs[0].name
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call(name, {"result": "ok"})])])
    result = run(create_agent(model, response_format=schema), {"messages": [HumanMessage("q")]})
    assert result["structured_response"] == {"result": "ok"}


# -- cache, name, run config -----------------------------------------------------------------------------------
def test_cache_is_the_graph_node_cache(run: Runner) -> None:
    cache: InMemoryCache[Any] = InMemoryCache()
    agent = create_agent(ScriptedChatModel(["hi"]), cache=cache)
    assert agent.cache is cache
    assert run(agent, {"messages": [HumanMessage("q")]})["messages"][-1].content == "hi"


def test_name_is_set_on_ai_messages_and_stream_metadata(mode: str) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    agent = create_agent(model, [add], name="calc")
    if mode == "invoke":
        chunks: list[Any] = list(agent.stream({"messages": [HumanMessage("q")]}, stream_mode=["messages", "values"]))
    else:
        import asyncio

        async def collect() -> list[Any]:
            stream = agent.astream({"messages": [HumanMessage("q")]}, stream_mode=["messages", "values"])
            return [c async for c in stream]

        chunks = asyncio.run(collect())
    final = [data for kind, data in chunks if kind == "values"][-1]
    assert [m.name for m in final["messages"] if isinstance(m, AIMessage)] == ["calc", "calc"]
    metadata = [data[1] for kind, data in chunks if kind == "messages"]
    assert metadata and all(meta["lc_agent_name"] == "calc" for meta in metadata)


def test_default_recursion_limit_is_langchains(run: Runner) -> None:
    seen: list[Any] = []

    @before_model
    def look(state: AgentState, runtime: Runtime) -> None:
        from langgraph.config import get_config

        seen.append(get_config()["recursion_limit"])

    run(create_agent(ScriptedChatModel(["a"]), middleware=[look]), {"messages": [HumanMessage("q")]})
    run(create_agent(ScriptedChatModel(["a"]), middleware=[look]), {"messages": [HumanMessage("q")]},
        config={"recursion_limit": 7})
    assert seen == [9_999, 7]


# -- state schema: messages on a DeltaChannel ------------------------------------------------------------------
def _add_batch(state: Sequence[AnyMessage] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    result: Any = list(state or [])
    for write in writes:
        result = add_messages(result, write)
    return list(result)


class DeltaState(AgentState):
    """As deepagents declares it."""

    messages: Required[Annotated[list[AnyMessage], DeltaChannel(_add_batch, snapshot_frequency=50)]]


class Counted(AgentState):
    count: int


def test_messages_on_a_delta_channel_replace_agentstates(run: Runner) -> None:
    counting = before_model(state_schema=Counted, name="counting")(lambda state, runtime: {"count": 1})
    agent = create_agent(ScriptedChatModel(["hi", "ho"]), state_schema=DeltaState, middleware=[counting],
                         checkpointer=InMemorySaver())
    assert isinstance(agent.channels["messages"], DeltaChannel)
    config = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": [HumanMessage("q")]}, config=config)
    result = run(agent, {"messages": [HumanMessage("again")]}, config=config)
    assert [m.content for m in result["messages"]] == ["q", "hi", "again", "ho"]
    assert result["count"] == 1


def test_two_user_schemas_declaring_messages_differently_still_conflict() -> None:
    class ListState(AgentState):
        messages: list[AnyMessage]

    other = before_model(state_schema=ListState, name="other")(lambda state, runtime: None)
    with pytest.raises(StateSchemaConflictError, match="'messages'"):
        create_agent(ScriptedChatModel([]), state_schema=DeltaState, middleware=[other])


# -- invalid tool calls ----------------------------------------------------------------------------------------
def test_invalid_tool_calls_are_answered_before_the_next_model_call(run: Runner) -> None:
    bad = AIMessage("", invalid_tool_calls=[{"name": "add", "args": '{"a":', "id": "bad", "error": "JSON"}])
    model = ScriptedChatModel([bad, "sorry"])
    agent = create_agent(model, [add], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    first = run(agent, {"messages": [HumanMessage("q")]}, config=config)
    assert [type(m) for m in first["messages"]] == [HumanMessage, AIMessage]  # the model's output is kept as is
    result = run(agent, {"messages": [HumanMessage("again")]}, config=config)
    answer = model.calls[1].messages[2]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "bad" and answer.status == "error"
    assert "malformed or truncated" in answer.text
    assert [type(m) for m in result["messages"]] == [HumanMessage, AIMessage, ToolMessage, HumanMessage, AIMessage]


# -- context_schema as typing_extensions.TypedDict -------------------------------------------------------------
class UserContext(TypedDict):
    user: str


def test_typing_extensions_typeddict_context(run: Runner) -> None:
    seen: list[Any] = []

    @before_model
    def look(state: AgentState, runtime: Runtime[UserContext]) -> None:
        seen.append(runtime.context["user"])

    agent = create_agent(ScriptedChatModel(["a"]), middleware=[look], context_schema=UserContext)
    run(agent, {"messages": [HumanMessage("q")]}, context={"user": "ada"})
    assert seen == ["ada"]


def test_a_transformer_listed_twice_is_registered_once() -> None:
    from langgraph.prebuilt import ToolCallTransformer

    agent = create_agent(ScriptedChatModel([]), transformers=[ToolCallTransformer])
    assert list(agent.stream_transformers).count(ToolCallTransformer) == 1


# -- run.subagents -------------------------------------------------------------------------------------------------
def _supervisor_with(inner: Any) -> Any:
    from langchain_core.tools import StructuredTool

    def ask(question: str) -> str:
        return str(inner.invoke({"messages": [HumanMessage(question)]})["messages"][-1].content)

    async def aask(question: str) -> str:
        return str((await inner.ainvoke({"messages": [HumanMessage(question)]}))["messages"][-1].content)

    ask_inner = StructuredTool.from_function(ask, coroutine=aask, name="ask_inner", description="Ask the inner agent.")

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("ask_inner", {"question": "q"}, id="c1")]), "done"])
    return create_agent(model, [ask_inner], name="boss")


def test_named_nested_agent_surfaces_on_run_subagents(mode: str) -> None:
    import asyncio
    import warnings

    supervisor = _supervisor_with(create_agent(ScriptedChatModel(["sunny"]), name="weather"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangGraph marks the v3 protocol experimental
        if mode == "invoke":
            run = supervisor.stream_events({"messages": [HumanMessage("q")]}, version="v3")
            handles = []
            for handle in run.subagents:
                handles.append(handle)
                for _ in handle:
                    pass
        else:

            async def collect() -> list[Any]:
                run = await supervisor.astream_events({"messages": [HumanMessage("q")]}, version="v3")
                found = []
                async for handle in run.subagents:
                    found.append(handle)
                    async for _ in handle:
                        pass
                return found

            handles = asyncio.run(collect())
    assert [(h.name, h.cause) for h in handles] == [("weather", {"type": "toolCall", "tool_call_id": "c1"})]
    assert handles[0].status == "completed"


def test_message_guards_apply_to_messages_on_a_delta_channel(run: Runner) -> None:
    from tests.integration.test_message_guards import Redact, memory_bytes

    saver = InMemorySaver()
    agent = create_agent(ScriptedChatModel(["ok"]), state_schema=DeltaState, middleware=[Redact()],
                         checkpointer=saver)
    assert isinstance(agent.channels["messages"], DeltaChannel)
    result = run(agent, {"messages": [HumanMessage("my SECRET")]}, config={"configurable": {"thread_id": "t"}})
    assert [m.content for m in result["messages"]] == ["my [x]", "ok"]
    raw = memory_bytes(saver)
    assert b"[x]" in raw and b"SECRET" not in raw
