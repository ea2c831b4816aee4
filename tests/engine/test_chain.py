"""Wrap chains as pure functions: how layers compose (first listed = outermost, as a recorded trace), re-entrancy,
closure under composition, thread hops, normalization and swallowed interrupts. No agent is built: layers are made
by ``chain``'s own constructors and called through ``compose`` and ``call_sync``/``call_async``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Generator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphInterrupt
from langgraph.types import Command, Interrupt

from middleware_kit._engine.chain import (
    CallState,
    Layer,
    call_async,
    call_sync,
    compose,
    model_request_layer,
    tool_hooks_layer,
    wrap_model_layer,
    wrap_tool_layer,
)
from middleware_kit.errors import HookReturnError, HookValueError
from middleware_kit.types import ExtendedModelResponse, ModelRequest, ModelResponse, ToolCallRequest

pytestmark = pytest.mark.parametrize("mode", ["invoke", "ainvoke"])

Trace = list[str]
KINDS = ("sync", "async", "both", "flow")


def request() -> ModelRequest[Any]:
    from middleware_kit.testing import make_request

    return make_request()


def recording_layer(name: str, kind: str, trace: Trace, *, calls: int = 1) -> Layer[Any, Any]:
    """A ``wrap_model_call`` written as ``kind`` that records entering and leaving, calling its handler ``calls``
    times (0: it answers itself)."""

    def sync_fn(req: ModelRequest[Any], handler: Callable[[Any], Any]) -> Any:
        trace.append(f"{name}>")
        response: Any = ModelResponse(result=[AIMessage(f"{name} answered")])
        for _ in range(calls):
            response = handler(req)
        trace.append(f"{name}<")
        return response

    async def async_fn(req: ModelRequest[Any], handler: Callable[[Any], Any]) -> Any:
        trace.append(f"{name}>")
        response: Any = ModelResponse(result=[AIMessage(f"{name} answered")])
        for _ in range(calls):
            response = await handler(req)
        trace.append(f"{name}<")
        return response

    def flow_fn(req: ModelRequest[Any]) -> Generator[Any, Any, Any]:
        trace.append(f"{name}>")
        response: Any = ModelResponse(result=[AIMessage(f"{name} answered")])
        for _ in range(calls):
            response = yield req
        trace.append(f"{name}<")
        return response

    if kind == "flow":
        return wrap_model_layer(name, flow_fn, None)
    return wrap_model_layer(name, sync_fn if kind in ("sync", "both") else None, async_fn if kind != "sync" else None)


def bases(trace: Trace, label: str = "model") -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    def base(req: Any) -> ModelResponse[Any]:
        trace.append(label)
        return ModelResponse(result=[AIMessage(label)])

    async def abase(req: Any) -> ModelResponse[Any]:
        return base(req)

    return base, abase


def run(layers: list[Layer[Any, Any]], trace: Trace, mode: str, req: Any = None) -> tuple[Any, CallState]:
    chain, achain = compose(layers, *bases(trace))
    req = request() if req is None else req
    if mode == "invoke":
        return call_sync(chain, req)
    return asyncio.run(call_async(achain, req))


# -- the one ordering rule ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_first_listed_is_outermost_whatever_the_hooks_form(mode: str, kind: str) -> None:
    trace: Trace = []
    result, _ = run([recording_layer(n, kind, trace) for n in "ABC"], trace, mode)
    assert trace == ["A>", "B>", "C>", "model", "C<", "B<", "A<"]
    assert result.result[0].content == "model"


def test_layers_of_mixed_forms_compose_in_list_order(mode: str) -> None:
    trace: Trace = []
    layers = [recording_layer(n, k, trace) for n, k in zip("ABCD", ("sync", "flow", "async", "both"), strict=True)]
    run(layers, trace, mode)
    assert trace == ["A>", "B>", "C>", "D>", "model", "D<", "C<", "B<", "A<"]


def test_no_layer_is_the_base_handler(mode: str) -> None:
    trace: Trace = []
    result, state = run([], trace, mode)
    assert trace == ["model"]
    assert result.result[0].content == "model"
    assert state.commands == {} and state.bubble is None


# -- handlers are re-entrant -------------------------------------------------------------------------------------------
def test_a_wrapper_may_call_its_handler_several_times_or_not_at_all(mode: str) -> None:
    trace: Trace = []
    retry, inner = recording_layer("R", "both", trace, calls=2), recording_layer("I", "flow", trace)
    run([retry, inner], trace, mode)
    assert trace == ["R>", "I>", "model", "I<", "I>", "model", "I<", "R<"]
    trace.clear()
    cache = recording_layer("C", "both", trace, calls=0)
    result, _ = run([cache, inner], trace, mode)
    assert trace == ["C>", "C<"]
    assert result.result[0].content == "C answered"


# -- composition is closed -------------------------------------------------------------------------------------------
def test_a_composed_chain_is_itself_a_layer(mode: str) -> None:
    """Bundling A and B into one layer gives the same onion as listing them."""
    trace: Trace = []
    inner = [recording_layer("A", "sync", trace), recording_layer("B", "flow", trace)]

    def never(req: Any) -> Any:
        raise AssertionError("the other mode's handler")

    async def anever(req: Any) -> Any:
        raise AssertionError("the other mode's handler")

    bundle: Layer[Any, Any] = Layer(
        "AB",
        "wrap_model_call",
        "sync+async",
        lambda nxt, depth: compose(inner, nxt, anever)[0],
        lambda anxt, depth: compose(inner, never, anxt)[1],
    )
    run([bundle, recording_layer("C", "async", trace)], trace, mode)
    assert trace == ["A>", "B>", "C>", "model", "C<", "B<", "A<"]


# -- sync/async bridging -----------------------------------------------------------------------------------------------
def test_consecutive_sync_only_layers_share_one_thread_hop_under_ainvoke(mode: str) -> None:
    threads: dict[str, int] = {}

    def sync_layer(name: str) -> Layer[Any, Any]:
        def fn(req: Any, handler: Callable[[Any], Any]) -> Any:
            threads[name] = threading.get_ident()
            return handler(req)

        return wrap_model_layer(name, fn, None)

    async def async_fn(req: Any, handler: Callable[[Any], Any]) -> Any:
        threads["C"] = threading.get_ident()
        return await handler(req)

    trace: Trace = []
    run([sync_layer("A"), sync_layer("B"), wrap_model_layer("C", None, async_fn)], trace, mode)
    assert threads["A"] == threads["B"]  # one hop for the run of sync-only layers
    if mode == "ainvoke":
        assert threads["C"] != threads["A"]  # the async layer is back on the event loop
    else:
        assert set(threads.values()) == {threading.get_ident()}  # everything inline under invoke


def test_layer_modes_are_what_the_middleware_defined(mode: str) -> None:
    trace: Trace = []
    assert [recording_layer("x", k, trace).mode for k in KINDS] == ["sync", "async", "sync+async", "flow"]


# -- what a layer returns ----------------------------------------------------------------------------------------------
def test_outer_layers_receive_a_plain_response_and_the_command_is_kept_by_depth(mode: str) -> None:
    seen: list[object] = []
    command: Command[Any] = Command(update={"note": "x"})

    def outer(req: Any, handler: Callable[[Any], Any]) -> Any:
        seen.append(handler(req))
        return seen[-1]

    def inner(req: Any, handler: Callable[[Any], Any]) -> Any:
        return ExtendedModelResponse(model_response=handler(req), command=command)

    result, state = run([wrap_model_layer("O", outer, None), wrap_model_layer("I", inner, None)], [], mode)
    assert type(seen[0]) is ModelResponse and type(result) is ModelResponse
    assert state.commands == {1: command}


def test_only_the_last_call_of_a_layer_keeps_its_command(mode: str) -> None:
    calls = iter(range(10))

    def retry(req: Any, handler: Callable[[Any], Any]) -> Any:
        handler(req)
        return handler(req)

    def inner(req: Any, handler: Callable[[Any], Any]) -> Any:
        return ExtendedModelResponse(model_response=handler(req), command=Command(update={"n": next(calls)}))

    _, state = run([wrap_model_layer("R", retry, None), wrap_model_layer("I", inner, None)], [], mode)
    assert [c.update for c in state.commands.values()] == [{"n": 1}]


def test_an_aimessage_is_normalized_to_a_response(mode: str) -> None:
    def answer(req: Any, handler: Callable[[Any], Any]) -> Any:
        return AIMessage("direct")

    result, _ = run([wrap_model_layer("A", answer, None)], [], mode)
    assert type(result) is ModelResponse and result.result[0].content == "direct"


def test_the_usual_answer_passes_each_layer_as_it_is_and_anything_else_is_checked_at_each(mode: str) -> None:
    """A response of one AIMessage goes out through every layer as the same object; a layer that changes the
    inner layer's response in place (its list grows a non-message) is refused by name, not waved through."""
    seen: list[Any] = []

    def keep(req: Any, handler: Callable[[Any], Any]) -> Any:
        response = handler(req)
        seen.append(response)
        return response

    result, _ = run([wrap_model_layer("A", keep, None), wrap_model_layer("B", keep, None)], [], mode)
    assert seen[0] is seen[1] is result and [m.content for m in result.result] == ["model"]

    def spoil(req: Any, handler: Callable[[Any], Any]) -> Any:
        response = handler(req)
        response.result.append("not a message")
        return response

    with pytest.raises(HookValueError) as info:
        run([wrap_model_layer("Keep", keep, None), wrap_model_layer("Spoil", spoil, None),
             wrap_model_layer("Inner", keep, None)], [], mode)
    assert info.value.middleware == "Spoil" and info.value.hook == "wrap_model_call"


def test_a_wrapper_returning_none_names_the_middleware_and_the_hook(mode: str) -> None:
    def forgot(req: Any, handler: Callable[[Any], Any]) -> Any:
        handler(req)

    with pytest.raises(HookReturnError) as info:
        run([wrap_model_layer("Forgetful", forgot, None)], [], mode)
    assert info.value.middleware == "Forgetful" and info.value.hook == "wrap_model_call"
    assert "Forgetful.wrap_model_call" in str(info.value)


def test_a_flow_yielding_something_else_than_a_request_names_the_hook(mode: str) -> None:
    def confused(req: Any) -> Generator[Any, Any, Any]:
        return (yield "not a request")

    with pytest.raises(HookReturnError) as info:
        run([wrap_model_layer("Confused", confused, None)], [], mode)
    assert "Confused.wrap_model_call" in str(info.value)


# -- LangGraph control flow passes through every layer ---------------------------------------------------------------
def test_an_interrupt_swallowed_by_a_wrapper_is_raised_again(mode: str) -> None:
    def swallow(req: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(req)
        except Exception:
            return ModelResponse(result=[AIMessage("fallback")])

    def pause(req: Any, handler: Callable[[Any], Any]) -> Any:
        raise GraphInterrupt((Interrupt(value="approve?", id="i1"),))

    with pytest.raises(GraphInterrupt):
        run([wrap_model_layer("Fallback", swallow, None), wrap_model_layer("Pause", pause, None)], [], mode)


# -- the model request layer and the tool hooks layer -----------------------------------------------------------------
def test_modify_model_request_rewrites_the_request_once_per_call_of_its_layer(mode: str) -> None:
    trace: Trace = []
    prompts: list[str | None] = []

    def modify(req: ModelRequest[Any], state: Any) -> ModelRequest[Any]:
        trace.append("modify")
        return req.override(system_prompt="Be brief.")

    def look(req: ModelRequest[Any], handler: Callable[[Any], Any]) -> Any:
        prompts.append(req.system_prompt)
        return handler(req)

    layers = [model_request_layer("M", modify, None), recording_layer("R", "sync", trace, calls=2),
              wrap_model_layer("L", look, None)]
    run(layers, trace, mode)
    assert trace == ["modify", "R>", "model", "model", "R<"]
    assert prompts == ["Be brief.", "Be brief."]


def tool_request() -> ToolCallRequest:
    return ToolCallRequest({"name": "search", "args": {}, "id": "c1", "type": "tool_call"}, None, {"messages": []})


def run_tools(layers: list[Layer[Any, Any]], trace: Trace, mode: str) -> Any:
    def tool(req: ToolCallRequest) -> ToolMessage:
        trace.append("tool")
        return ToolMessage("ran", tool_call_id=req.tool_call["id"] or "", name="search")

    async def atool(req: ToolCallRequest) -> ToolMessage:
        return tool(req)

    chain, achain = compose(layers, tool, atool)
    if mode == "invoke":
        return call_sync(chain, tool_request())[0]
    return asyncio.run(call_async(achain, tool_request()))[0]


def test_before_tool_may_skip_the_tool_and_after_tool_may_replace_the_result(mode: str) -> None:
    trace: Trace = []

    def before(req: ToolCallRequest) -> ToolMessage:
        trace.append("before")
        return ToolMessage("skipped", tool_call_id=req.tool_call["id"] or "")

    def after(req: ToolCallRequest, result: Any) -> ToolMessage:
        trace.append(f"after({result.content})")
        return ToolMessage("replaced", tool_call_id=req.tool_call["id"] or "")

    def wrap(req: ToolCallRequest, handler: Callable[[Any], Any]) -> Any:
        trace.append("wrap")
        return handler(req)

    outer = tool_hooks_layer("Outer", (None, None), (after, None))
    skipper = tool_hooks_layer("Skipper", (before, None), (None, None))
    result = run_tools([outer, skipper, wrap_tool_layer("W", wrap, None)], trace, mode)
    assert trace == ["before", "after(skipped)"]  # neither the inner wrapper nor the tool ran
    assert result.content == "replaced"
    assert (outer.hook, skipper.hook) == ("after_tool", "before_tool")


def test_a_tool_wrapper_answering_another_call_is_refused(mode: str) -> None:
    def wrong(req: ToolCallRequest, handler: Callable[[Any], Any]) -> Any:
        return ToolMessage("x", tool_call_id="someone-else")

    with pytest.raises(Exception, match=r"W\.wrap_tool_call"):
        run_tools([wrap_tool_layer("W", wrong, None)], [], mode)
