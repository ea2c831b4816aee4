"""Fail fast and name the culprit (issue 15), agent level: hook signatures at build, the context at run start, hook
return values to the element (the thread intact, the next turn working), a failed attempt's update dropped, tool
failures named. Every run under invoke and ainvoke, on a checkpointer."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Any, NotRequired

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from middleware_kit import AgentState, create_agent
from middleware_kit import decorators as deco
from middleware_kit.errors import ContextError, HookSignatureError, HookValueError, MiddlewareError
from middleware_kit.middlewares.tool_error import ToolErrorMiddleware
from middleware_kit.testing import ScriptedChatModel, TraceRecorder, tool_call
from middleware_kit.types import ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest
from tests.conftest import Runner, add
from tests.helpers import tool_then_answer

_threads = itertools.count()


def thread() -> RunnableConfig:
    return {"configurable": {"thread_id": f"t{next(_threads)}"}}


def q(text: str = "q") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


# -- 1. signatures --------------------------------------------------------------------------------------------------
def test_a_hook_without_runtime_fails_at_build_not_mid_run() -> None:
    @deco.before_model
    def log(state: Any) -> None:
        return None

    with pytest.raises(HookSignatureError) as info:
        create_agent(ScriptedChatModel(["ok"]), middleware=[log])
    assert (info.value.middleware, info.value.hook) == ("log", "before_model")
    assert (info.value.expected, info.value.found) == ("def before_model(state, runtime)", "def log(state)")


def test_bundled_and_testing_middlewares_pass_the_signature_check() -> None:
    create_agent(ScriptedChatModel(["ok"]), [add], middleware=[TraceRecorder("A"), ToolErrorMiddleware(str)])


# -- 2. context -------------------------------------------------------------------------------------------------------
@dataclass
class Ctx:
    user_id: str
    tier: str = "free"


def context_agent(seen: list[Any]) -> Any:
    @deco.before_agent
    def first(state: Any, runtime: Any) -> None:
        seen.append(runtime.context)

    return create_agent(
        ScriptedChatModel(["ok"], cycle=True), middleware=[first], context_schema=Ctx, checkpointer=InMemorySaver()
    )


@pytest.mark.parametrize(
    ("context", "field", "start"),
    [
        (None, "user_id", "The agent's context_schema is Ctx, which requires the field(s) ['user_id']"),
        ({"userid": "u"}, "userid", "context= has the field 'userid', which Ctx does not declare"),
        ({"tier": "pro"}, "user_id", "context= lacks 'user_id', a required field of Ctx"),
        ("acme", None, "context= is a str ('acme'), not a Ctx"),
    ],
)
def test_bad_context_fails_before_any_hook_and_writes_nothing(
    run: Runner, context: Any, field: str | None, start: str
) -> None:
    seen: list[Any] = []
    agent = context_agent(seen)
    config = thread()
    with pytest.raises(ContextError) as info:
        run(agent, q(), config=config, context=context)
    assert (info.value.schema, info.value.field, info.value.hook) == ("Ctx", field, "context")
    assert str(info.value).startswith(start)
    assert seen == []
    assert agent.get_state(config).values == {}  # not even the input was checkpointed
    result = run(agent, q(), config=config, context={"user_id": "u"})
    assert seen == [Ctx("u")]  # dict coercion stays
    assert [m.content for m in result["messages"]] == ["q", "ok"]


def test_a_resume_must_bring_the_context_again_and_a_given_one_is_checked(run: Runner) -> None:
    @deco.before_model
    def ask(state: Any, runtime: Any) -> None:
        if len(state["messages"]) == 1:
            interrupt("review")

    agent = create_agent(
        ScriptedChatModel(["ok"], cycle=True), middleware=[ask], context_schema=Ctx, checkpointer=InMemorySaver()
    )
    config = thread()
    run(agent, q(), config=config, context=Ctx("u"))
    with pytest.raises(ContextError):
        run(agent, Command(resume="yes"), config=config, context={"userid": "u"})
    with pytest.raises(ContextError, match="Ctx"):  # LangGraph keeps no context in the checkpoint
        run(agent, Command(resume="yes"), config=config)
    result = run(agent, Command(resume="yes"), config=config, context=Ctx("u"))
    assert [m.content for m in result["messages"]] == ["q", "ok"]


def test_bad_context_fails_on_stream_and_astream_too() -> None:
    agent = context_agent([])
    with pytest.raises(ContextError):
        list(agent.stream(q(), config=thread()))

    async def consume() -> None:
        async for _ in agent.astream(q(), config=thread(), context="acme"):
            pass

    with pytest.raises(ContextError):
        asyncio.run(consume())


# -- 3. return values, to the element ------------------------------------------------------------------------------
@tool
def boom(x: int) -> str:
    """Fails."""
    raise RuntimeError("database is down")


def _other(request: ToolCallRequest) -> ToolMessage:
    return ToolMessage("3", tool_call_id="someone-else", name=request.tool_call["name"])


BAD_HOOKS: dict[str, tuple[str, Any]] = {
    "before_model {'messages': 0}": ("before_model", lambda state, runtime: {"messages": 0}),
    "after_model {'messages': [msg, 0]}": ("after_model", lambda state, runtime: {"messages": [HumanMessage("x"), 0]}),
    "before_agent {'messages': [[junk]]}": ("before_agent", lambda state, runtime: {"messages": [["junk"]]}),
    "after_agent {'messages': 1.5}": ("after_agent", lambda state, runtime: {"messages": 1.5}),
    "ModelResponse(result='hello')": (
        "wrap_model_call",
        lambda request, handler: ModelResponse(result="hello"),  # type: ignore[arg-type]
    ),
    "ModelResponse(result=[0])": (
        "wrap_model_call",
        lambda request, handler: ModelResponse(result=[0]),  # type: ignore[list-item]
    ),
    "ExtendedModelResponse(command='x')": (
        "wrap_model_call",
        lambda request, handler: ExtendedModelResponse(handler(request), "x"),  # type: ignore[arg-type]
    ),
    "request.override(messages=[0])": (
        "modify_model_request",
        lambda request, state: request.override(messages=[0]),
    ),
    "wrap_tool_call Command(update=1)": ("wrap_tool_call", lambda request, handler: Command(update=1)),
    "wrap_tool_call another call's ToolMessage": ("wrap_tool_call", lambda request, handler: _other(request)),
    "before_tool another call's ToolMessage": ("before_tool", lambda request: _other(request)),
    "after_tool another call's ToolMessage": ("after_tool", lambda request, result: _other(request)),
}


@pytest.mark.parametrize("case", list(BAD_HOOKS))
def test_bad_element_names_middleware_and_hook_and_the_thread_goes_on(run: Runner, case: str) -> None:
    hook, fn = BAD_HOOKS[case]
    saver = InMemorySaver()
    model = tool_then_answer()
    good = create_agent(model, [add], checkpointer=saver)
    bad = create_agent(model, [add], middleware=[getattr(deco, hook)(name="Culprit")(fn)], checkpointer=saver)
    config = thread()
    run(good, q("one"), config=config)
    before = good.get_state(config).values["messages"]
    with pytest.raises(HookValueError) as info:
        run(bad, q("two"), config=config)
    assert (info.value.middleware, info.value.hook) == ("Culprit", hook)
    assert str(info.value).startswith(f"Culprit.{hook} returned ")
    after = good.get_state(config).values["messages"]
    assert after[: len(before)] == before
    assert all(isinstance(m, BaseMessage) for m in after)
    result = run(good, q("three"), config=config)
    messages = result["messages"]
    assert messages[: len(before)] == before
    assert messages[-1].content == "done" and isinstance(messages[-1], AIMessage)
    assert all(isinstance(m, BaseMessage) for m in messages)


def _flow_model(request: ModelRequest[Any]) -> Any:
    yield request
    return ModelResponse(result="hello")  # type: ignore[arg-type]


def _flow_tool(request: ToolCallRequest) -> Any:
    result = yield request
    return ToolMessage(str(result.content), tool_call_id="someone-else")


async def _async_model(request: ModelRequest[Any], handler: Any) -> Any:
    return ModelResponse(result=[await handler(request), 0])  # type: ignore[list-item]


async def _async_tool(request: ToolCallRequest, handler: Any) -> Any:
    await handler(request)
    return Command(update="x")


@pytest.mark.parametrize(
    ("hook", "fn"),
    [
        ("wrap_model_call", _flow_model),
        ("wrap_tool_call", _flow_tool),
        ("wrap_model_call", _async_model),
        ("wrap_tool_call", _async_tool),
    ],
    ids=["flow-model", "flow-tool", "async-model", "async-tool"],
)
def test_flow_and_async_hooks_are_validated_too(run: Runner, hook: str, fn: Any) -> None:
    saver = InMemorySaver()
    model = tool_then_answer()
    bad = create_agent(model, [add], middleware=[getattr(deco, hook)(name="Culprit")(fn)], checkpointer=saver)
    config = thread()
    with pytest.raises(HookValueError) as info:
        run(bad, q(), config=config)
    assert (info.value.middleware, info.value.hook) == ("Culprit", hook)
    result = run(create_agent(model, [add], checkpointer=saver), q("again"), config=config)
    assert result["messages"][-1].content == "done"


class NoteState(AgentState):
    note: NotRequired[str]


def test_a_failed_attempts_extended_update_never_reaches_state(run: Runner) -> None:
    attempts: list[int] = []

    @deco.wrap_model_call(name="Retry")
    def retry(request: ModelRequest[Any], handler: Any) -> Any:
        try:
            return handler(request)
        except ValueError:
            return handler(request)

    @deco.wrap_model_call(name="Check")
    def check(request: ModelRequest[Any], handler: Any) -> Any:
        response = handler(request)
        if len(attempts) == 1:
            raise ValueError("first attempt rejected")
        return response

    @deco.wrap_model_call(name="Note", state_schema=NoteState)
    def note(request: ModelRequest[Any], handler: Any) -> Any:
        attempts.append(1)
        response = handler(request)
        if len(attempts) == 1:
            return ExtendedModelResponse(response, Command(update={"note": "from the failed attempt"}))
        return response

    agent = create_agent(ScriptedChatModel(["a", "b"]), middleware=[retry, check, note], checkpointer=InMemorySaver())
    result = run(agent, q(), config=thread())
    assert len(attempts) == 2
    assert "note" not in result
    assert [m.content for m in result["messages"]] == ["q", "b"]


def test_a_failed_attempts_update_is_dropped_when_an_outer_layer_gives_up(run: Runner) -> None:
    @deco.wrap_model_call(name="Fallback")
    def fallback(request: ModelRequest[Any], handler: Any) -> Any:
        try:
            return handler(request)
        except ValueError:
            return AIMessage("fallback")

    @deco.wrap_model_call(name="Check")
    def check(request: ModelRequest[Any], handler: Any) -> Any:
        handler(request)
        raise ValueError("rejected")

    @deco.wrap_model_call(name="Note", state_schema=NoteState)
    def note(request: ModelRequest[Any], handler: Any) -> Any:
        return ExtendedModelResponse(handler(request), Command(update={"note": "stale"}))

    agent = create_agent(ScriptedChatModel(["a"]), middleware=[fallback, check, note], checkpointer=InMemorySaver())
    result = run(agent, q(), config=thread())
    assert "note" not in result
    assert result["messages"][-1].content == "fallback"


# -- 5. tool failures ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "with-wrap_tool_call"])
def test_a_tool_failure_names_the_tool_and_the_call_and_points_at_the_fix(run: Runner, wrapped: bool) -> None:
    middleware = [deco.wrap_tool_call(name="Pass")(lambda request, handler: handler(request))] if wrapped else []
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("boom", {"x": 1}, id="call_42")]), "done"])
    agent = create_agent(model, [boom], middleware=middleware, checkpointer=InMemorySaver())
    with pytest.raises(RuntimeError) as info:
        run(agent, q(), config=thread())
    assert type(info.value) is RuntimeError and str(info.value) == "database is down"
    notes = getattr(info.value, "__notes__", [])
    assert [n for n in notes if "ToolErrorMiddleware" in n] == [notes[0]]  # LangGraph adds its own after ours
    assert notes[0] == (
        "While running the tool 'boom' (tool call id 'call_42'). To answer the model with the error instead, add "
        "ToolErrorMiddleware(on_error) to middleware=[...]; to retry the call, ToolRetryMiddleware(...)."
    )


def test_a_handled_tool_failure_has_no_note(run: Runner) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("boom", {"x": 1})]), "done"])
    agent = create_agent(model, [boom], middleware=[ToolErrorMiddleware(str)])
    result = run(agent, q())
    assert result["messages"][-1].content == "done"


# -- Done means: hook return values of every shape, for every hook kind -------------------------------------------
_message = st.sampled_from(
    [HumanMessage("h"), AIMessage("a"), ToolMessage("t", tool_call_id="nobody"), AIMessage("", id="fixed")]
)
_leaf = st.none() | st.integers(-2, 2) | st.text(max_size=3) | st.floats(allow_nan=False) | _message
_junk = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=3)
    | st.tuples(inner, inner)
    | st.dictionaries(st.sampled_from(["messages", "jump_to", "role", "content", "zzz"]), inner, max_size=2)
    | st.builds(Command, update=inner)
    | st.builds(lambda r: ModelResponse(result=r), inner),
    max_leaves=6,
)

KINDS = [
    "before_agent",
    "before_model",
    "after_model",
    "after_agent",
    "modify_model_request",
    "wrap_model_call",
    "before_tool",
    "after_tool",
    "wrap_tool_call",
]


def _with_messages(request: ModelRequest[Any], messages: Any) -> ModelRequest[Any]:
    """``request`` with ``messages`` as they are (``override`` would refuse a non-iterable itself)."""
    new = request.override(messages=[])
    object.__setattr__(new, "messages", messages)
    return new


def _shape(kind: str, value: Any, variant: int) -> Any:
    """A hook of ``kind`` returning ``value`` in one of several wrappings (its own container, or junk alone)."""
    if kind in ("before_agent", "before_model", "after_model", "after_agent"):
        returned = [value, {"messages": value}][variant % 2]
        return lambda state, runtime: returned
    if kind == "modify_model_request":
        return lambda request, state: [value, _with_messages(request, value)][variant % 2]
    if kind == "wrap_model_call":

        def wrap_model(request: Any, handler: Any) -> Any:
            response = handler(request)
            return [
                value,
                ModelResponse(result=value),
                ExtendedModelResponse(response, value),
                ExtendedModelResponse(response, Command(update=value)),
            ][variant % 4]

        return wrap_model
    if kind == "before_tool":
        return lambda request: value
    if kind == "after_tool":
        return lambda request, result: value
    return lambda request, handler: [value, Command(update=value), handler(request) and value][variant % 3]


def _turn(agent: Any, text: str, config: Any, mode: str) -> Any:
    if mode == "invoke":
        return agent.invoke(q(text), config=config)
    return asyncio.run(agent.ainvoke(q(text), config=config))


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_junk, variant=st.integers(0, 11))
def test_any_hook_value_succeeds_or_names_the_culprit_and_the_thread_goes_on(
    mode: str, kind: str, value: Any, variant: int
) -> None:
    saver = InMemorySaver()
    model = tool_then_answer()
    good = create_agent(model, [add], checkpointer=saver)
    culprit = getattr(deco, kind)(name="Culprit")(_shape(kind, value, variant))
    bad = create_agent(model, [add], middleware=[culprit], checkpointer=saver)
    config = thread()
    _turn(good, "one", config, mode)
    before = good.get_state(config).values["messages"]
    try:
        _turn(bad, "two", config, mode)
    except MiddlewareError as err:
        assert err.middleware == "Culprit", err
        assert err.hook in (kind, "a" + kind), err
    after = good.get_state(config).values["messages"]
    assert after[: len(before)] == before
    assert all(isinstance(m, BaseMessage) for m in after)
    result = _turn(good, "three", config, mode)
    messages = result["messages"]
    assert messages[: len(before)] == before
    assert isinstance(messages[-1], AIMessage) and messages[-1].content == "done"
    assert all(isinstance(m, BaseMessage) for m in messages)


# -- 7. docs/errors.md ----------------------------------------------------------------------------------------------
def test_errors_page_has_a_section_per_fail_fast_error() -> None:
    import re
    from pathlib import Path

    import middleware_kit.errors as errors

    page = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## `([A-Za-z]+)`", page, flags=re.M))
    assert set(errors.__all__) <= sections
