"""Per-tenant budgets: one shared agent, many tenants, two workers, and nobody overspends.

What it shows
    ``BudgetMiddleware(tenant=plan_of, thread=..., cheaper_model=..., switch_at=...)`` with the tenant id read from
    ``runtime.context`` and the tenant's usage kept in the LangGraph store, so it holds across workers. Two "workers"
    (two threads here, each with its own agent object, sharing one ``InMemoryStore`` and one checkpointer, as two
    processes would share PostgreSQL; the tests run the same on PostgreSQL with two worker processes) serve a free
    tenant and a pro tenant at the same time:

    - the free tenant's budget (money, from a price table) is spent across its threads and workers: past 60% its
      calls go to the cheaper model, at 100% every worker refuses it with a clear message, while the pro tenant
      carries on;
    - the pro tenant's long conversation crosses 60% of its thread budget and is switched to the cheaper model;
    - a summarizer-like middleware calls a model itself and reports it with ``charge()``: its usage is charged to it
      and counted against the tenant's budget;
    - the store's total for each tenant equals the usage of every call made for it (no lost update).

When to use it
    SaaS agents: a plan per customer (``tenant=lambda tenant_id: PLANS[...]``), a cap per conversation, a cheaper model
    when a conversation gets long. Use ``PostgresStore``/``PostgresSaver`` (``langgraph-checkpoint-postgres``) in
    production so every worker sees the same numbers.

Run it: ``python recipes/per_tenant_budget.py``.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from middleware_kit import AgentMiddleware, create_agent
from middleware_kit.middlewares.budget import BudgetLimit, BudgetMiddleware, ModelPrice, charge
from middleware_kit.testing import ScriptedChatModel

PRICES = {"big-model": ModelPrice(input=5.00, output=15.00), "small-model": ModelPrice(input=0.50, output=1.50)}
PLANS = {"free": BudgetLimit(cost=0.04), "pro": BudgetLimit(cost=10.0)}
USAGE = {"input_tokens": 2_000, "output_tokens": 500, "total_tokens": 2_500}  # $0.0175 on big, $0.00175 on small


def answer(text: str, model: str) -> AIMessage:
    return AIMessage(text, usage_metadata=dict(USAGE), response_metadata={"model_name": model})


class Notes(AgentMiddleware):
    """Keeps running notes with a model of its own (a stand-in for a summarizer), and reports what it spent."""

    def __init__(self, model: ScriptedChatModel) -> None:
        self.model = model

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        if len(request.messages) >= 5:  # only on longer conversations
            sent = [HumanMessage("Update the notes: " + request.messages[-1].text)]
            reply = self.model.invoke(sent, config={"tags": ["nostream"]})
            charge(request.runtime, middleware=self.name, response=reply, messages=sent, model=self.model)
        return handler(request)


def build_worker(store: InMemoryStore, saver: InMemorySaver) -> tuple[Any, ScriptedChatModel, ScriptedChatModel]:
    big = ScriptedChatModel(default=lambda m: answer("Answer from the big model.", "big-model"), model_name="big-model")
    small = ScriptedChatModel(default=lambda m: answer("Answer from the small model.", "small-model"),
                              model_name="small-model")
    notes = ScriptedChatModel(default=lambda m: answer("notes", "small-model"), model_name="small-model")
    budget = BudgetMiddleware(
        tenant=lambda tenant_id: PLANS[tenant_id.split(":")[0]],
        thread=BudgetLimit(cost=0.20),
        prices=PRICES,
        cheaper_model=small,
        switch_at=0.6,
        warn_at=None,
    )
    agent = create_agent(big, middleware=[budget, Notes(notes)], store=store, checkpointer=saver)
    return agent, big, small


def turn(agent: Any, thread: str, tenant: str) -> tuple[str, dict[str, Any]]:
    out = agent.invoke({"messages": [HumanMessage("Next question, please.")]}, {"configurable": {"thread_id": thread}},
                       context={"tenant_id": tenant})
    return str(out["messages"][-1].content), out["budget"]


def main() -> None:
    store, saver = InMemoryStore(), InMemorySaver()
    workers = [build_worker(store, saver) for _ in range(2)]
    lock = threading.Lock()
    log: list[tuple[str, str, str]] = []

    def serve(index: int) -> None:
        agent = workers[index][0]
        for i in range(4):  # each worker: 4 new conversations of the free tenant
            text, _ = turn(agent, f"free-w{index}-{i}", "free:tiny-startup")
            with lock:
                log.append((f"worker{index}", "free", text))
        for _ in range(6):  # and the pro tenant's one long conversation (a thread may move between workers)
            with lock:  # one run per thread at a time (what a real deployment guarantees)
                text, _ = turn(agent, "pro-long-chat", "pro:big-corp")
                log.append((f"worker{index}", "pro", text))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(serve, range(2)))

    free = [text for _, tenant, text in log if tenant == "free"]
    answered = [t for t in free if t.startswith("Answer")]
    refused = [t for t in free if t.startswith("Budget exceeded: the tenant budget is spent")]
    print(f"free tenant: {len(answered)} answered, {len(refused)} refused across both workers")
    assert len(answered) + len(refused) == 8, free
    # $0.04: two big calls ($0.035, over 60%: switch), then three small ones ($0.00175 each) reach it; two workers
    # checking at the same moment may each make one more call.
    assert 5 <= len(answered) <= 7 and refused, free
    assert "Answer from the small model." in free, free  # switched once past 60%

    pro = [text for _, tenant, text in log if tenant == "pro"]
    print(f"pro tenant, one thread on both workers: {pro.count('Answer from the big model.')} big, "
          f"{pro.count('Answer from the small model.')} small, then: {pro[-1][:60]}...")
    assert pro[0] == "Answer from the big model." and "Answer from the small model." in pro, pro
    state = workers[0][0].get_state({"configurable": {"thread_id": "pro-long-chat"}}).values["budget"]
    assert "Notes" in state["by_source"]["thread"], state["by_source"]  # the notes model was charged to Notes
    by = state["by_source"]["thread"]
    print(f"pro thread spent ${state['thread']['cost']:.4f}: model ${by['model']['cost']:.4f}, "
          f"Notes ${by['Notes']['cost']:.4f}")

    for tenant in ("free:tiny-startup", "pro:big-corp"):
        items = store.search(("middleware_kit", "budget", tenant), limit=100)
        total = sum(i.value["calls"] for i in items)
        made = sum(1 for _, t, text in log if tenant.startswith(t) and text.startswith("Answer"))
        notes_calls = (state["by_source"]["thread"]["Notes"]["calls"] if tenant.startswith("pro") else 0)
        assert total == made + notes_calls, (tenant, total, made, notes_calls)
    print("OK: tenant budgets held across two workers; the cheaper model took over a long thread; middleware model "
          "calls were charged to their middleware")


if __name__ == "__main__":
    main()
