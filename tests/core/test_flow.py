"""Flow hooks (a generator ``wrap_*_call``) driven without a graph, under the sync and the async driver."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphInterrupt
from langgraph.types import Interrupt

import middleware_kit.flow as flow_module
from middleware_kit import (
    AgentMiddleware,
    HookReturnError,
    MiddlewareConfigError,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
    wrap_model_call,
    wrap_tool_call,
)
from middleware_kit._engine.pipeline import build_pipeline
from middleware_kit.flow import ModelCallFlow, Sleep, ToolCallFlow
from middleware_kit.testing import (
    arun_model_chain,
    arun_tool_chain,
    make_request,
    run_model_chain,
    run_tool_chain,
    tool_call,
)


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def chain(driver: str, middleware: Any, request: Any, handler: Callable[[Any], Any]) -> Any:
    """Run the model chain with the sync driver, or the async one (with an async handler) on a fresh loop."""
    if driver == "sync":
        return run_model_chain(middleware, request, handler)

    async def ahandler(req: Any) -> Any:
        return handler(req)

    return asyncio.run(arun_model_chain(middleware, request, ahandler))  # type: ignore[arg-type]


def tool_chain(driver: str, middleware: Any, request: Any, handler: Callable[[Any], Any]) -> Any:
    if driver == "sync":
        return run_tool_chain(middleware, request, handler)

    async def ahandler(req: Any) -> Any:
        return handler(req)

    return asyncio.run(arun_tool_chain(middleware, request, ahandler))  # type: ignore[arg-type]


class Retry(AgentMiddleware):
    """Retries TimeoutError up to ``attempts`` times, sleeping 1s, 2s, ... between attempts."""

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts

    def wrap_model_call(self, request: ModelRequest[Any]) -> ModelCallFlow:
        for attempt in range(self.attempts):
            try:
                response = yield request
            except TimeoutError:
                if attempt == self.attempts - 1:
                    raise
                yield Sleep(attempt + 1)
                continue
            return response
        raise AssertionError("unreachable")


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """Both sleep functions patched: records (which, seconds) instead of sleeping."""
    record: list[tuple[str, float]] = []

    def fake_sleep(seconds: float) -> None:
        record.append(("sleep", seconds))

    async def fake_asleep(seconds: float) -> None:
        record.append(("asleep", seconds))

    monkeypatch.setattr(flow_module, "sleep", fake_sleep)
    monkeypatch.setattr(flow_module, "asleep", fake_asleep)
    return record


def failing_then(n_failures: int, answer: str = "ok") -> tuple[Callable[[Any], Any], list[Any]]:
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        if len(seen) <= n_failures:
            raise TimeoutError(f"attempt {len(seen)}")
        return AIMessage(answer)

    return handler, seen


def test_flow_calls_the_handler_n_times_and_sleeps_with_the_mode_sleep(
    driver: str, slept: list[tuple[str, float]]
) -> None:
    handler, seen = failing_then(2)
    response = chain(driver, Retry(3), make_request(), handler)
    assert isinstance(response, ModelResponse)
    assert response.result[0].content == "ok"
    assert len(seen) == 3
    expected = "sleep" if driver == "sync" else "asleep"
    assert slept == [(expected, 1), (expected, 2)]


def test_handler_exception_is_raised_at_the_yield_and_may_propagate(
    driver: str, slept: list[tuple[str, float]]
) -> None:
    handler, seen = failing_then(5)
    with pytest.raises(TimeoutError, match="attempt 2"):
        chain(driver, Retry(2), make_request(), handler)
    assert len(seen) == 2


def test_flow_is_recognized_by_the_decorator_and_shown_in_the_plan(driver: str) -> None:
    @wrap_model_call
    def upper(request: ModelRequest[Any]) -> ModelCallFlow:
        response = yield request.override(messages=[*request.messages, AIMessage("extra")])
        return AIMessage(str(response.result[0].content).upper())

    seen: list[int] = []

    def handler(request: Any) -> Any:
        seen.append(len(request.messages))
        return AIMessage("shout")

    response = chain(driver, upper, make_request(["hi"]), handler)
    assert response.result[0].content == "SHOUT"  # an AIMessage return is normalized like any wrap hook's
    assert seen == [2]
    layer = build_pipeline([upper], client_tools=()).model_layers[0]
    assert layer.mode == "flow"


def test_async_driver_runs_on_the_event_loop_thread() -> None:
    threads: list[int] = []

    @wrap_model_call
    def where(request: ModelRequest[Any]) -> ModelCallFlow:
        threads.append(threading.get_ident())
        response = yield request
        threads.append(threading.get_ident())
        return response

    async def handler(request: Any) -> Any:
        return AIMessage("ok")

    async def main() -> int:
        await arun_model_chain(where, make_request(), handler)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads == [loop_thread, loop_thread]


def test_short_circuit_without_calling_the_handler(driver: str) -> None:
    @wrap_model_call
    def cached(request: ModelRequest[Any]) -> ModelCallFlow:
        if request.messages[-1].content == "cached?":
            return AIMessage("from cache")
        return (yield request)

    def handler(request: Any) -> Any:
        raise AssertionError("the model must not be called")

    assert chain(driver, cached, make_request(["cached?"]), handler).result[0].content == "from cache"


def test_returning_none_is_the_usual_forgot_return_error(driver: str) -> None:
    @wrap_model_call
    def forgot(request: ModelRequest[Any]) -> Any:
        yield request

    with pytest.raises(HookReturnError, match='forget "return handler') as info:
        chain(driver, forgot, make_request(), lambda r: AIMessage("x"))
    assert (info.value.middleware, info.value.hook) == ("forgot", "wrap_model_call")


@given(bad=st.one_of(st.none(), st.integers(), st.text(), st.just(AIMessage("x")), st.lists(st.integers())))
@settings(max_examples=25, deadline=None)
def test_yielding_anything_but_a_request_or_sleep_is_refused(bad: object) -> None:
    closed: list[bool] = []

    @wrap_model_call
    def odd(request: ModelRequest[Any]) -> Any:
        try:
            yield bad
        finally:
            closed.append(True)
        return AIMessage("never")

    for driver in ("sync", "async"):
        closed.clear()
        with pytest.raises(HookReturnError, match=r"odd\.wrap_model_call is a flow hook") as info:
            chain(driver, odd, make_request(), lambda r: AIMessage("x"))
        assert info.value.hook == "wrap_model_call"
        assert closed == [True]  # the generator was closed: its finally blocks ran


def test_a_tool_flow_must_yield_a_tool_call_request(driver: str) -> None:
    @wrap_tool_call
    def wrong(request: ToolCallRequest) -> Any:
        yield make_request()
        return None

    req = ToolCallRequest(tool_call("add", {"a": 1, "b": 2}), None, {}, None)
    with pytest.raises(HookReturnError, match="ToolCallRequest"):
        tool_chain(driver, wrong, req, lambda r: ToolMessage("x", tool_call_id="1"))


def test_tool_flow_retries_and_replaces_the_result(driver: str, slept: list[tuple[str, float]]) -> None:
    @wrap_tool_call
    def retry_tool(request: ToolCallRequest) -> ToolCallFlow:
        try:
            result = yield request
        except ValueError:
            yield Sleep(0.5)
            result = yield request
        assert isinstance(result, ToolMessage)
        return ToolMessage(f"[{result.content}]", tool_call_id=result.tool_call_id)

    calls: list[int] = []

    def handler(request: ToolCallRequest) -> ToolMessage:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("flaky")
        return ToolMessage("3", tool_call_id=request.tool_call["id"] or "")

    req = ToolCallRequest(tool_call("add", {"a": 1, "b": 2}), None, {}, None)
    result = tool_chain(driver, retry_tool, req, handler)
    assert isinstance(result, ToolMessage) and result.content == "[3]"
    assert len(calls) == 2 and len(slept) == 1


def test_a_swallowed_interrupt_is_re_raised(driver: str) -> None:
    caught: list[BaseException] = []

    @wrap_model_call
    def swallow(request: ModelRequest[Any]) -> ModelCallFlow:
        try:
            return (yield request)
        except GraphInterrupt as exc:  # thrown in at the yield, then swallowed
            caught.append(exc)
            return AIMessage("fallback")

    def handler(request: Any) -> Any:
        raise GraphInterrupt((Interrupt(value="review"),))

    with pytest.raises(GraphInterrupt):
        chain(driver, swallow, make_request(), handler)
    assert len(caught) == 1


def test_flows_nest_with_classic_hooks(driver: str) -> None:
    order: list[str] = []

    @wrap_model_call
    def outer(request: ModelRequest[Any]) -> ModelCallFlow:
        order.append("outer>")
        response = yield request
        order.append("<outer")
        return response

    class Classic(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            order.append("classic>")
            response = handler(request)
            order.append("<classic")
            return response

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            order.append("classic>")
            response = await handler(request)
            order.append("<classic")
            return response

    @wrap_model_call
    def inner(request: ModelRequest[Any]) -> ModelCallFlow:
        order.append("inner>")
        first = yield request
        second = yield request  # the handler may be called any number of times
        order.append("<inner")
        return first if first.result[0].content < second.result[0].content else second

    answers = iter(["b", "a"])
    response = chain(driver, [outer, Classic(), inner], make_request(), lambda r: AIMessage(next(answers)))
    assert response.result[0].content == "a"
    assert order == ["outer>", "classic>", "inner>", "<inner", "<classic", "<outer"]


def test_signature_is_validated_at_build() -> None:
    class TakesHandler(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:  # a generator with a handler argument
            yield request

    with pytest.raises(MiddlewareConfigError, match=r"takes only the request") as info:
        build_pipeline([TakesHandler()], client_tools=())
    assert (info.value.middleware, info.value.hook) == ("TakesHandler", "wrap_model_call")

    @wrap_tool_call
    def kw_only(*, request: Any) -> Any:
        yield request

    with pytest.raises(MiddlewareConfigError, match=r"takes only the request"):
        build_pipeline([kw_only], client_tools=())


def test_a_flow_with_an_async_twin_is_refused() -> None:
    class Both(AgentMiddleware):
        def wrap_tool_call(self, request: ToolCallRequest) -> ToolCallFlow:
            return (yield request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    with pytest.raises(MiddlewareConfigError, match="Remove awrap_tool_call"):
        build_pipeline([Both()], client_tools=())


def test_sleep_is_a_frozen_value() -> None:
    pause = Sleep(1.5)
    assert pause == Sleep(1.5) and pause.seconds == 1.5
    with pytest.raises(AttributeError):
        pause.seconds = 2  # type: ignore[misc]
