"""ModelRetryMiddleware and ToolRetryMiddleware: fault injection with the scripted model, the waits recorded."""

from __future__ import annotations

import asyncio
import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Annotated, Any

import pytest
from langchain_core.exceptions import ModelAuthenticationError, ModelRateLimitError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from middleware_kit import MiddlewareConfigError, MiddlewareError, create_agent, wrap_model_call
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.retry import (
    ModelRetryMiddleware,
    RetryAttempt,
    ToolRetryMiddleware,
    calculate_delay,
    current_attempt,
    current_retry,
    is_retryable,
    retry_after_seconds,
)
from middleware_kit.testing import ScriptedChatModel, make_request, run_model_chain, tool_call
from tests.conftest import Runner, add

Q = {"messages": [HumanMessage("q")]}


class FakeResponse:
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.status_code = status
        self.headers = headers or {}


class APIError(Exception):
    """Shaped like a provider SDK's status error (``exc.response.headers``, ``exc.status_code``)."""

    def __init__(self, message: str, status: int = 500, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status_code = status
        self.response = FakeResponse(status, headers)


def stream_custom(agent: Any, inp: Any, mode: str, **kwargs: Any) -> list[Any]:
    if mode == "invoke":
        return list(agent.stream(inp, stream_mode="custom", **kwargs))

    async def collect() -> list[Any]:
        return [chunk async for chunk in agent.astream(inp, stream_mode="custom", **kwargs)]

    return asyncio.run(collect())


def flaky_tool(failures: list[BaseException | None]) -> Any:
    """A tool ``flaky(x)`` that raises the given exceptions in turn (None: succeeds), then returns ``"fine"``."""
    calls = {"n": 0}

    @tool
    def flaky(x: int) -> str:
        """Sometimes fails."""
        calls["n"] += 1
        error = failures[calls["n"] - 1] if calls["n"] <= len(failures) else None
        if error is not None:
            raise error
        return "fine"

    flaky.metadata = {"calls": calls}
    return flaky


def calls_of(flaky: Any) -> int:
    return int(flaky.metadata["calls"]["n"])


def calls_tool(name: str = "flaky", **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[tool_call(name, args or {"x": 1})])


# -- model: transient failures, backoff -------------------------------------------------------------------------
def test_transient_failures_then_success(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([ConnectionError("reset"), TimeoutError("slow"), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(jitter=False, sleep=delays.append)])
    result = run(agent, Q)
    assert result["messages"][-1].content == "ok"
    assert model.call_count == 3
    assert delays == [1.0, 2.0]  # initial_delay * backoff_factor ** n


def test_backoff_is_capped_and_jittered(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([ConnectionError()] * 5 + ["ok"])
    retry = ModelRetryMiddleware(
        max_retries=5, initial_delay=0.5, backoff_factor=3.0, max_delay=4.0, jitter=False, sleep=delays.append
    )
    run(create_agent(model, middleware=[retry]), Q)
    assert delays == [0.5, 1.5, 4.0, 4.0, 4.0]

    jittered: list[float] = []
    model = ScriptedChatModel([ConnectionError()] * 5 + ["ok"])
    retry = ModelRetryMiddleware(max_retries=5, initial_delay=0.5, backoff_factor=3.0, max_delay=4.0,
                                 sleep=jittered.append)
    run(create_agent(model, middleware=[retry]), Q)
    for delay, base in zip(jittered, [0.5, 1.5, 4.0, 4.0, 4.0], strict=True):
        assert base * 0.75 <= delay <= min(4.0, base * 1.25)


def test_backoff_factor_zero_means_a_constant_delay(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([ConnectionError()] * 3 + ["ok"])
    retry = ModelRetryMiddleware(max_retries=3, backoff_factor=0, initial_delay=0.3, jitter=False,
                                 sleep=delays.append)
    run(create_agent(model, middleware=[retry]), Q)
    assert delays == [0.3, 0.3, 0.3]


def test_max_retries_zero_never_retries(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([ConnectionError("down")])
    result = run(create_agent(model, middleware=[ModelRetryMiddleware(max_retries=0, sleep=delays.append)]), Q)
    assert model.call_count == 1 and delays == []
    assert result["messages"][-1].content == "Model call failed after 1 attempt with ConnectionError: down"


# -- model: giving up -----------------------------------------------------------------------------------------------
def test_permanent_failure_continue_ends_with_a_message(run: Runner) -> None:
    model = ScriptedChatModel([ConnectionError("down")], cycle=True)
    agent = create_agent(model, [add], middleware=[ModelRetryMiddleware(sleep=lambda s: None)])
    result = run(agent, Q)
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert last.content == "Model call failed after 3 attempts with ConnectionError: down"
    assert model.call_count == 3
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]


def test_permanent_failure_error_reraises_the_last_error(run: Runner) -> None:
    model = ScriptedChatModel([ConnectionError("one"), ConnectionError("two"), ConnectionError("three")])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(on_failure="error", sleep=lambda s: None)])
    with pytest.raises(ConnectionError, match="three"):
        run(agent, Q)
    assert model.call_count == 3


def test_permanent_failure_callable_writes_the_message(run: Runner) -> None:
    model = ScriptedChatModel([APIError("overloaded", 529)], cycle=True)
    retry = ModelRetryMiddleware(max_retries=1, on_failure=lambda exc: f"Sorry, the service is down ({exc}).",
                                 sleep=lambda s: None)
    result = run(create_agent(model, middleware=[retry]), Q)
    assert result["messages"][-1].content == "Sorry, the service is down (overloaded)."
    assert model.call_count == 2


def test_on_failure_callable_must_return_text(run: Runner) -> None:
    retry = ModelRetryMiddleware(max_retries=0, on_failure=lambda exc: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(MiddlewareError, match=r"on_failure returned int"):
        run(create_agent(ScriptedChatModel([ConnectionError()]), middleware=[retry]), Q)


# -- model: what is not retried -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "error",
    [
        ModelAuthenticationError("bad key"),
        APIError("unauthorized", 401),
        APIError("bad request", 400),
        APIError("not found", 404),
        TypeError("bug"),
        AttributeError("bug"),
    ],
    ids=lambda e: f"{type(e).__name__}-{getattr(e, 'status_code', '')}",
)
def test_non_retryable_errors_pass_at_once(run: Runner, error: Exception) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([error, "never"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(sleep=delays.append)])  # on_failure="continue"
    with pytest.raises(type(error)) as raised:
        run(agent, Q)
    assert raised.value is error  # unchanged
    assert model.call_count == 1 and delays == []


def test_retryable_errors_by_type_and_status(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([ModelRateLimitError("slow down"), APIError("busy", 503), APIError("late", 408), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(max_retries=3, sleep=delays.append)])
    assert run(agent, Q)["messages"][-1].content == "ok"
    assert len(delays) == 3


def test_retry_on_types_and_predicate(run: Runner) -> None:
    model = ScriptedChatModel([ValueError("not listed"), "never"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(retry_on=(TimeoutError,), sleep=lambda s: None)])
    with pytest.raises(ValueError, match="not listed"):
        run(agent, Q)

    model = ScriptedChatModel([TimeoutError(), TimeoutError(), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(retry_on=TimeoutError, sleep=lambda s: None)])
    assert run(agent, Q)["messages"][-1].content == "ok"

    model = ScriptedChatModel([ValueError("transient"), ValueError("fatal"), "never"])
    retry = ModelRetryMiddleware(retry_on=lambda exc: "transient" in str(exc), sleep=lambda s: None)
    with pytest.raises(ValueError, match="fatal"):
        run(create_agent(model, middleware=[retry]), Q)
    assert model.call_count == 2


def test_middleware_errors_are_never_retried(run: Runner) -> None:
    @wrap_model_call
    def forgot(request: Any, handler: Any) -> Any:
        handler(request)

    model = ScriptedChatModel(["ok"], cycle=True)
    agent = create_agent(model, middleware=[ModelRetryMiddleware(retry_on=(Exception,), sleep=lambda s: None),
                                            forgot])
    with pytest.raises(MiddlewareError, match=r"forgot\.wrap_model_call returned None"):
        run(agent, Q)
    assert model.call_count == 1


# -- model: Retry-After, deadline, budget ---------------------------------------------------------------------------
def test_retry_after_seconds_is_honoured(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([APIError("rate limited", 429, {"retry-after": "7"}), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(jitter=False, sleep=delays.append)])
    assert run(agent, Q)["messages"][-1].content == "ok"
    assert delays == [7.0]  # the header wins over the 1s backoff


def test_retry_after_shorter_than_the_backoff_does_not_shorten_it(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([APIError("rate limited", 429, {"Retry-After-Ms": "200"}), "ok"])
    run(create_agent(model, middleware=[ModelRetryMiddleware(jitter=False, sleep=delays.append)]), Q)
    assert delays == [1.0]


def test_retry_after_http_date_is_honoured(run: Runner) -> None:
    delays: list[float] = []
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    model = ScriptedChatModel([APIError("rate limited", 429, {"Retry-After": when}), "ok"])
    run(create_agent(model, middleware=[ModelRetryMiddleware(jitter=False, sleep=delays.append)]), Q)
    assert len(delays) == 1 and 25 <= delays[0] <= 30


def test_retry_after_beyond_max_delay_gives_up(run: Runner, mode: str) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([APIError("come back tomorrow", 429, {"retry-after": "86400"}), "never"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(sleep=delays.append)])
    events = stream_custom(agent, Q, mode)
    assert delays == [] and model.call_count == 1
    assert events == [{"event": "retry_gave_up", "middleware": "ModelRetryMiddleware", "attempts": 1,
                       "error": "APIError", "reason": "retry_after"}]


def test_retry_after_can_be_ignored(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([APIError("rate limited", 429, {"retry-after": "86400"}), "ok"])
    retry = ModelRetryMiddleware(jitter=False, respect_retry_after=False, sleep=delays.append)
    assert run(create_agent(model, middleware=[retry]), Q)["messages"][-1].content == "ok"
    assert delays == [1.0]


def test_deadline_stops_early(run: Runner, mode: str) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([ConnectionError()] * 6)
    retry = ModelRetryMiddleware(max_retries=5, max_elapsed=2.5, jitter=False, sleep=delays.append)
    events = stream_custom(create_agent(model, middleware=[retry]), Q, mode)
    assert delays == [1.0]  # 1s slept + the next 2s would end past 2.5s
    assert model.call_count == 2
    assert events[-1]["event"] == "retry_gave_up" and events[-1]["reason"] == "max_elapsed"


@dataclass
class Ctx:
    retry_budget: int


def test_budget_from_context_caps_retries_across_model_calls(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([
        ConnectionError("first"), calls_tool("add", a=1, b=2),       # call 1: one retry (spends the budget)
        ConnectionError("second"),                                  # call 2: no budget left
        ConnectionError("again"), "ok",                             # next run: the budget is back
    ])
    retry = ModelRetryMiddleware(budget=lambda runtime: runtime.context.retry_budget, sleep=delays.append)
    saver = InMemorySaver()
    agent = create_agent(model, [add], middleware=[retry], context_schema=Ctx, checkpointer=saver)
    config = {"configurable": {"thread_id": "budget"}}
    result = run(agent, Q, config=config, context=Ctx(retry_budget=1))
    assert result["messages"][-1].content == "Model call failed after 1 attempt with ConnectionError: second"
    assert model.call_count == 3 and len(delays) == 1
    assert agent.get_state(config).values["retry_budget_spent"] == {"ModelRetryMiddleware": 1}
    assert "retry_budget_spent" not in result  # private

    result = run(agent, Q, config=config, context=Ctx(retry_budget=1))
    assert result["messages"][-1].content == "ok"
    assert agent.get_state(config).values["retry_budget_spent"] == {"ModelRetryMiddleware": 1}


def test_budget_as_an_int_and_zero(run: Runner) -> None:
    model = ScriptedChatModel([ConnectionError("x"), ConnectionError("y"), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(budget=5, sleep=lambda s: None)])
    assert run(agent, Q)["messages"][-1].content == "ok"

    model = ScriptedChatModel([ConnectionError("x"), "never"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(budget=0, sleep=lambda s: None)])
    assert run(agent, Q)["messages"][-1].content.startswith("Model call failed after 1 attempt")


def test_budget_function_may_return_none_for_no_cap_and_must_return_an_int(run: Runner) -> None:
    model = ScriptedChatModel([ConnectionError(), ConnectionError(), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(budget=lambda rt: None, sleep=lambda s: None)])
    assert run(agent, Q)["messages"][-1].content == "ok"

    agent = create_agent(ScriptedChatModel(["ok"]),
                         middleware=[ModelRetryMiddleware(budget=lambda rt: "many")])  # type: ignore[arg-type,return-value]
    with pytest.raises(MiddlewareConfigError, match="budget function returned 'many'") as err:
        run(agent, Q)
    assert err.value.hook == "budget"


def test_no_budget_adds_no_state_and_no_node() -> None:
    agent = create_agent(ScriptedChatModel(["ok"]), middleware=[ModelRetryMiddleware()])
    assert agent.middleware_plan.nodes == ("model",)
    budgeted = create_agent(ScriptedChatModel(["ok"]), middleware=[ModelRetryMiddleware(budget=3)])
    assert "ModelRetryMiddleware.before_agent" in budgeted.middleware_plan.nodes


# -- model: what inner layers see, events -----------------------------------------------------------------------
def test_attempt_number_is_visible_inside_and_does_not_reach_the_provider(run: Runner) -> None:
    seen: list[tuple[int, RetryAttempt | None]] = []

    @wrap_model_call
    def inner(request: Any, handler: Any) -> Any:
        seen.append((current_attempt(), current_retry()))
        return handler(request)

    model = ScriptedChatModel([ConnectionError("a"), TimeoutError("b"), "ok"])
    run(create_agent(model, middleware=[ModelRetryMiddleware(sleep=lambda s: None), inner]), Q)
    assert [n for n, _ in seen] == [1, 2, 3]
    infos = [info for _, info in seen]
    assert all(info is not None and info.middleware == "ModelRetryMiddleware" and info.max_attempts == 3
               for info in infos)
    assert [type(info.previous_error).__name__ for info in infos if info is not None] == [
        "NoneType", "ConnectionError", "TimeoutError"]
    assert all(call.kwargs == {} for call in model.calls)  # nothing leaked into the model call
    assert current_attempt() == 1 and current_retry() is None  # outside any retry


def test_each_retry_is_a_custom_stream_event(mode: str) -> None:
    model = ScriptedChatModel([ConnectionError(), APIError("busy", 503), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(jitter=False, sleep=lambda s: None)])
    events = stream_custom(agent, Q, mode)
    assert events == [
        {"event": "retry", "middleware": "ModelRetryMiddleware", "attempt": 1, "delay": 1.0,
         "error": "ConnectionError"},
        {"event": "retry", "middleware": "ModelRetryMiddleware", "attempt": 2, "delay": 2.0, "error": "APIError"},
    ]


def test_one_instance_serves_concurrent_runs() -> None:
    retry = ModelRetryMiddleware(jitter=False, budget=1, sleep=lambda s: asyncio.sleep(0.01))

    async def one(i: int) -> str:
        model = ScriptedChatModel([ConnectionError(), f"ok {i}"])
        result = await create_agent(model, middleware=[retry]).ainvoke(Q)
        return str(result["messages"][-1].content)

    async def main() -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(8)))

    assert asyncio.run(main()) == [f"ok {i}" for i in range(8)]


def test_one_instance_serves_concurrent_threads() -> None:
    # Each call builds its own tenacity policy, so runs in parallel threads never see each other's attempts or waits.
    retry = ModelRetryMiddleware(max_retries=3, jitter=False, initial_delay=0.001, sleep=time.sleep)

    def one(i: int) -> tuple[str, int]:
        model = ScriptedChatModel([*(ConnectionError(f"{i}") for _ in range(i % 4)), f"ok {i}"])
        result = create_agent(model, middleware=[retry]).invoke(Q)
        return str(result["messages"][-1].content), model.call_count

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(one, range(16)))
    assert outcomes == [(f"ok {i}", i % 4 + 1) for i in range(16)]


def test_cancelling_a_run_during_a_wait_stops_retrying() -> None:
    # The wait is asyncio.sleep on the loop (no thread): cancelling the run cancels it, and no attempt follows.
    model = ScriptedChatModel([ConnectionError(), "never"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(jitter=False, initial_delay=30)])

    async def main() -> None:
        task = asyncio.create_task(agent.ainvoke(Q))
        while model.call_count == 0:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.05)

    started = time.monotonic()
    asyncio.run(main())
    assert model.call_count == 1 and time.monotonic() - started < 5


# -- interrupts -----------------------------------------------------------------------------------------------------
def test_interrupts_pass_through_model_retry(run: Runner) -> None:
    delays: list[float] = []
    entered: list[str] = []

    @wrap_model_call
    def approval(request: Any, handler: Any) -> Any:
        entered.append("approval")
        answer = interrupt("call the model?")
        return handler(request.override(system_prompt=f"approved: {answer}"))

    model = ScriptedChatModel(["ok"])
    retry = ModelRetryMiddleware(retry_on=(Exception,), sleep=delays.append)  # even when told to retry everything
    agent = create_agent(model, middleware=[retry, approval], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    paused = run(agent, Q, config=config)
    assert paused["__interrupt__"][0].value == "call the model?"
    assert entered == ["approval"] and delays == [] and model.call_count == 0

    result = run(agent, Command(resume="yes"), config=config)
    assert result["messages"][-1].content == "ok"
    assert model.calls[0].messages[0].content == "approved: yes"
    assert delays == []


def test_interrupts_pass_through_tool_retry(run: Runner) -> None:
    delays: list[float] = []

    @tool
    def confirm(x: int) -> str:
        """Ask a human first."""
        return f"human said {interrupt('ok?')}"

    model = ScriptedChatModel([calls_tool("confirm"), "done"])
    retry = ToolRetryMiddleware(retry_on=(Exception,), on_failure="continue", sleep=delays.append)
    agent = create_agent(model, [confirm], middleware=[retry], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert run(agent, Q, config=config)["__interrupt__"][0].value == "ok?"
    result = run(agent, Command(resume="sure"), config=config)
    assert [m.content for m in result["messages"] if isinstance(m, ToolMessage)] == ["human said sure"]
    assert delays == []


# -- tools --------------------------------------------------------------------------------------------------------
def test_tool_transient_failures_then_success(run: Runner, mode: str) -> None:
    flaky = flaky_tool([ConnectionError("reset"), TimeoutError("slow")])
    model = ScriptedChatModel([calls_tool(), "done"])
    agent = create_agent(model, [flaky], middleware=[ToolRetryMiddleware(jitter=False, sleep=lambda s: None)])
    events = stream_custom(agent, Q, mode)
    assert calls_of(flaky) == 3
    assert events == [
        {"event": "retry", "middleware": "ToolRetryMiddleware", "attempt": 1, "delay": 1.0,
         "error": "ConnectionError", "tool": "flaky"},
        {"event": "retry", "middleware": "ToolRetryMiddleware", "attempt": 2, "delay": 2.0,
         "error": "TimeoutError", "tool": "flaky"},
    ]
    answer = model.calls[1].messages[-1]
    assert isinstance(answer, ToolMessage) and answer.content == "fine" and answer.status == "success"


def test_tool_permanent_failure_continue_tells_the_model(run: Runner) -> None:
    flaky = flaky_tool([ConnectionError("down")] * 10)
    model = ScriptedChatModel([calls_tool(), "sorry"])
    result = run(create_agent(model, [flaky], middleware=[ToolRetryMiddleware(sleep=lambda s: None)]), Q)
    message = result["messages"][2]
    assert isinstance(message, ToolMessage) and message.status == "error" and message.name == "flaky"
    assert message.content == (
        "Tool 'flaky' failed after 3 attempts with ConnectionError: down. Try different arguments or another approach."
    )
    assert model.calls[1].messages[-1].content == message.content  # the model saw it
    assert result["messages"][-1].content == "sorry"


def test_tool_permanent_failure_error_and_callable(run: Runner) -> None:
    flaky = flaky_tool([ConnectionError("down")] * 10)
    agent = create_agent(ScriptedChatModel([calls_tool(), "never"]), [flaky],
                         middleware=[ToolRetryMiddleware(max_retries=1, on_failure="error", sleep=lambda s: None)])
    with pytest.raises(ConnectionError, match="down"):
        run(agent, Q)
    assert calls_of(flaky) == 2

    flaky = flaky_tool([ConnectionError("down")] * 10)
    retry = ToolRetryMiddleware(max_retries=1, on_failure=lambda exc: f"gave up: {exc!r}", sleep=lambda s: None)
    result = run(create_agent(ScriptedChatModel([calls_tool(), "ok"]), [flaky], middleware=[retry]), Q)
    assert result["messages"][2].content == "gave up: ConnectionError('down')"
    assert result["messages"][2].status == "error"


def test_tool_non_retryable_error_passes_at_once(run: Runner) -> None:
    flaky = flaky_tool([TypeError("bad code")])
    agent = create_agent(ScriptedChatModel([calls_tool(), "never"]), [flaky],
                         middleware=[ToolRetryMiddleware(sleep=lambda s: None)])
    with pytest.raises(TypeError, match="bad code"):
        run(agent, Q)
    assert calls_of(flaky) == 1


def test_tools_filter_limits_which_tools_are_retried(run: Runner) -> None:
    flaky = flaky_tool([ConnectionError("once")])
    other = flaky_tool([ConnectionError("once")])
    other.name = "other"
    retry = ToolRetryMiddleware(tools=[flaky], sleep=lambda s: None)
    agent = create_agent(ScriptedChatModel([calls_tool("flaky"), "done"]), [flaky, other], middleware=[retry])
    assert run(agent, Q)["messages"][2].content == "fine"

    agent = create_agent(ScriptedChatModel([calls_tool("other"), "never"]), [flaky, other], middleware=[retry])
    with pytest.raises(ConnectionError):
        run(agent, Q)
    assert calls_of(other) == 1


def test_tool_budget_is_spent_in_state(run: Runner) -> None:
    flaky = flaky_tool([ConnectionError("a"), ConnectionError("b"), None, ConnectionError("c")])
    model = ScriptedChatModel([calls_tool(), calls_tool(), "done"])
    saver = InMemorySaver()
    agent = create_agent(model, [flaky], middleware=[ToolRetryMiddleware(budget=2, sleep=lambda s: None)],
                         checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    result = run(agent, Q, config=config)
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    # call 1 fails twice (2 retries spent), succeeds on attempt 3; call 2 fails once with nothing left to spend
    assert [a.content for a in answers] == [
        "fine", "Tool 'flaky' failed after 1 attempt with ConnectionError: c. Try different arguments or another "
        "approach."]
    assert agent.get_state(config).values["retry_budget_spent"] == {"ToolRetryMiddleware": 2}


def test_real_sleeps_are_within_bounds(run: Runner) -> None:
    """With the real sleep: the gaps between attempts are at least the computed backoff."""
    stamps: list[float] = []

    def failing(messages: list[BaseMessage]) -> str:
        stamps.append(time.monotonic())
        raise ConnectionError("flaky")

    def answering(messages: list[BaseMessage]) -> str:
        stamps.append(time.monotonic())
        return "ok"

    model = ScriptedChatModel([failing, failing, answering])
    retry = ModelRetryMiddleware(initial_delay=0.05, backoff_factor=2.0, jitter=False)
    assert run(create_agent(model, middleware=[retry]), Q)["messages"][-1].content == "ok"
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    for gap, backoff in zip(gaps, [0.05, 0.1], strict=True):
        assert backoff * 0.95 <= gap < backoff + 2.0


# -- validation and helpers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 1.5}, "max_retries"),
        ({"initial_delay": -0.1}, "initial_delay"),
        ({"max_delay": -1}, "max_delay"),
        ({"backoff_factor": -2}, "backoff_factor"),
        ({"max_elapsed": 0}, "max_elapsed"),
        ({"budget": -1}, "budget"),
        ({"retry_on": (ValueError, "nope")}, "retry_on"),
        ({"retry_on": 3}, "retry_on"),
        ({"on_failure": "ignore"}, "on_failure"),
    ],
)
@pytest.mark.parametrize("cls", [ModelRetryMiddleware, ToolRetryMiddleware])
def test_invalid_parameters_raise_naming_the_parameter(cls: type, kwargs: dict[str, Any], param: str) -> None:
    with pytest.raises(ValueError, match=param) as err:
        cls(**kwargs)
    assert isinstance(err.value, MiddlewareConfigError) and err.value.hook == param


def test_tools_must_be_names_or_tools() -> None:
    with pytest.raises(MiddlewareConfigError, match="tools must hold"):
        ToolRetryMiddleware(tools=[42])  # type: ignore[list-item]


def test_legacy_on_failure_values_still_work() -> None:
    with pytest.warns(DeprecationWarning, match="on_failure='error'"):
        assert ToolRetryMiddleware(on_failure="raise").on_failure == "error"  # type: ignore[arg-type]
    with pytest.warns(DeprecationWarning, match="on_failure='continue'"):
        assert ModelRetryMiddleware(on_failure="return_message").on_failure == "continue"  # type: ignore[arg-type]


def test_is_retryable() -> None:
    assert is_retryable(ConnectionError()) and is_retryable(ValueError()) and is_retryable(APIError("x", 500))
    assert is_retryable(APIError("x", 429)) and is_retryable(ModelRateLimitError("x"))
    assert not is_retryable(APIError("x", 403)) and not is_retryable(ModelAuthenticationError("x"))
    assert not is_retryable(TypeError()) and not is_retryable(KeyboardInterrupt())
    assert not is_retryable(MiddlewareConfigError("x", middleware="m", hook="h"))


def test_retry_after_seconds() -> None:
    assert retry_after_seconds(ValueError()) is None
    assert retry_after_seconds(APIError("x", 429, {"retry-after": "2.5"})) == 2.5
    assert retry_after_seconds(APIError("x", 429, {"RETRY-AFTER": "3"})) == 3.0
    assert retry_after_seconds(APIError("x", 429, {"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert retry_after_seconds(APIError("x", 429, {"retry-after": "soon"})) is None
    assert retry_after_seconds(APIError("x", 429, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0


def test_harness_runs_the_chain_without_a_graph() -> None:
    delays: list[float] = []
    model = ScriptedChatModel([ConnectionError(), "ok"])
    response = run_model_chain(ModelRetryMiddleware(jitter=False, sleep=delays.append), make_request(model=model))
    assert response.result[-1].content == "ok" and delays == [1.0]  # type: ignore[union-attr]


def test_the_flow_sleep_is_the_patch_point(run: Runner, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """The waits are flow sleeps (``yield Sleep(delay)``): patch ``middleware_kit.flow.sleep``/``asleep``."""
    import middleware_kit.flow as flow_module

    slept: list[tuple[str, float]] = []

    def fake_sleep(seconds: float) -> None:
        slept.append(("sleep", seconds))

    async def fake_asleep(seconds: float) -> None:
        slept.append(("asleep", seconds))

    monkeypatch.setattr(flow_module, "sleep", fake_sleep)
    monkeypatch.setattr(flow_module, "asleep", fake_asleep)
    model = ScriptedChatModel([ConnectionError(), TimeoutError(), "ok"])
    assert run(create_agent(model, middleware=[ModelRetryMiddleware(jitter=False)]), Q)["messages"][-1].content == "ok"
    kind = "sleep" if mode == "invoke" else "asleep"  # time.sleep under invoke, asyncio.sleep under ainvoke
    assert slept == [(kind, 1.0), (kind, 2.0)]


def test_the_hooks_are_single_flows() -> None:
    """One body (a flow) per hook; LangChain's (request, handler) signatures in both modes drive it."""
    import inspect

    assert inspect.isgeneratorfunction(ModelRetryMiddleware.model_call_flow)
    assert inspect.isgeneratorfunction(ToolRetryMiddleware.tool_call_flow)
    for cls, hook in ((ModelRetryMiddleware, "wrap_model_call"), (ToolRetryMiddleware, "wrap_tool_call")):
        assert hook not in cls.__dict__ and "a" + hook not in cls.__dict__
        assert list(inspect.signature(getattr(cls, hook)).parameters) == ["self", "request", "handler"]


def test_an_async_custom_sleep_is_awaited_to_completion(run: Runner) -> None:
    waited: list[float] = []

    async def nap(seconds: float) -> None:
        await asyncio.sleep(0)
        waited.append(seconds)

    model = ScriptedChatModel([ConnectionError(), "ok"])
    agent = create_agent(model, middleware=[ModelRetryMiddleware(jitter=False, sleep=nap)])
    assert run(agent, Q)["messages"][-1].content == "ok" and waited == [1.0]


def test_tool_budget_spend_merges_into_a_command_result(run: Runner) -> None:
    failures = [ConnectionError("once")]

    @tool
    def remember(fact: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Store a fact."""
        if failures:
            raise failures.pop()
        return Command(update={"messages": [ToolMessage(f"remembered {fact}", tool_call_id=tool_call_id)]})

    model = ScriptedChatModel([calls_tool("remember", fact="x"), "done"])
    agent = create_agent(model, [remember], middleware=[ToolRetryMiddleware(budget=3, sleep=lambda s: None)],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    result = run(agent, Q, config=config)
    assert result["messages"][2].content == "remembered x"
    assert agent.get_state(config).values["retry_budget_spent"] == {"ToolRetryMiddleware": 1}


# -- LangChain 1.5 compatibility --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "sentence"),
    [
        ({"max_retries": -1}, "max_retries must be >= 0"),
        ({"initial_delay": -1}, "initial_delay must be >= 0"),
        ({"max_delay": -1}, "max_delay must be >= 0"),
        ({"backoff_factor": -1}, "backoff_factor must be >= 0"),
        ({"initial_delay": -1, "backoff_factor": -1}, "initial_delay must be >= 0"),  # LangChain's order
    ],
)
@pytest.mark.parametrize("cls", [ModelRetryMiddleware, ToolRetryMiddleware])
def test_messages_start_with_langchains_sentence(cls: type, kwargs: dict[str, Any], sentence: str) -> None:
    with pytest.raises(ValueError) as err:
        cls(**kwargs)
    assert str(err.value).startswith(f"{sentence}. {cls.__name__}: got -1")
    assert isinstance(err.value, MiddlewareConfigError) and err.value.middleware == cls.__name__


@pytest.mark.parametrize(("legacy", "current"), [("raise", "error"), ("return_message", "continue")])
@pytest.mark.parametrize("cls", [ModelRetryMiddleware, ToolRetryMiddleware])
def test_deprecated_on_failure_warns_like_langchain_at_the_callers_line(cls: type, legacy: str, current: str) -> None:
    with pytest.warns(DeprecationWarning) as record:
        mw = cls(on_failure=legacy)
    assert str(record[0].message).startswith(
        f"on_failure='{legacy}' is deprecated and will be removed in a future version. Use "
        f"on_failure='{current}' instead."
    )
    assert record[0].filename == __file__  # points at the user's call, not into middleware_kit
    assert mw.on_failure == current


def test_deprecated_raise_behaves_like_error(run: Runner) -> None:
    with pytest.warns(DeprecationWarning):
        mw = ToolRetryMiddleware(max_retries=1, on_failure="raise", sleep=lambda s: None)  # type: ignore[arg-type]

    @tool
    def broken(x: int) -> str:
        """Always fails."""
        raise ConnectionError("down")

    model = ScriptedChatModel([calls_tool("broken", x=1), "never"])
    with pytest.raises(ConnectionError, match="down"):
        run(create_agent(model, [broken], middleware=[mw]), Q)


def test_calculate_delay_follows_langchains_formula() -> None:
    assert calculate_delay(0, backoff_factor=2.0, initial_delay=1.0, max_delay=60.0, jitter=False) == 1.0
    assert calculate_delay(3, backoff_factor=2.0, initial_delay=1.0, max_delay=60.0, jitter=False) == 8.0
    assert calculate_delay(10, backoff_factor=2.0, initial_delay=1.0, max_delay=60.0, jitter=False) == 60.0
    assert calculate_delay(5, backoff_factor=0.0, initial_delay=2.0, max_delay=60.0, jitter=False) == 2.0
    for n in range(8):
        delay = calculate_delay(n, backoff_factor=2.0, initial_delay=1.0, max_delay=10.0, jitter=True)
        base = min(10.0, 2.0**n)
        assert 0.75 * base <= delay <= min(10.0, 1.25 * base)  # ±25%, never above max_delay


def test_the_middleware_waits_what_calculate_delay_says(run: Runner) -> None:
    delays: list[float] = []
    model = ScriptedChatModel([ConnectionError(), ConnectionError(), ConnectionError(), "ok"])
    mw = ModelRetryMiddleware(max_retries=3, initial_delay=0.5, backoff_factor=3.0, jitter=False, sleep=delays.append)
    assert run(create_agent(model, middleware=[mw]), Q)["messages"][-1].content == "ok"
    assert delays == [
        calculate_delay(n, backoff_factor=3.0, initial_delay=0.5, max_delay=60.0, jitter=False) for n in range(3)
    ]


# -- frozen configuration ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [ModelRetryMiddleware, ToolRetryMiddleware])
def test_configuration_is_frozen(cls: type) -> None:
    mw = cls(max_retries=1)
    create_agent(ScriptedChatModel(["hi"]), middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError, match="cannot set 'max_retries'"):
        mw.max_retries = 5
    with pytest.raises(FrozenMiddlewareError):
        mw.on_failure = "error"
    assert mw.max_retries == 1


def test_replace_gives_a_working_changed_copy(run: Runner) -> None:
    delays: list[float] = []
    original = ModelRetryMiddleware(max_retries=0, jitter=False, sleep=delays.append)
    changed = original.replace(max_retries=2, budget=5)
    assert (original.max_retries, changed.max_retries, changed.budget) == (0, 2, 5)
    model = ScriptedChatModel([ConnectionError(), "ok"])
    agent = create_agent(model, middleware=[changed], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    assert run(agent, Q, config=config)["messages"][-1].content == "ok"
    assert agent.get_state(config).values["retry_budget_spent"] == {"ModelRetryMiddleware": 1}
    with pytest.raises(MiddlewareConfigError, match="max_retries must be >= 0"):
        original.replace(max_retries=-1)


def test_mutating_the_tools_list_afterwards_changes_nothing() -> None:
    names = ["search"]
    mw = ToolRetryMiddleware(tools=names)
    names.append("add")
    assert mw.tools_to_retry == frozenset({"search"})
    assert mw.replace().tools_to_retry == frozenset({"search"})
