"""ProviderToolSearchMiddleware: chosen tools are sent deferred with the provider's search tool (Anthropic, OpenAI)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.provider_tool_search import (
    ANTHROPIC_TOOL_SEARCH,
    OPENAI_TOOL_SEARCH,
    ProviderToolSearchMiddleware,
    ToolSearchUnsupportedError,
    provider_of,
)
from middleware_kit.testing import ScriptedChatModel, make_request, run_model_chain, tool_call
from tests.conftest import Runner


class RecordingModel(ScriptedChatModel):
    """A scripted model that keeps the raw tools of each ``bind_tools`` call (what a provider integration gets)."""

    bound: list[list[Any]] = Field(default_factory=list)
    """Raw tools of every bind (the agent binds its default tools once, when built; the last bind is the latest
    call's)."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        self.bound.append(list(tools))
        return super().bind_tools(tools, tool_choice=tool_choice, **kwargs)


class ChatAnthropicLike(RecordingModel):
    """Shaped like langchain-anthropic's ChatAnthropic for provider detection."""

    @property
    def _llm_type(self) -> str:
        return "anthropic-chat"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": "anthropic", "ls_model_type": "chat", "ls_model_name": "claude-sonnet-4-5"}


class ChatOpenAILike(RecordingModel):
    @property
    def _llm_type(self) -> str:
        return "openai-chat"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": "openai", "ls_model_type": "chat", "ls_model_name": "gpt-5"}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def query_crm(customer: str) -> str:
    """Look a customer up in the CRM."""
    return f"{customer}: gold tier"


@tool(extras={"defer_loading": True})
def export_report(name: str) -> str:
    """Export a report."""
    return "exported"


Q = {"messages": [HumanMessage("Tier of ACME?")]}


def deferred_flags(tools: list[Any]) -> dict[str, Any]:
    return {
        (t.name if isinstance(t, BaseTool) else t.get("name", t["type"])): (
            (t.extras or {}).get("defer_loading") if isinstance(t, BaseTool) else "search"
        )
        for t in tools
    }


def test_anthropic_gets_deferred_copies_and_its_search_tool_and_the_tool_still_runs(run: Runner) -> None:
    model = ChatAnthropicLike(
        responses=[AIMessage("", tool_calls=[tool_call("query_crm", {"customer": "ACME"})]), "Gold."]
    )
    agent = create_agent(
        model, [get_weather, query_crm], middleware=[ProviderToolSearchMiddleware(searchable_tools=[query_crm])]
    )
    result = run(agent, Q)
    assert deferred_flags(model.bound[-1]) == {
        "get_weather": None,
        "query_crm": True,
        "tool_search_tool_bm25": "search",
    }
    assert model.bound[-1][-1] == ANTHROPIC_TOOL_SEARCH
    assert query_crm.extras is None  # the agent's tool object is never changed
    assert [m.content for m in result["messages"] if isinstance(m, ToolMessage)] == ["ACME: gold tier"]
    assert model.calls[0].tools == ("get_weather", "query_crm", "tool_search_tool_bm25")


def test_openai_gets_its_tool_search(run: Runner) -> None:
    model = ChatOpenAILike(responses=["ok"])
    run(
        create_agent(
            model,
            [get_weather, query_crm],
            middleware=[ProviderToolSearchMiddleware(searchable_tools=["get_weather", "query_crm"])],
        ),
        Q,
    )
    assert model.bound[-1][-1] == OPENAI_TOOL_SEARCH
    assert [(t.extras or {}).get("defer_loading") for t in model.bound[-1][:2]] == [True, True]


def test_a_tool_already_marked_defer_loading_is_deferred_without_being_named(run: Runner) -> None:
    model = ChatAnthropicLike(responses=["ok"])
    run(create_agent(model, [get_weather, export_report], middleware=[ProviderToolSearchMiddleware()]), Q)
    assert deferred_flags(model.bound[-1]) == {
        "get_weather": None,
        "export_report": True,
        "tool_search_tool_bm25": "search",
    }
    assert model.bound[-1][1] is export_report  # already deferred: sent as it is


def test_nothing_deferred_passes_the_request_through_on_any_provider(run: Runner) -> None:
    plain = RecordingModel(responses=["ok"])
    run(create_agent(plain, [get_weather, query_crm], middleware=[ProviderToolSearchMiddleware()]), Q)
    assert plain.bound[-1] == [get_weather, query_crm]


def test_a_searchable_tool_the_request_lacks_raises_before_the_provider_is_checked(run: Runner) -> None:
    model = RecordingModel(responses=["never"])  # no tool search either: the unbound names are reported first
    mw = ProviderToolSearchMiddleware(searchable_tools=["query_cmr", "export_reprot", "query_crm"])
    with pytest.raises(
        MiddlewareConfigError,
        match=r"^ProviderToolSearchMiddleware: searchable_tools references tool\(s\) not bound to the model: "
        r"export_reprot, query_cmr\. Fix: ",
    ) as err:
        run(create_agent(model, [get_weather, query_crm], middleware=[mw]), Q)
    assert isinstance(err.value, ValueError) and err.value.hook == "wrap_model_call"
    assert model.call_count == 0


class _Configurable:
    """Shaped like ``init_chat_model(configurable_fields=...)``'s model: defaults, and parameters per call."""

    def __init__(self, defaults: dict[str, Any], per_call: dict[str, Any] | None = None) -> None:
        self._default_config = defaults
        self.per_call = per_call

    def _model_params(self, config: Any = None) -> dict[str, Any]:
        return self.per_call if config is None else dict(config.get("configurable", {}))


class _WithConfig:
    def __init__(self, config: Any) -> None:
        self.config = config


@pytest.mark.parametrize(
    ("model", "runtime", "expected"),
    [
        (_Configurable({"model": "anthropic:claude-sonnet-4-5"}), None, "anthropic"),
        (_Configurable({}, {"model": "gpt-5"}), None, "openai"),  # a bare name: inferred
        (_Configurable({"model_provider": "openai"}), _WithConfig({"configurable": {"model": "claude-x"}}), "openai"),
        (_Configurable({"model_provider": "openai"}), _WithConfig({"configurable": {"model_provider": "Anthropic"}}),
         "anthropic"),
        (_Configurable({}, {"model": "llama-3.1"}), None, None),
        (ChatOpenAILike(responses=[]), None, "openai"),
        (RecordingModel(responses=[]), None, "recordingmodel"),  # its LangSmith provider: the class name
    ],
    ids=["default-config", "bare-name", "provider-over-runtime-model", "runtime-provider", "unknown", "ls", "other"],
)
def test_provider_of_reads_configurable_models_then_langsmith_params(model: Any, runtime: Any, expected: Any) -> None:
    assert provider_of(model, runtime) == expected


def test_an_undeterminable_provider_says_so() -> None:
    request = make_request(["q"], model=_Configurable({}, {"model": "llama-3.1"}), tools=[query_crm])  # type: ignore[arg-type]
    text = "could not determine the provider of the model '_Configurable'"
    with pytest.raises(ToolSearchUnsupportedError, match=text):
        run_model_chain(ProviderToolSearchMiddleware(searchable_tools=["query_crm"]), request, handler=lambda r: "x")


def test_an_unsupported_provider_raises_and_leaves_the_thread_usable(run: Runner) -> None:
    model = RecordingModel(responses=["never", "fine"])
    agent = create_agent(
        model,
        [query_crm],
        checkpointer=InMemorySaver(),
        middleware=[ProviderToolSearchMiddleware(searchable_tools=["query_crm"])],
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": "u"}}
    with pytest.raises(
        ToolSearchUnsupportedError,
        match=r"tools \['query_crm'\] are deferred .* the model "
        r"RecordingModel has no server-side tool search",
    ) as err:
        run(agent, Q, config=cfg)
    assert isinstance(err.value, ValueError) and err.value.hook == "wrap_model_call"
    assert model.call_count == 0
    assert [type(m).__name__ for m in agent.get_state(cfg).values["messages"]] == ["HumanMessage"]


def test_send_all_sends_every_tool_normally_to_an_unsupported_provider(mode: str) -> None:
    model = RecordingModel(responses=["ok"])
    agent = create_agent(
        model,
        [get_weather, export_report],
        middleware=[ProviderToolSearchMiddleware(searchable_tools=["get_weather"], on_unsupported="send_all")],
    )
    if mode == "invoke":
        events = list(agent.stream(Q, stream_mode="custom"))
    else:

        async def go() -> list[Any]:
            return [e async for e in agent.astream(Q, stream_mode="custom")]

        events = asyncio.run(go())
    assert deferred_flags(model.bound[-1]) == {"get_weather": None, "export_report": None}
    assert events == [
        {
            "event": "tool_search_unsupported",
            "middleware": "ProviderToolSearchMiddleware",
            "model": "RecordingModel",
            "deferred": ["get_weather", "export_report"],
        }
    ]


def test_inside_a_fallback_each_model_gets_the_right_request(run: Runner) -> None:
    primary = ChatAnthropicLike(responses=[ConnectionError("anthropic down")])
    backup = RecordingModel(responses=["from the backup"])
    agent = create_agent(
        primary,
        [get_weather, query_crm],
        middleware=[
            ModelFallbackMiddleware(backup),
            ProviderToolSearchMiddleware(searchable_tools=["query_crm"], on_unsupported="send_all"),
        ],
    )
    assert run(agent, Q)["messages"][-1].content == "from the backup"
    assert primary.bound[-1][-1] == ANTHROPIC_TOOL_SEARCH
    assert backup.bound[-1] == [get_weather, query_crm]


def test_the_event_names_the_deferred_tools(mode: str) -> None:
    model = ChatAnthropicLike(responses=["ok"], cycle=True)
    agent = create_agent(
        model,
        [get_weather, query_crm],
        middleware=[ProviderToolSearchMiddleware(searchable_tools=["query_crm"])],
    )
    events = list(agent.stream(Q, stream_mode="custom")) if mode == "invoke" else None
    if events is None:

        async def go() -> list[Any]:
            return [e async for e in agent.astream(Q, stream_mode="custom")]

        events = asyncio.run(go())
    assert events == [
        {
            "event": "tools_deferred",
            "middleware": "ProviderToolSearchMiddleware",
            "provider": "anthropic",
            "deferred": ["query_crm"],
        }
    ]


def test_a_search_tool_already_in_the_request_is_not_added_twice(run: Runner) -> None:
    from middleware_kit import wrap_model_call

    @wrap_model_call
    def with_search(request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[*request.tools, dict(ANTHROPIC_TOOL_SEARCH)]))

    model = ChatAnthropicLike(responses=["ok"])
    run(
        create_agent(
            model, [query_crm], middleware=[with_search, ProviderToolSearchMiddleware(searchable_tools=["query_crm"])]
        ),
        Q,
    )
    assert sum(1 for t in model.bound[-1] if isinstance(t, dict)) == 1


@pytest.mark.parametrize(
    ("kwargs", "parameter", "text"),
    [
        ({"searchable_tools": "query_crm"}, "searchable_tools", "searchable_tools must be a list"),
        ({"searchable_tools": [1]}, "searchable_tools", "searchable_tools must hold tool names or BaseTool instances"),
        ({"on_unsupported": "ignore"}, "on_unsupported", "on_unsupported must be 'error' or 'send_all'"),
    ],
)
def test_constructor_errors_name_the_class_and_parameter(kwargs: dict[str, Any], parameter: str, text: str) -> None:
    with pytest.raises(MiddlewareConfigError, match=f"^ProviderToolSearchMiddleware: {text}") as err:
        ProviderToolSearchMiddleware(**kwargs)
    assert err.value.hook == parameter


def test_configuration_is_frozen_and_replace_makes_a_working_copy(run: Runner) -> None:
    names = ["query_crm"]
    mw = ProviderToolSearchMiddleware(searchable_tools=names)
    names.append("get_weather")
    assert mw.searchable_tools == ("query_crm",)
    create_agent(ScriptedChatModel(["hi"]), [query_crm], middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'searchable_tools'"):
        mw.searchable_tools = ("x",)
    changed = mw.replace(searchable_tools=["get_weather"])
    model = ChatOpenAILike(responses=["ok"])
    run(create_agent(model, [get_weather, query_crm], middleware=[changed]), Q)
    assert [(t.extras or {}).get("defer_loading") for t in model.bound[-1][:2]] == [True, None]


def test_an_anthropic_tool_search_turn_in_history_keeps_the_loop_working(run: Runner) -> None:
    """Anthropic answers a search with server-side blocks (``server_tool_use`` + ``tool_search_tool_result``) next to
    the client call of the tool it found; only the client call is executed, and the next request carries the turn."""
    searched = AIMessage(
        content=[
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "tool_search_tool_bm25",
                "input": {"query": "crm customer"},
            },
            {
                "type": "tool_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": {
                    "type": "tool_search_tool_search_result",
                    "tool_references": [{"type": "tool_reference", "tool_name": "query_crm"}],
                },
            },
            {"type": "tool_use", "id": "toolu_1", "name": "query_crm", "input": {"customer": "ACME"}},
        ],
        tool_calls=[tool_call("query_crm", {"customer": "ACME"}, id="toolu_1")],
        response_metadata={"model_provider": "anthropic", "stop_reason": "tool_use"},
    )
    model = ChatAnthropicLike(responses=[searched, "ACME is gold tier."])
    agent = create_agent(
        model, [get_weather, query_crm], middleware=[ProviderToolSearchMiddleware(searchable_tools=["query_crm"])]
    )
    result = run(agent, Q)
    assert [m.content for m in result["messages"] if isinstance(m, ToolMessage)] == ["ACME: gold tier"]
    second = model.calls[1].messages
    assert second[-2].content == searched.content and second[-1].content == "ACME: gold tier"
    assert result["messages"][-1].content == "ACME is gold tier."
