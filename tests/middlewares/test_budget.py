"""BudgetMiddleware: run/thread/tenant limits in tokens and money, usage from usage_metadata or tiktoken, charges
from other middlewares, the escalation ladder, and tenant budgets shared by worker processes on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares._tokens import TiktokenCounter
from middleware_kit.middlewares.budget import (
    BudgetCheckInError,
    BudgetExceededError,
    BudgetLimit,
    BudgetMiddleware,
    ModelPrice,
    PriceTable,
    UnknownModelPriceError,
    charge,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add
from tests.helpers import kinds
from tests.integration.conftest import postgres_dsn  # noqa: F401 - the session fixture, used below

ROOT = Path(__file__).resolve().parents[2]


def used(n_in: int, n_out: int, text: str = "", calls: list[Any] | None = None, model: str | None = None) -> AIMessage:
    meta = {"model_name": model} if model else {}
    return AIMessage(text, tool_calls=calls or [], response_metadata=meta,
                     usage_metadata={"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out})


def adding(n_in: int = 80, n_out: int = 20) -> AIMessage:
    return used(n_in, n_out, calls=[tool_call("add", {"a": 1, "b": 2})])


def ask(text: str = "q") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def thread(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def assert_paired(messages: list[Any]) -> None:
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            answers = []
            for later in messages[i + 1 :]:
                if not isinstance(later, ToolMessage):
                    break
                answers.append(later.tool_call_id)
            assert sorted(answers) == sorted(c["id"] for c in message.tool_calls)


def events(agent: Any, inp: Any, mode: str, **kwargs: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run with stream_mode=["values", "custom"]; the last state and the custom events."""

    async def collect_async() -> list[tuple[str, Any]]:
        return [c async for c in agent.astream(inp, stream_mode=["values", "custom"], **kwargs)]

    chunks = (list(agent.stream(inp, stream_mode=["values", "custom"], **kwargs)) if mode == "invoke"
              else asyncio.run(collect_async()))
    values = [c for m, c in chunks if m == "values"]
    return values[-1], [c for m, c in chunks if m == "custom"]


# -- run and thread limits --------------------------------------------------------------------------------------
def test_run_limit_ends_with_a_message_and_closes_the_last_calls(run: Runner) -> None:
    model = ScriptedChatModel([adding()], cycle=True)  # 100 tokens a call, forever
    agent = create_agent(model, [add], middleware=[BudgetMiddleware(run=BudgetLimit(tokens=350))])
    result = run(agent, ask())
    assert model.call_count == 4  # 400 >= 350 after the 4th call
    assert result["messages"][-1].content == (
        "Budget exceeded: the run budget is spent (400/350 tokens); the run stopped here."
    )
    # The 4th answer's call was not run (its result would only feed a refused model call): closed, not dangling.
    closing = result["messages"][-2]
    assert isinstance(closing, ToolMessage) and closing.status == "error" and "budget is spent" in closing.text
    assert_paired(result["messages"])
    assert result["budget"]["run"] == {"input_tokens": 320, "output_tokens": 80, "total_tokens": 400, "cost": 0.0,
                                       "calls": 4}


def test_thread_limit_persists_and_run_limit_resets(run: Runner) -> None:
    model = ScriptedChatModel([used(60, 40, "hi")], cycle=True)
    budget = BudgetMiddleware(thread=BudgetLimit(tokens=300), run=BudgetLimit(tokens=100))
    agent = create_agent(model, middleware=[budget], checkpointer=InMemorySaver())
    for _ in range(3):
        assert run(agent, ask(), config=thread())["messages"][-1].content == "hi"
    result = run(agent, ask(), config=thread())
    assert result["messages"][-1].content.startswith("Budget exceeded: the thread budget is spent (300/300 tokens)")
    assert model.call_count == 3
    assert run(agent, ask(), config=thread("other"))["messages"][-1].content == "hi"


def test_exceeded_error_names_the_scope(run: Runner) -> None:
    model = ScriptedChatModel([adding()], cycle=True)
    agent = create_agent(model, [add], middleware=[BudgetMiddleware(run=BudgetLimit(tokens=150),
                                                                    on_exceeded="error")])
    with pytest.raises(BudgetExceededError) as err:
        run(agent, ask())
    assert err.value.scope == "run" and err.value.used["total_tokens"] == 200
    assert err.value.limit == BudgetLimit(tokens=150) and err.value.middleware == "BudgetMiddleware"
    assert "the run budget is spent (200/150 tokens)" in str(err.value) and "on_exceeded='end'" in str(err.value)


# -- money -------------------------------------------------------------------------------------------------------
def test_cost_from_the_price_table_longest_prefix_wins(run: Runner) -> None:
    prices = {"gpt-4o": ModelPrice(input=2.5, output=10.0), "gpt-4o-mini": (0.15, 0.6)}
    model = ScriptedChatModel([used(1_000_000, 100_000, "a", model="gpt-4o-2024-08-06"),
                               used(1_000_000, 100_000, "b", model="gpt-4o-mini-2024-07-18")], model_name="gpt-4o")
    agent = create_agent(model, middleware=[BudgetMiddleware(run=BudgetLimit(cost=100.0), prices=prices)],
                         checkpointer=InMemorySaver())
    run(agent, ask(), config=thread())
    first = agent.get_state(thread()).values["budget"]["run"]["cost"]
    assert first == pytest.approx(2.5 + 1.0)
    result = run(agent, ask(), config=thread())
    assert result["budget"]["run"]["cost"] == pytest.approx(0.15 + 0.06)
    assert result["budget"]["thread"]["cost"] == pytest.approx(3.5 + 0.21)


def test_cached_input_tokens_use_their_price() -> None:
    price = ModelPrice(input=1.0, output=2.0, cached_input=0.1)
    assert price.cost(1_000_000, 1_000_000, cached_input_tokens=400_000) == pytest.approx(0.6 + 0.04 + 2.0)
    assert PriceTable({"a": (1, 2)}).price_for("b") is None


def test_an_unpriced_model_is_refused_before_it_is_called(run: Runner) -> None:
    model = ScriptedChatModel(["never"])  # model_name "scripted"
    agent = create_agent(model, middleware=[BudgetMiddleware(run=BudgetLimit(cost=1.0), prices={"gpt-4o": (1, 1)})])
    with pytest.raises(UnknownModelPriceError) as err:
        run(agent, ask())
    assert model.call_count == 0
    assert "no price for model 'scripted'" in str(err.value) and "ModelPrice(input=" in str(err.value)


def test_tiktoken_counts_when_the_model_gives_no_usage(mode: str) -> None:
    model = ScriptedChatModel(["The answer is 42."])
    agent = create_agent(model, middleware=[BudgetMiddleware(run=BudgetLimit(tokens=10_000))],
                         system_prompt="Be brief.")
    result, seen = events(agent, ask("What is six times seven?"), mode)
    counter = TiktokenCounter("cl100k_base")
    sent = [SystemMessage("Be brief."), HumanMessage("What is six times seven?")]
    expected_in = counter(sent)
    expected_out = counter.text("The answer is 42.")
    usage = [e for e in seen if e["event"] == "budget_usage"]
    assert usage[0]["counted_by"] == "tiktoken"
    assert result["budget"]["run"]["input_tokens"] == expected_in
    assert result["budget"]["run"]["output_tokens"] == expected_out


# -- the ladder ----------------------------------------------------------------------------------------------------
def test_warning_once_per_run_then_switch_to_the_cheaper_model(mode: str) -> None:
    model = ScriptedChatModel([adding()], cycle=True)
    cheaper = ScriptedChatModel([adding(40, 10)], cycle=True, model_name="cheap")
    budget = BudgetMiddleware(run=BudgetLimit(tokens=500), warn_at=0.3, switch_at=0.6, cheaper_model=cheaper)
    agent = create_agent(model, [add], middleware=[budget])
    result, seen = events(agent, ask(), mode)
    # 100, 200, 300 (>= 60%: switch), then 50 a call on the cheaper model: 350, 400, 450, 500.
    assert model.call_count == 3 and cheaper.call_count == 4
    warnings = [e for e in seen if e["event"] == "budget_warning"]
    assert [(w["scope"], w["threshold"]) for w in warnings] == [("run", 0.3)]
    switched = [e for e in seen if e["event"] == "budget_model_switched"]
    assert len(switched) == 4 and switched[0]["to"] == "cheap"
    assert cheaper.calls[0].tools == ("add",)  # the cheaper model gets the same tools
    assert result["messages"][-1].content.startswith("Budget exceeded: the run budget is spent (500/500 tokens)")


def test_check_in_interrupt_continue_decline_and_bad_answer(run: Runner) -> None:
    model = ScriptedChatModel([adding()], cycle=True)
    budget = BudgetMiddleware(run=BudgetLimit(tokens=1000), check_in_at=0.2, warn_at=None)
    agent = create_agent(model, [add], middleware=[budget], checkpointer=InMemorySaver())
    assert "BudgetMiddleware.before_model" in agent.middleware_plan.nodes  # a node of its own (may_interrupt)
    out = run(agent, ask(), config=thread("c"))
    [pending] = out["__interrupt__"]
    assert pending.value["type"] == "budget_check_in" and pending.value["scope"] == "run"
    assert pending.value["used"]["total_tokens"] == 200 and model.call_count == 2
    with pytest.raises(BudgetCheckInError, match="resume with True"):
        run(agent, Command(resume="sure"), config=thread("c"))
    assert agent.get_state(thread("c")).interrupts  # still pending: nothing was poisoned
    out = run(agent, Command(resume={"continue": True}), config=thread("c"))
    # Continued once; asked again in the next run only. The run ends at the limit.
    assert "__interrupt__" not in out and model.call_count == 10
    assert out["messages"][-1].content.startswith("Budget exceeded")

    out = run(agent, ask(), config=thread("d"))
    assert out["__interrupt__"]
    out = run(agent, Command(resume=False), config=thread("d"))
    assert out["messages"][-1].content.startswith("Budget declined: the run budget is spent")
    assert_paired(out["messages"])


def test_no_check_in_means_no_extra_node() -> None:
    agent = create_agent(ScriptedChatModel(["x"]), middleware=[BudgetMiddleware(run=BudgetLimit(tokens=1))])
    assert agent.middleware_plan.nodes[:2] == ("BudgetMiddleware.before_agent", "model")
    assert "BudgetMiddleware.before_model" not in agent.middleware_plan.nodes


# -- charges from other middlewares ---------------------------------------------------------------------------------
class Critic(AgentMiddleware):
    """Asks its own model for a critique before each call, and charges it."""

    def __init__(self, critic: ScriptedChatModel) -> None:
        self.critic = critic

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        sent = [HumanMessage("critique: " + request.messages[-1].text)]
        answer = self.critic.invoke(sent, config={"tags": ["nostream"]})
        charge(request.runtime, middleware=self.name, response=answer, messages=sent, model=self.critic)
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        sent = [HumanMessage("critique: " + request.messages[-1].text)]
        answer = await self.critic.ainvoke(sent, config={"tags": ["nostream"]})
        charge(request.runtime, middleware=self.name, response=answer, messages=sent, model=self.critic)
        return await handler(request)


@pytest.mark.parametrize("position", ["outer", "inner"])
def test_middleware_calls_are_charged_to_their_middleware(mode: str, position: str) -> None:
    model = ScriptedChatModel([used(50, 50, "answer")], cycle=True)
    critic = Critic(ScriptedChatModel([used(20, 10, "fine")], cycle=True))
    budget = BudgetMiddleware(run=BudgetLimit(tokens=1000))
    stack = [critic, budget] if position == "outer" else [budget, critic]
    agent = create_agent(model, middleware=stack)
    result, seen = events(agent, ask(), mode)
    by = result["budget"]["by_source"]["run"]
    assert by["model"]["total_tokens"] == 100 and by["Critic"]["total_tokens"] == 30
    assert result["budget"]["run"]["total_tokens"] == 130 and result["budget"]["run"]["calls"] == 2
    charged = [e for e in seen if e["event"] == "usage_charged"]
    assert charged == [{"event": "usage_charged", "middleware": "Critic", "model": "scripted", "input_tokens": 20,
                        "output_tokens": 10, "counted_by": "usage_metadata"}]


def test_charges_count_against_the_limit(run: Runner) -> None:
    model = ScriptedChatModel([adding(10, 10)], cycle=True)
    critic = Critic(ScriptedChatModel([used(100, 0, "long critique")], cycle=True))
    agent = create_agent(model, [add], middleware=[BudgetMiddleware(run=BudgetLimit(tokens=250)), critic])
    result = run(agent, ask())
    assert model.call_count == 3  # 120 a call (critic 100 + model 20): stopped after 360 >= 250... at the 3rd check
    assert result["budget"]["by_source"]["run"]["Critic"]["calls"] == 3
    assert_paired(result["messages"])


def test_charge_counts_with_tiktoken_and_needs_something_to_count() -> None:
    sent = [HumanMessage("hello there")]
    event = charge(None, middleware="Mine", response=AIMessage("general kenobi"), messages=sent, model="gpt-4o")
    counter = TiktokenCounter("o200k_base")
    assert event["counted_by"] == "tiktoken" and event["input_tokens"] == counter(sent)
    assert event["output_tokens"] == counter.text("general kenobi")
    with pytest.raises(MiddlewareConfigError, match="pass usage="):
        charge(None, middleware="Mine", response=AIMessage("no usage"))


# -- tenants -----------------------------------------------------------------------------------------------------
def test_tenant_budget_spans_threads_and_tenants_are_separate(run: Runner) -> None:
    model = ScriptedChatModel([used(60, 40, "ok")], cycle=True)
    store = InMemoryStore()
    agent = create_agent(model, middleware=[BudgetMiddleware(tenant=BudgetLimit(tokens=300))], store=store,
                         checkpointer=InMemorySaver())
    answers = [run(agent, ask(), config=thread(f"t{i}"), context={"tenant_id": "acme"})["messages"][-1].content
               for i in range(4)]
    assert answers[:3] == ["ok"] * 3 and answers[3].startswith("Budget exceeded: the tenant budget is spent")
    assert run(agent, ask(), config=thread("t9"), context={"tenant_id": "globex"})["messages"][-1].content == "ok"
    items = store.search(("middleware_kit", "budget", "acme"))
    assert sorted(i.value["total_tokens"] for i in items) == [100, 100, 100]  # one item per thread


def test_tenant_limit_per_tenant_and_missing_tenant_or_store(run: Runner) -> None:
    plans = {"free": BudgetLimit(tokens=100), "pro": BudgetLimit(tokens=10_000)}
    model = ScriptedChatModel([used(60, 40, "ok")], cycle=True)
    budget = BudgetMiddleware(tenant=lambda t: plans[t.split(":")[0]])
    agent = create_agent(model, middleware=[budget], store=InMemoryStore())
    assert run(agent, ask(), context={"tenant_id": "free:1"})["messages"][-1].content == "ok"
    assert run(agent, ask(), context={"tenant_id": "free:1"})["messages"][-1].content.startswith("Budget exceeded")
    assert run(agent, ask(), context={"tenant_id": "pro:1"})["messages"][-1].content == "ok"
    with pytest.raises(MiddlewareConfigError, match="has no tenant id"):
        run(agent, ask())
    no_store = create_agent(model, middleware=[budget])
    with pytest.raises(MiddlewareConfigError, match="store=") as err:
        run(no_store, ask(), context={"tenant_id": "pro:1"})
    assert err.value.middleware == "BudgetMiddleware" and err.value.hook == "tenant"


def test_concurrent_threads_of_one_tenant_lose_no_update() -> None:
    """Twenty threads of one tenant at once (threads and tasks): the store's total is every call's usage."""
    model = ScriptedChatModel([used(7, 3, "ok")], cycle=True)
    store = InMemoryStore()
    agent = create_agent(model, middleware=[BudgetMiddleware(tenant=BudgetLimit(tokens=10**9))], store=store,
                         checkpointer=InMemorySaver())

    def turn(i: int) -> None:
        for _ in range(3):
            agent.invoke(ask(), thread(f"s{i}"), context={"tenant_id": "acme"})

    async def aturns() -> None:
        async def one(i: int) -> None:
            for _ in range(3):
                await agent.ainvoke(ask(), thread(f"a{i}"), context={"tenant_id": "acme"})

        await asyncio.gather(*(one(i) for i in range(10)))

    with ThreadPoolExecutor(10) as pool:
        list(pool.map(turn, range(10)))
    asyncio.run(aturns())
    total = sum(i.value["total_tokens"] for i in store.search(("middleware_kit", "budget", "acme"), limit=1000))
    assert model.call_count == 60 and total == 600


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(costs=st.lists(st.integers(min_value=1, max_value=500), min_size=1, max_size=12),
       limit=st.integers(min_value=1, max_value=3000))
def test_the_run_stops_exactly_when_the_limit_is_reached(costs: list[int], limit: int) -> None:
    script = [used(c, 0, calls=[tool_call("add", {"a": 1, "b": 2})]) for c in costs] + [used(1, 0, "done")]
    model = ScriptedChatModel(script)
    agent = create_agent(model, [add], middleware=[BudgetMiddleware(run=BudgetLimit(tokens=limit), warn_at=None)])
    result = agent.invoke(ask())
    spent, expected_calls = 0, 0
    for cost in [*costs, 1]:
        if spent >= limit:
            break
        spent += cost
        expected_calls += 1
    assert model.call_count == expected_calls
    assert result["budget"]["run"]["total_tokens"] == spent
    assert_paired(result["messages"])
    ended = result["messages"][-1].content.startswith("Budget exceeded")
    assert ended == (spent >= limit and expected_calls != len(costs) + 1)


# -- configuration -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({}, "run"),
        ({"run": 100}, "run"),
        ({"run": BudgetLimit(cost=1.0)}, "prices"),
        ({"run": BudgetLimit(tokens=1), "warn_at": 1.5}, "warn_at"),
        ({"run": BudgetLimit(tokens=1), "switch_at": 0.5}, "cheaper_model"),
        ({"run": BudgetLimit(tokens=1), "cheaper_model": ScriptedChatModel([])}, "switch_at"),
        ({"run": BudgetLimit(tokens=1), "on_exceeded": "explode"}, "on_exceeded"),
        ({"run": BudgetLimit(tokens=1), "namespace": ()}, "namespace"),
        ({"run": BudgetLimit(tokens=1), "prices": {"m": "cheap"}}, "prices"),
    ],
)
def test_constructor_errors_name_the_class_and_parameter(kwargs: dict[str, Any], param: str) -> None:
    with pytest.raises(MiddlewareConfigError) as err:
        BudgetMiddleware(**kwargs)
    assert err.value.hook == param and str(err.value).startswith(("BudgetMiddleware", "PriceTable"))


def test_limit_and_price_errors() -> None:
    with pytest.raises(MiddlewareConfigError, match="BudgetLimit: give tokens"):
        BudgetLimit()
    with pytest.raises(MiddlewareConfigError, match="BudgetLimit: tokens must be an int >= 0"):
        BudgetLimit(tokens=-1)
    with pytest.raises(MiddlewareConfigError, match="ModelPrice: input"):
        ModelPrice(input=float("nan"), output=1.0)


def test_configuration_is_read_only_once_an_agent_adopts_it() -> None:
    prices = {"gpt-4o": (2.5, 10.0)}
    budget = BudgetMiddleware(run=BudgetLimit(cost=1.0), prices=prices)
    prices["gpt-4o"] = (0.0, 0.0)
    assert budget.prices is not None and budget.prices.price_for("gpt-4o") == ModelPrice(2.5, 10.0)
    changed = budget.replace(run=BudgetLimit(tokens=100))
    assert changed.run == BudgetLimit(tokens=100) and budget.run == BudgetLimit(cost=1.0)
    budget.run = BudgetLimit(tokens=5)  # before an agent adopts it, as in LangChain
    assert budget.run == BudgetLimit(tokens=5)
    model = ScriptedChatModel([adding()], cycle=True)
    agent = create_agent(model, [add], middleware=[changed])
    with pytest.raises(FrozenMiddlewareError):
        changed.run = BudgetLimit(tokens=5)
    result = agent.invoke(ask())
    assert result["messages"][-1].content.startswith("Budget exceeded") and model.call_count == 1


# -- PostgreSQL: two worker processes share the tenant budget -------------------------------------------------------
class Worker:
    def __init__(self, dsn: str, name: str, mode: str) -> None:
        self.name = name
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("budget_pg_worker.py")), dsn, name, mode],
            cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            assert self.proc.stderr is not None
            raise AssertionError(f"worker {self.name} died ({self.proc.wait()}): {self.proc.stderr.read()[-3000:]}")
        return dict(json.loads(line))

    def ask(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def pg_workers(postgres_dsn: str) -> Iterator[tuple[str, list[Worker]]]:  # noqa: F811
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        saver.setup()
    with PostgresStore.from_conn_string(postgres_dsn) as store:
        store.setup()
    workers = [Worker(postgres_dsn, "sync-worker", "invoke"), Worker(postgres_dsn, "async-worker", "ainvoke")]
    try:
        for w in workers:
            assert w.read() == {"ready": w.name}
        yield postgres_dsn, workers
    finally:
        for w in workers:
            w.close()


@pytest.mark.timeout(180)
def test_tenant_budget_holds_across_two_worker_processes_on_postgres(
    pg_workers: tuple[str, list[Worker]],
) -> None:
    from langgraph.store.postgres import PostgresStore

    from tests.middlewares.budget_pg_worker import CALL_TOKENS, TENANT_TOKENS, THREAD_TOKENS

    dsn, (a, b) = pg_workers
    tenant = f"acme-{os.getpid()}"

    # 1. Thread budgets follow the thread from worker to worker (checkpointed in PostgreSQL).
    shared = f"{tenant}-shared"
    first, second, third = a.ask(thread=shared, tenant=tenant), b.ask(thread=shared, tenant=tenant), \
        a.ask(thread=shared, tenant=tenant)
    assert [first["called"], second["called"], third["called"]] == [1, 1, 1]
    assert third["thread_tokens"] == 3 * CALL_TOKENS >= THREAD_TOKENS
    assert b.ask(thread=shared, tenant=tenant)["last"].startswith("Budget exceeded: the thread budget is spent")

    # 2. Both workers serve new threads of the tenant at the same time until its budget is spent.
    def serve(worker: Worker, prefix: str) -> list[dict[str, Any]]:
        return [worker.ask(thread=f"{tenant}-{prefix}{i}", tenant=tenant) for i in range(8)]

    with ThreadPoolExecutor(2) as pool:
        answers = [x for batch in pool.map(serve, [a, b], ["a", "b"]) for x in batch]
    called = 3 + sum(x["called"] for x in answers)
    refused = [x for x in answers if x["last"].startswith("Budget exceeded: the tenant budget is spent")]
    assert {x["worker"] for x in answers if x["called"]} == {"sync-worker", "async-worker"}
    # The check reads every committed charge: at most one call per worker in flight can overshoot.
    assert TENANT_TOKENS // CALL_TOKENS <= called <= TENANT_TOKENS // CALL_TOKENS + 2
    assert len(refused) == 16 - (called - 3)

    # 3. No update was lost: the store holds exactly the usage of every call the workers made.
    with PostgresStore.from_conn_string(dsn) as store:
        items = store.search(("middleware_kit", "budget", tenant), limit=1000)
        assert sum(i.value["total_tokens"] for i in items) == called * CALL_TOKENS
        assert sum(i.value["calls"] for i in items) == called

    # 4. Spent for everyone, on both workers; another tenant is untouched.
    assert a.ask(thread=f"{tenant}-late-a", tenant=tenant)["called"] == 0
    assert b.ask(thread=f"{tenant}-late-b", tenant=tenant)["called"] == 0
    assert b.ask(thread=f"{tenant}-other", tenant=f"{tenant}-other")["last"] == "ok"


def test_usage_is_plain_json(run: Runner) -> None:
    model = ScriptedChatModel([used(1, 2, "x")])
    result = run(create_agent(model, middleware=[BudgetMiddleware(run=BudgetLimit(tokens=10))]), ask())
    assert json.loads(json.dumps(result["budget"]))["run"]["total_tokens"] == 3
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage"]
    assert isinstance(result["messages"][-1], BaseMessage)


class Emulator(AgentMiddleware):
    """Answers tool calls with a model of its own (in the tools node), and charges it."""

    def __init__(self, model: ScriptedChatModel) -> None:
        self.model = model

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        sent = [HumanMessage(f"Pretend to run {request.tool_call['name']}")]
        answer = self.model.invoke(sent)
        charge(request.runtime, middleware=self.name, response=answer, messages=sent, model=self.model)
        return ToolMessage(answer.text, tool_call_id=request.tool_call["id"], name=request.tool_call["name"])


def test_charges_from_the_tools_node_reach_the_budget(run: Runner) -> None:
    model = ScriptedChatModel([adding(10, 10), used(10, 10, "done")])
    emulator = Emulator(ScriptedChatModel([used(200, 50, "3")], cycle=True))
    store = InMemoryStore()
    agent = create_agent(model, [add], middleware=[BudgetMiddleware(run=BudgetLimit(tokens=10_000),
                                                                    tenant=BudgetLimit(tokens=10_000)), emulator],
                         store=store)
    result = run(agent, ask(), context={"tenant_id": "acme"})
    assert result["budget"]["by_source"]["run"]["Emulator"]["total_tokens"] == 250
    assert result["budget"]["run"]["total_tokens"] == 290
    [item] = store.search(("middleware_kit", "budget", "acme"))
    assert item.value["total_tokens"] == 290  # the tenant item includes it too


def test_a_per_tenant_plan_with_a_cost_needs_prices_only_for_that_tenant(run: Runner) -> None:
    plans = {"metered": BudgetLimit(cost=1.0), "tokens": BudgetLimit(tokens=1000)}
    budget = BudgetMiddleware(tenant=lambda t: plans[t], prices={"gpt-4o": (2.5, 10.0)})
    model = ScriptedChatModel([used(10, 10, "ok")], cycle=True)
    agent = create_agent(model, middleware=[budget], store=InMemoryStore())
    assert run(agent, ask(), context={"tenant_id": "tokens"})["messages"][-1].content == "ok"
    with pytest.raises(UnknownModelPriceError):
        run(agent, ask(), context={"tenant_id": "metered"})
    assert model.call_count == 1
