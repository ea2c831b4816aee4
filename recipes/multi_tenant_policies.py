"""Per-tenant policies from ``runtime.context``: one shared agent, two tenants running at the same time.

What it shows
    One agent, built once, serves every tenant; each run passes its tenant's policy as context
    (``astream(..., context=TenantContext(...))``), and every middleware reads it from the runtime:

    - ``@dynamic_prompt``: the system prompt names the tenant and its tone.
    - ``HumanInTheLoopMiddleware`` with ``when=``: refunds requested by an admin run at once; a member's refund waits
      for approval (the decision is taken when the model answers, and saved with the run).
    - ``ModelRetryMiddleware(budget=lambda runtime: runtime.context.retry_budget)``: how many retries one run may
      spend. The (scripted) provider fails twice for each tenant: Acme's budget of 3 absorbs it, Globex's budget of
      1 does not, so Globex's first run answers with the failure and its client simply asks again.
    - ``PIIMiddleware("email", strategy="hash", salt=lambda runtime: runtime.context.pii_salt)``: the same address
      hashes differently per tenant (no cross-tenant correlation) and identically within a tenant.

    Both tenants' conversations run concurrently (``asyncio.gather``); the checks prove that nothing leaked from one
    run into the other: prompts, hashes, approvals and retry budgets all follow the run's own context. Context is
    immutable during a run and never checkpointed, so it is also the place for secrets such as the salt.

When to use it
    A SaaS agent serving many customers from one deployment: policies differ per tenant or per user role, and the
    middleware instances must stay stateless (they are shared by every concurrent run).

Run it: ``python recipes/multi_tenant_policies.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import threading
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import (
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
    ModelRequest,
    ModelRetryMiddleware,
    PIIMiddleware,
    create_agent,
    dynamic_prompt,
)
from middleware_kit.testing import ScriptedChatModel, tool_call

EMAIL = "jo@example.com"


@dataclass(frozen=True)
class TenantContext:
    """Who is calling, and the tenant's policy. Given per run; immutable; never checkpointed."""

    tenant: str
    user: str
    role: str  # "admin" or "member"
    tone: str
    retry_budget: int
    pii_salt: str


ACME = TenantContext("Acme", "alice", "admin", "formal", retry_budget=3, pii_salt="acme-secret-salt")
GLOBEX = TenantContext("Globex", "bob", "member", "casual", retry_budget=1, pii_salt="globex-secret-salt")

REFUNDS: list[str] = []
"""The order of every refund that ran."""


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    REFUNDS.append(order_id)
    return f"order {order_id} refunded"


# -- the policies: each middleware reads the run's context -------------------------------------------------------
@dynamic_prompt
def tenant_prompt(request: ModelRequest[TenantContext]) -> str:
    assert request.runtime is not None
    ctx = request.runtime.context
    return f"You are the support agent of {ctx.tenant}. Tone: {ctx.tone}. You are talking to {ctx.user}."


def needs_approval(tool_call: Any, state: Any, runtime: Any) -> bool:
    """Admins' refunds run at once; everybody else's wait for a reviewer."""
    return bool(runtime.context.role != "admin")


def build_agent() -> tuple[Any, ScriptedChatModel]:
    """One agent for every tenant."""
    failures: dict[str, int] = {}
    lock = threading.Lock()

    def provider(messages: list[BaseMessage]) -> AIMessage:
        """A scripted provider that reads the system prompt (so it knows the tenant) and fails twice per tenant."""
        system = messages[0]
        assert isinstance(system, SystemMessage)
        tenant = re.search(r"support agent of (\w+)", system.text)
        name = tenant.group(1) if tenant else "?"
        with lock:
            failures[name] = failures.get(name, 0) + 1
            if failures[name] <= 2:
                raise ConnectionError(f"provider overloaded ({name}, attempt {failures[name]})")
        last = messages[-1]
        if isinstance(last, HumanMessage):
            order = re.search(r"#(\d+)", last.text)
            return AIMessage("", tool_calls=[tool_call("refund", {"order_id": order.group(1) if order else "?"})])
        if isinstance(last, ToolMessage):
            return AIMessage(f"[{name}] {last.text}" if last.status != "error" else f"[{name}] not refunded")
        return AIMessage("?")

    model = ScriptedChatModel(default=provider)
    agent = create_agent(
        model,
        [refund],
        middleware=[
            tenant_prompt,
            PIIMiddleware("email", strategy="hash", salt=lambda runtime: runtime.context.pii_salt),
            ModelRetryMiddleware(max_retries=5, initial_delay=0.01, jitter=False,
                                 budget=lambda runtime: runtime.context.retry_budget),
            HumanInTheLoopMiddleware({
                "refund": InterruptOnConfig(allowed_decisions=["approve", "reject"], when=needs_approval),
            }),
        ],
        context_schema=TenantContext,
        checkpointer=InMemorySaver(),
    )
    return agent, model


async def ask(agent: Any, ctx: TenantContext, thread: str, payload: Any, log: list[str]) -> dict[str, Any]:
    """One run, streamed; the progress events are logged with the tenant's name."""
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    async for mode, chunk in agent.astream(payload, config, context=ctx, stream_mode=["custom", "values"]):
        if mode == "custom":
            log.append(f"{ctx.tenant}: {chunk['event']}")
    state = await agent.aget_state(config)
    return {"messages": state.values["messages"], "interrupts": state.interrupts}


async def conversation(agent: Any, ctx: TenantContext, log: list[str]) -> list[str]:
    """A tenant's client: ask for a refund; ask again if the service was busy; approve if a review is asked for."""
    thread = f"{ctx.tenant}-thread"
    answers = []
    question = f"Please refund order #{len(ctx.tenant)}00, my email is {EMAIL}."
    result = await ask(agent, ctx, thread, {"messages": [HumanMessage(question)]}, log)
    if "failed after" in result["messages"][-1].text:  # the retry budget ran out: ask again (a new run, a new budget)
        answers.append(result["messages"][-1].text)
        print(f"  {ctx.tenant}: {answers[-1]!r}; asking again")
        result = await ask(agent, ctx, thread, {"messages": [HumanMessage(question)]}, log)
    if result["interrupts"]:
        request = result["interrupts"][0].value["action_requests"][0]
        print(f"  {ctx.tenant}: waiting for approval of {request['name']}({request['args']}); approving")
        result = await ask(agent, ctx, thread, Command(resume={"decisions": [{"type": "approve"}]}), log)
    answers.append(result["messages"][-1].text)
    return answers


def expected_hash(salt: str) -> str:
    return f"<email_hash:{hmac.new(salt.encode(), EMAIL.encode(), hashlib.sha256).hexdigest()[:16]}>"


async def main() -> None:
    agent, model = build_agent()
    log: list[str] = []
    acme, globex = await asyncio.gather(conversation(agent, ACME, log), conversation(agent, GLOBEX, log))
    for line in log:
        print(f"  [{line}]")
    print(f"  Acme:   {acme}\n  Globex: {globex}")

    # Retry budget per tenant: Acme absorbed both failures in one run; Globex gave up after its one retry.
    assert log.count("Acme: retry") == 2 and "Acme: retry_gave_up" not in log, log
    assert log.count("Globex: retry") == 1 and log.count("Globex: retry_gave_up") == 1, log
    assert len(acme) == 1 and len(globex) == 2 and "failed after 2 attempts" in globex[0], (acme, globex)
    # Approval per role: the admin's refund ran at once, the member's waited for the reviewer.
    assert "Acme: awaiting_approval" not in log and log.count("Globex: awaiting_approval") == 1, log
    assert acme[-1] == "[Acme] order 400 refunded" and globex[-1] == "[Globex] order 600 refunded", (acme, globex)
    assert sorted(REFUNDS) == ["400", "600"], REFUNDS  # each once
    # The prompt of every model call names the tenant whose run made it (the provider keyed its replies on it).
    prompts = {call.messages[0].text.split(".")[0] for call in model.calls}
    assert prompts == {"You are the support agent of Acme", "You are the support agent of Globex"}, prompts
    # PII hashed with each tenant's salt: nothing raw was stored or sent, and the hashes do not correlate.
    for ctx in (ACME, GLOBEX):
        history = (await agent.aget_state({"configurable": {"thread_id": f"{ctx.tenant}-thread"}})).values
        stored = " ".join(m.text for m in history["messages"])
        assert EMAIL not in stored and expected_hash(ctx.pii_salt) in stored, stored
    assert not any(EMAIL in m.text for call in model.calls for m in call.messages)
    assert expected_hash(ACME.pii_salt) != expected_hash(GLOBEX.pii_salt)

    print("OK: one shared agent, two concurrent tenants; prompt, approval, retry budget and PII salt each followed "
          "the run's own context")


if __name__ == "__main__":
    asyncio.run(main())
