"""Build-time validation: names, items, tools; and the composed chains without a graph."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphInterrupt
from langgraph.types import Interrupt

from middleware_kit import (
    AgentMiddleware,
    ExtendedModelResponse,
    HookSignatureError,
    MiddlewareConfigError,
    ModelResponse,
    ToolCallRequest,
    before_model,
    create_agent,
    hook_config,
    modify_model_request,
    wrap_model_call,
    wrap_tool_call,
)
from middleware_kit.testing import (
    ScriptedChatModel,
    TraceRecorder,
    arun_model_chain,
    arun_tool_chain,
    make_request,
    run_model_chain,
    run_tool_chain,
    tool_call,
)
from tests.conftest import add


def test_duplicate_names_are_refused_with_the_fix() -> None:
    @before_model
    def audit(state: Any, runtime: Any) -> None: ...

    @before_model(name="audit")
    def other(state: Any, runtime: Any) -> None: ...

    with pytest.raises(MiddlewareConfigError, match=r"Two middlewares are named 'audit'.*name=") as err:
        create_agent(ScriptedChatModel([]), middleware=[audit, other])
    assert (err.value.middleware, err.value.hook) == ("audit", "name")


def test_the_same_instance_twice_is_a_duplicate() -> None:
    mw = TraceRecorder("A")
    with pytest.raises(MiddlewareConfigError, match="named 'A'"):
        create_agent(ScriptedChatModel([]), middleware=[mw, mw])


@pytest.mark.parametrize("name", ["", "a|b", "x:y"])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(MiddlewareConfigError, match="name"):
        create_agent(ScriptedChatModel([]), middleware=[TraceRecorder(name)])


def test_a_class_instead_of_an_instance_is_explained() -> None:
    with pytest.raises(MiddlewareConfigError, match=r"pass an instance: TraceRecorder\(\.\.\.\)"):
        create_agent(ScriptedChatModel([]), middleware=[TraceRecorder])  # type: ignore[list-item]
    with pytest.raises(MiddlewareConfigError, match="decorator was listed itself"):
        create_agent(ScriptedChatModel([]), middleware=[before_model])  # type: ignore[list-item]
    with pytest.raises(MiddlewareConfigError, match=r"middleware=\[\.\.\.\]"):
        create_agent(ScriptedChatModel([]), middleware=TraceRecorder("A"))  # type: ignore[arg-type]


def test_middleware_tools_must_be_base_tools() -> None:
    class Bad(AgentMiddleware):
        tools = (lambda x: x,)  # type: ignore[assignment]

    with pytest.raises(MiddlewareConfigError, match="not a BaseTool"):
        create_agent(ScriptedChatModel([]), middleware=[Bad()])


def test_model_must_be_a_chat_model_instance_or_a_model_string() -> None:
    with pytest.raises(TypeError, match="chat model instance") as err:
        create_agent(3)  # type: ignore[arg-type]
    assert (err.value.middleware, err.value.hook) == ("create_agent", "model")  # type: ignore[attr-defined]
    # A model string is resolved through its provider package; without the package the error names it.
    with pytest.raises(MiddlewareConfigError, match="pip install -U langchain-groq"):
        create_agent("groq:llama-3.1-8b-instant")
    with pytest.raises(TypeError, match="system_prompt"):
        create_agent(ScriptedChatModel([]), system_prompt=3)  # type: ignore[arg-type]


def test_run_model_chain_without_a_graph_nests_first_outermost() -> None:
    trace: list[str] = []
    response = run_model_chain(
        [TraceRecorder("A", trace), TraceRecorder("B", trace)], make_request(), lambda r: AIMessage("hi")
    )
    assert response == ModelResponse(result=[AIMessage("hi")])
    assert trace == [
        "A.modify_model_request", "B.modify_model_request",
        "A.wrap_model_call>", "B.wrap_model_call>", "B.wrap_model_call<", "A.wrap_model_call<",
    ]


async def test_arun_model_chain_bridges_sync_wrappers_and_calls_the_model() -> None:
    @wrap_model_call
    def upper(request: Any, handler: Any) -> Any:
        response = handler(request)
        return AIMessage(response.result[0].content.upper())

    @modify_model_request
    async def prompt(request: Any, state: Any) -> Any:
        return request.override(system_prompt="sys")

    model = ScriptedChatModel(["quiet"])
    response = await arun_model_chain([prompt, upper], make_request(model=model))
    assert response.result[0].content == "QUIET"
    assert model.calls[0].messages[0].content == "sys"


def test_extended_response_is_unwrapped_for_outer_layers() -> None:
    seen: list[Any] = []

    @wrap_model_call
    def outer(request: Any, handler: Any) -> Any:
        seen.append(handler(request))
        return seen[-1]

    @wrap_model_call
    def inner(request: Any, handler: Any) -> Any:
        return ExtendedModelResponse(model_response=handler(request))

    run_model_chain([outer, inner], make_request(), lambda r: AIMessage("x"))
    assert type(seen[0]) is ModelResponse


def test_run_tool_chain_orders_before_wrap_after() -> None:
    trace: list[str] = []
    request = ToolCallRequest(tool_call("add", {"a": 1, "b": 2}), add, {"messages": []})
    result = run_tool_chain([TraceRecorder("A", trace), TraceRecorder("B", trace)], request)
    assert isinstance(result, ToolMessage) and result.content == "3"
    assert trace == [
        "A.before_tool", "B.before_tool",
        "A.wrap_tool_call>", "B.wrap_tool_call>", "B.wrap_tool_call<", "A.wrap_tool_call<",
        "B.after_tool", "A.after_tool",
    ]


async def test_arun_tool_chain() -> None:
    @wrap_tool_call
    def short(request: Any, handler: Any) -> ToolMessage:
        return ToolMessage("cached", tool_call_id=request.tool_call["id"])

    request = ToolCallRequest(tool_call("add", {"a": 1, "b": 2}), add, {"messages": []})
    result = await arun_tool_chain(short, request)
    assert isinstance(result, ToolMessage) and result.content == "cached"


def test_swallowed_interrupt_is_re_raised_by_the_chain() -> None:
    interrupt = GraphInterrupt((Interrupt(value="stop"),))

    @wrap_model_call
    def careless(request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except Exception:
            raise RuntimeError("converted") from None

    @wrap_model_call
    def interrupting(request: Any, handler: Any) -> Any:
        raise interrupt

    with pytest.raises(GraphInterrupt) as err:
        run_model_chain([careless, interrupting], make_request(), lambda r: AIMessage("x"))
    assert err.value is interrupt


def test_chain_is_reentrant_across_calls() -> None:
    calls: list[int] = []

    def twice(request: Any, handler: Any) -> Any:
        handler(request)
        return handler(request)

    counter = iter(range(100))
    layers = [wrap_model_call(name="outer")(twice), wrap_model_call(name="inner")(twice)]
    run_model_chain(layers, make_request(), lambda r: (calls.append(next(counter)), AIMessage("x"))[1])
    assert calls == [0, 1, 2, 3]


async def test_consecutive_sync_wrappers_share_one_thread_hop_under_async() -> None:
    import threading

    threads: dict[str, int] = {}

    def make(name: str) -> Any:
        @wrap_model_call(name=name)
        def layer(request: Any, handler: Any) -> Any:
            threads[name] = threading.get_ident()
            return handler(request)

        return layer

    @wrap_model_call
    async def middle(request: Any, handler: Any) -> Any:
        threads["middle"] = threading.get_ident()
        return await handler(request)

    main = threading.get_ident()
    layers = [make("s1"), make("s2"), middle, make("s3")]
    response = await arun_model_chain(layers, make_request(), lambda r: AIMessage("x"))
    assert response.result[0].content == "x"
    assert threads["s1"] == threads["s2"] != main  # one hop for the run of two sync layers
    assert threads["middle"] == main  # async layers stay on the loop
    assert threads["s3"] != main


def test_run_model_chain_returns_the_commands_of_extended_responses_inner_first() -> None:
    from langgraph.types import Command

    def with_update(name: str) -> Any:
        @wrap_model_call(name=name)
        def w(request: Any, handler: Any) -> Any:
            return ExtendedModelResponse(model_response=handler(request), command=Command(update={"notes": [name]}))

        return w

    result = run_model_chain([with_update("outer"), with_update("inner")], make_request(), lambda r: AIMessage("x"))
    assert isinstance(result, ExtendedModelResponse)
    assert result.model_response.result[0].content == "x"
    assert result.command is not None and result.command.update == [("notes", ["inner"]), ("notes", ["outer"])]


# -- per-class facts are found once per class, and stay right ----------------------------------------------------
class _Counting(AgentMiddleware[Any, Any]):
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name = name
        self.calls = calls

    def before_model(self, state: Any, runtime: Any) -> None:
        self.calls.append(f"{self.name}.before_model")


def test_instances_of_one_class_keep_their_own_names_and_hooks() -> None:
    calls: list[str] = []
    agent = create_agent(ScriptedChatModel(["ok"]), middleware=[_Counting("a", calls), _Counting("b", calls)])
    agent.invoke({"messages": [HumanMessage("hi")]})
    assert calls == ["a.before_model", "b.before_model"]
    plan = agent.middleware_plan  # type: ignore[attr-defined]
    assert [(h.middleware, h.phase) for h in plan.hooks] == [("a", "before_model"), ("b", "before_model")]


def test_a_hook_patched_on_the_class_after_a_build_is_used_by_the_next_build(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    mw = _Counting("a", calls)
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw])

    def patched(self: Any, state: Any, runtime: Any) -> None:
        calls.append("patched")

    monkeypatch.setattr(_Counting, "before_model", patched)
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw]).invoke({"messages": [HumanMessage("hi")]})
    assert calls == ["patched"]

    def bad(self: Any, state: Any) -> None: ...

    monkeypatch.setattr(_Counting, "before_model", bad)
    with pytest.raises(HookSignatureError, match=r"a\.before_model has the signature"):
        create_agent(ScriptedChatModel(["ok"]), middleware=[mw])


def test_an_instance_level_hook_is_honoured_and_checked_on_every_build() -> None:
    calls: list[str] = []
    create_agent(ScriptedChatModel(["ok"]), middleware=[_Counting("a", calls)])  # the class is now checked
    mw = _Counting("b", calls)
    mw.before_model = lambda state, runtime: calls.append("instance")  # type: ignore[method-assign]
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw]).invoke({"messages": [HumanMessage("hi")]})
    assert calls == ["instance"]

    def one_parameter(state: Any) -> None: ...

    mw.before_model = one_parameter  # type: ignore[method-assign,assignment]
    for _ in range(2):
        with pytest.raises(HookSignatureError, match=r"b\.before_model"):
            create_agent(ScriptedChatModel(["ok"]), middleware=[mw])


def test_a_bad_hook_fails_every_build_not_only_the_first() -> None:
    class Bad(AgentMiddleware[Any, Any]):
        def wrap_model_call(self, request: Any) -> Any:  # not a flow: a plain function taking only the request
            return None

    for _ in range(2):
        with pytest.raises(HookSignatureError, match=r"Bad\.wrap_model_call"):
            create_agent(ScriptedChatModel(["ok"]), middleware=[Bad()])


def test_an_undeclared_tools_jump_depends_on_the_agent_not_the_class() -> None:
    class Router(AgentMiddleware[Any, Any]):
        @hook_config(can_jump_to=["tools"])
        def before_model(self, state: Any, runtime: Any) -> None:
            return None

    create_agent(ScriptedChatModel(["ok"]), [add], middleware=[Router()])  # the class passes its own checks
    with pytest.raises(MiddlewareConfigError, match="no tools to run"):
        create_agent(ScriptedChatModel(["ok"]), middleware=[Router()])
