"""Every deliberate difference from LangChain 1.5 that docs/migration.md lists, shown by running it.

Each test asserts what middleware_kit does and says in a comment what LangChain 1.5 does instead; the migration page
links here. (Differences that are bugs to fix live in tests/compat/test_docs_*.py as strict xfails.)
"""

from __future__ import annotations

import dataclasses
from typing import Any, NotRequired

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from middleware_kit import (
    AgentMiddleware,
    AgentState,
    InvalidJumpError,
    MiddlewareConfigError,
    UnknownStateKeyError,
    after_model,
    before_model,
    create_agent,
    wrap_model_call,
)
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.fallback import ModelFallbackMiddleware
from middleware_kit.middlewares.limits import ModelCallLimitMiddleware, ToolCallLimitMiddleware
from middleware_kit.middlewares.retry import ModelRetryMiddleware, calculate_delay
from middleware_kit.middlewares.summarization import SummarizationMiddleware, is_summary
from middleware_kit.middlewares.todo_list import TodoListMiddleware
from middleware_kit.testing import ScriptedChatModel, make_request, run_model_chain
from tests.conftest import Runner

Q = {"messages": [HumanMessage("hi")]}


def test_requests_are_frozen() -> None:
    # LangChain 1.5: assigning a ModelRequest attribute only warns (DeprecationWarning).
    request = make_request(["hi"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.messages = ()
    assert request.override(messages=()).messages == () and len(request.messages) == 1
    assert isinstance(request.messages, tuple) and isinstance(request.tools, tuple)


def test_an_undeclared_jump_raises(run: Runner) -> None:
    # LangChain 1.5: the jump is silently ignored.
    @before_model
    def stop(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end"}

    with pytest.raises(InvalidJumpError, match="can_jump_to"):
        run(create_agent(ScriptedChatModel(["ok"]), middleware=[stop]), Q)


def test_an_undeclared_state_key_raises(run: Runner) -> None:
    # LangChain 1.5: the key is silently dropped.
    @before_model
    def remember(state: Any, runtime: Any) -> dict[str, Any]:
        return {"last_question": "hi"}

    with pytest.raises(UnknownStateKeyError, match="last_question"):
        run(create_agent(ScriptedChatModel(["ok"]), middleware=[remember]), Q)


def test_a_sync_only_wrap_hook_runs_under_ainvoke_and_an_async_one_under_invoke(run: Runner) -> None:
    # LangChain 1.5: NotImplementedError when the wrap hook exists only in the other mode.
    @wrap_model_call
    def sync_only(request: Any, handler: Any) -> Any:
        return handler(request.override(system_prompt="sync"))

    @wrap_model_call
    async def async_only(request: Any, handler: Any) -> Any:
        return await handler(request)

    model = ScriptedChatModel(["ok"])
    assert run(create_agent(model, middleware=[sync_only, async_only]), Q)["messages"][-1].content == "ok"
    assert model.calls[0].messages[0].content == "sync"


class Seen(AgentState):
    seen: NotRequired[int]


def test_fused_nodes_names_and_the_values_stream() -> None:
    # LangChain 1.5: one node per hook ("a.before_model", "model", "b.after_model"), and stream_mode="values" yields a
    # snapshot after each of them. Here the hooks and the model call share the node "model": one snapshot.
    @before_model(state_schema=Seen)
    def a(state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [AIMessage("from a")], "seen": 1}

    @after_model
    def b(state: Any, runtime: Any) -> None:
        return None

    agent = create_agent(ScriptedChatModel(["ok"], cycle=True), middleware=[a, b])
    updates = [next(iter(chunk)) for chunk in agent.stream(Q, stream_mode="updates")]
    assert updates == ["model"]
    snapshots = [[m.content for m in chunk["messages"]] for chunk in agent.stream(Q, stream_mode="values")]
    assert snapshots == [["hi"], ["hi", "from a", "ok"]]
    with pytest.raises(MiddlewareConfigError, match="model"):
        create_agent(ScriptedChatModel(["ok"]), middleware=[a, b], interrupt_before=["a.before_model"])


def test_bundled_middleware_configuration_is_frozen() -> None:
    # LangChain 1.5: attributes of a middleware can be reassigned after construction (and affect every run).
    retry = ModelRetryMiddleware(max_retries=1)
    with pytest.raises(FrozenMiddlewareError) as err:
        retry.max_retries = 5
    assert isinstance(err.value, AttributeError) and "replace(max_retries=...)" in str(err.value)
    assert retry.replace(max_retries=5).max_retries == 5
    # `name` is identity, not configuration: a second instance of one class gets its own name, as in LangChain.
    hard = ModelCallLimitMiddleware(thread_limit=50)
    hard.name = "HardLimit"
    create_agent(ScriptedChatModel(["ok"]), middleware=[ModelCallLimitMiddleware(run_limit=5), hard])
    assert ModelCallLimitMiddleware(run_limit=1).replace(name="Soft").name == "Soft"


def test_bundled_wrap_hooks_are_flows_called_through_the_testing_kit() -> None:
    # LangChain 1.5: mw.wrap_model_call(request, handler) can be called directly on any bundled middleware. Here the
    # bundled wrap hooks that had a sync body and an async twin are single flow hooks (generators taking only the
    # request): call them through middleware_kit.testing.run_model_chain.
    model = ScriptedChatModel([ConnectionError("down")])
    backup = ScriptedChatModel(["from the backup"])
    response = run_model_chain(ModelFallbackMiddleware(backup), make_request(["hi"], model=model))
    assert response.result[-1].content == "from the backup"  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        ModelFallbackMiddleware(backup).wrap_model_call(make_request(["hi"]), lambda r: None)  # type: ignore[call-arg]


def test_summarization_runs_around_the_model_call_and_its_default_trigger_fires() -> None:
    # LangChain 1.5: summarization is a before_model hook, measures the messages only, and without `trigger` never
    # summarizes. Here it works in wrap_model_call (before_model does nothing), counts the system prompt and the bound
    # tools too, and defaults to 75% of the model's window (100k tokens without a profile).
    mw = SummarizationMiddleware(ScriptedChatModel(["S"]), trigger=("messages", 3), keep=("messages", 1))
    assert mw.before_model({"messages": [HumanMessage("a")] * 5}, None) is None  # type: ignore[arg-type]
    assert SummarizationMiddleware(ScriptedChatModel([])).trigger == ("tokens", 100_000)
    assert SummarizationMiddleware(ScriptedChatModel([], profile={"max_input_tokens": 1000})).trigger == (
        "fraction", 0.75)
    model = ScriptedChatModel(["final"])
    history = [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]
    result = create_agent(model, middleware=[mw]).invoke({"messages": history})
    assert is_summary(result["messages"][0]) and model.calls[0].messages[0] is not history[0]


def test_retry_differences() -> None:
    # LangChain 1.5: retry_on defaults to every Exception and a rejected error goes through on_failure; a jittered
    # delay may exceed max_delay by 25%. Here rejected errors propagate and max_delay is never exceeded.
    assert all(
        calculate_delay(20, backoff_factor=2.0, initial_delay=1.0, max_delay=10.0, jitter=True) <= 10.0
        for _ in range(200)
    )
    with pytest.raises(PermissionError):
        model = ScriptedChatModel([PermissionError("no")])
        run_model_chain(ModelRetryMiddleware(retry_on=(ConnectionError,), sleep=lambda s: None),
                        make_request(["hi"], model=model))


def test_todo_prompt_keeps_the_system_messages_identity() -> None:
    # LangChain 1.5 builds a new SystemMessage from the content blocks (dropping its id and additional_kwargs);
    # here the same blocks are appended to a copy of the message, which keeps them.
    system = SystemMessage("Base.", id="sys", additional_kwargs={"k": 1})
    response_holder: list[Any] = []

    def handler(request: Any) -> AIMessage:
        response_holder.append(request.system_message)
        return AIMessage("ok")

    run_model_chain(TodoListMiddleware(system_prompt="Plan."), make_request(["hi"], system_message=system),
                    handler=handler)
    sent = response_holder[0]
    assert (sent.id, sent.additional_kwargs) == ("sys", {"k": 1})
    assert sent.content == [{"type": "text", "text": "Base."}, {"type": "text", "text": "\n\nPlan."}]


def test_limits_validate_more() -> None:
    # LangChain 1.5 accepts negative or non-int limits and an empty tool_name; here they are refused at construction.
    for kwargs in ({"run_limit": -1}, {"thread_limit": 1.5}, {"tool_name": "", "run_limit": 1}):
        with pytest.raises(MiddlewareConfigError):
            ToolCallLimitMiddleware(**kwargs)


class _Plain(AgentMiddleware):
    pass


def test_agent_middleware_subclasses_need_no_super_init() -> None:
    # Identical to LangChain (listed here because FrozenConfig only applies to the bundled middlewares).
    mw = _Plain()
    mw.anything = 1  # type: ignore[attr-defined]
    assert mw.name == "_Plain"
