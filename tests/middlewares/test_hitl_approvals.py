"""HumanInTheLoopMiddleware: approvals bound to their exact call, "always allow" grants, who decided.

A tampered checkpoint is made the way it would be: the saved pending tool call (a lone call is the saved calling
``AIMessage``'s, in the ``messages`` channel, what the tool node's task reads) is rewritten in the saver's storage
between the approval and the execution.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import MiddlewareConfigError, create_agent
from middleware_kit.ledger.grants import Grant, grant_store, literal_pattern, matches
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware, InvalidResumeError
from middleware_kit.middlewares.human_in_the_loop.approvals import ENV_KEY, ApprovalMismatchError, ApprovalSeal
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner
from tests.integration.conftest import postgres_dsn

__all__ = ["postgres_dsn"]  # the session's PostgreSQL server (skipped when none can be started)

KEY = "k" * 40
OTHER_KEY = "o" * 40
APPROVE = {"decisions": [{"type": "approve"}]}


def reply(messages: list[BaseMessage]) -> AIMessage:
    """``pay <to> <amount>`` -> a ``pay`` call (its id names the turn); after the tool: ``done``."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(f"done: {messages[-1].content}")
    _, to, amount = str(messages[-1].content).split()
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    return AIMessage("", tool_calls=[tool_call("pay", {"to": to, "amount": int(amount)}, id=f"pay-{turn}")])


class Bank:
    def __init__(self) -> None:
        self.paid: list[tuple[str, int]] = []

        @tool
        def pay(to: str, amount: int) -> str:
            """Pay someone."""
            self.paid.append((to, amount))
            return f"paid {amount} to {to}"

        self.tool = pay

    def agent(self, saver: Any = None, **options: Any) -> Any:
        hitl = HumanInTheLoopMiddleware({"pay": True}, **options)
        return create_agent(ScriptedChatModel(default=reply), [self.tool], middleware=[hitl],
                            checkpointer=saver or InMemorySaver())


def cfg(thread: str = "t", **configurable: Any) -> Any:
    return {"configurable": {"thread_id": thread, **configurable}}


def approve_but_stop_before_the_tool(run: Runner, agent: Any, config: Any, resume: Any = APPROVE) -> None:
    """Pause for review, approve, and stop before the tool node runs (the approved call is saved, pending)."""
    paused = run(agent, {"messages": [HumanMessage("pay ann 5")]}, config=config)
    assert paused["__interrupt__"]
    run(agent, Command(resume=resume), config=config, interrupt_before=["tools"])
    assert agent.get_state(config).next == ("tools",)


def rewrite_channel(saver: InMemorySaver, config: Any, channel: str, change: Callable[[Any], None]) -> None:
    """Change the saved value of ``channel`` in the newest checkpoint, in the saver's storage."""
    thread = config["configurable"]["thread_id"]
    version = saver.get_tuple(config).checkpoint["channel_versions"][channel]  # type: ignore[union-attr]
    key = (thread, "", channel, version)
    value = saver.serde.loads_typed(saver.blobs[key])
    change(value)
    saver.blobs[key] = saver.serde.dumps_typed(value)


def to_mallory(messages: list[Any]) -> None:
    [pending] = messages[-1].tool_calls
    pending["args"] = {**pending["args"], "to": "mallory", "amount": 500}


# -- the binding -----------------------------------------------------------------------------------------------------
def test_an_approval_records_the_digest_of_the_call_it_approved(run: Runner) -> None:
    bank = Bank()
    agent = bank.agent(key=KEY)
    approve_but_stop_before_the_tool(run, agent, cfg())
    approvals = agent.get_state(cfg()).values["hitl_approvals"]
    seal = ApprovalSeal.of("HumanInTheLoopMiddleware", KEY)
    assert approvals == {"pay-1": {"digest": seal.digest("pay", {"to": "ann", "amount": 5}, "pay-1"),
                                   "middleware": "HumanInTheLoopMiddleware"}}
    assert approvals["pay-1"]["digest"].startswith("hmac-sha256:")
    done = run(agent, None, config=cfg())
    assert bank.paid == [("ann", 5)] and done["messages"][-1].content == "done: paid 5 to ann"


@pytest.mark.parametrize("key", [None, KEY])
def test_a_call_changed_in_the_checkpoint_after_its_approval_does_not_run(run: Runner, key: str | None) -> None:
    bank, saver = Bank(), InMemorySaver()
    agent = bank.agent(saver, key=key)
    approve_but_stop_before_the_tool(run, agent, cfg())
    rewrite_channel(saver, cfg(), "messages", to_mallory)
    with pytest.raises(ApprovalMismatchError) as caught:
        run(agent, None, config=cfg())
    assert bank.paid == []
    error = caught.value
    assert (error.middleware, error.hook, error.tool_call_id, error.tool_name) == (
        "HumanInTheLoopMiddleware", "before_tool", "pay-1", "pay")
    text = str(error)
    assert "HumanInTheLoopMiddleware.before_tool" in text and "'pay-1'" in text
    assert "not those the reviewer approved" in text and "Fix:" in text


def test_a_call_changed_among_several_pending_calls_does_not_run(run: Runner) -> None:
    """Several calls of one turn are one task each, sent with its call (LangGraph's ``__pregel_tasks`` channel): a
    call changed there after its approval is refused too."""
    bank, saver = Bank(), InMemorySaver()
    calls = [tool_call("pay", {"to": "ann", "amount": 5}, id="pay-1"), tool_call("pay", {"to": "bob", "amount": 7},
                                                                                 id="pay-2")]
    model = ScriptedChatModel([AIMessage("", tool_calls=calls), "done"])
    agent = create_agent(model, [bank.tool], middleware=[HumanInTheLoopMiddleware({"pay": True}, key=KEY)],
                         checkpointer=saver)
    assert run(agent, {"messages": [HumanMessage("pay both")]}, config=cfg())["__interrupt__"]
    run(agent, Command(resume={"decisions": [{"type": "approve"}, {"type": "approve"}]}), config=cfg(),
        interrupt_before=["tools"])

    def change(sends: list[Any]) -> None:
        assert [send.arg[0]["id"] for send in sends] == ["pay-1", "pay-2"]
        sends[1].arg[0]["args"] = {"to": "mallory", "amount": 500}

    rewrite_channel(saver, cfg(), "__pregel_tasks", change)
    with pytest.raises(ApprovalMismatchError, match="pay-2"):
        run(agent, None, config=cfg())
    assert ("mallory", 500) not in bank.paid


def test_an_edit_is_bound_to_the_call_the_reviewer_wrote(run: Runner) -> None:
    bank, saver = Bank(), InMemorySaver()
    agent = bank.agent(saver, key=KEY)
    edit = {"decisions": [{"type": "edit", "edited_action": {"name": "pay", "args": {"to": "ann", "amount": 4}}}]}
    approve_but_stop_before_the_tool(run, agent, cfg(), resume=edit)
    run(agent, None, config=cfg())
    assert bank.paid == [("ann", 4)]  # the reviewer's call ran: its digest matched

    approve_but_stop_before_the_tool(run, agent, cfg("t2"), resume=edit)
    rewrite_channel(saver, cfg("t2"), "hitl_edits", lambda edits: edits["pay-1"].update(args={"to": "ann",
                                                                                                "amount": 5}))
    with pytest.raises(ApprovalMismatchError, match="pay-1"):  # back to the model's call: not what was approved
        run(agent, None, config=cfg("t2"))
    assert bank.paid == [("ann", 4)]


@pytest.mark.parametrize(("key", "caught"), [(None, False), (KEY, True)])
def test_a_tamperer_who_recomputes_the_digest_is_caught_only_with_a_key(
    run: Runner, key: str | None, caught: bool
) -> None:
    """The documented limit: without a key, whoever can write the checkpoint can recompute an unkeyed digest."""
    bank, saver = Bank(), InMemorySaver()
    agent = bank.agent(saver, key=key)
    approve_but_stop_before_the_tool(run, agent, cfg())
    rewrite_channel(saver, cfg(), "messages", to_mallory)
    forged = ApprovalSeal.of("x", None).digest("pay", {"to": "mallory", "amount": 500}, "pay-1")
    rewrite_channel(saver, cfg(), "hitl_approvals", lambda a: a["pay-1"].update(digest=forged))
    if caught:
        with pytest.raises(ApprovalMismatchError, match="recorded without a key"):
            run(agent, None, config=cfg())
        assert bank.paid == []
    else:
        run(agent, None, config=cfg())
        assert bank.paid == [("mallory", 500)]


def test_keys_rotate_come_from_the_environment_and_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    old = ApprovalSeal.of("m", OTHER_KEY).digest("pay", {"a": 1}, "c")
    assert ApprovalSeal.of("m", [KEY, OTHER_KEY]).problem(old, "pay", {"a": 1}, "c") is None  # the old key verifies
    assert ApprovalSeal.of("m", KEY).problem(old, "pay", {"a": 1}, "c") == "changed"
    assert ApprovalSeal.of("m", KEY).problem(old, "pay", {"a": 2}, "c") == "changed"
    monkeypatch.setenv(ENV_KEY, OTHER_KEY)
    assert ApprovalSeal.of("m", None).problem(old, "pay", {"a": 1}, "c") is None
    assert ApprovalSeal.of("m", None).keyed and repr(ApprovalSeal.of("m", None)) == "ApprovalSeal(<1 key(s)>)"
    monkeypatch.delenv(ENV_KEY)
    assert ApprovalSeal.of("m", None).problem(old, "pay", {"a": 1}, "c") == "no key"
    with pytest.raises(MiddlewareConfigError, match="at least 32 bytes") as short:
        HumanInTheLoopMiddleware({"pay": True}, key="short")
    assert short.value.middleware == "HumanInTheLoopMiddleware" and short.value.hook == "key"


# -- "always allow" grants -------------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def grant_decision(**grant: Any) -> dict[str, Any]:
    return {"decisions": [{"type": "approve", "reviewer": "alice", "grant": grant}]}


def test_a_reviewer_grant_lets_matching_calls_run_until_it_expires(run: Runner) -> None:
    bank, clock = Bank(), Clock()
    agent = bank.agent(clock=clock)
    assert run(agent, {"messages": [HumanMessage("pay ann 5")]}, config=cfg())["__interrupt__"]
    run(agent, Command(resume=grant_decision(expires_in=3600, args={"to": "ann"})), config=cfg())
    [grant] = grant_store(agent).grants()
    assert (grant.tool, grant.args, grant.scope, grant.scope_id, grant.granted_by) == (
        "pay", {"to": "ann"}, "thread", "t", "alice")
    assert grant.expires_at == clock.now + 3600 and grant.origin == "t/pay-1"
    review = agent.get_state(cfg()).values["human_review"]
    assert review["pay-1"]["grant"]["grant_id"] == grant.grant_id
    assert review["pay-1"]["reviewer"] == {"id": "alice", "source": "resume"}

    clock.now += 60
    out = run(agent, {"messages": [HumanMessage("pay ann 7")]}, config=cfg())  # covered: no pause
    assert "__interrupt__" not in out and bank.paid == [("ann", 5), ("ann", 7)]
    review = agent.get_state(cfg()).values["human_review"]
    assert review["pay-2"] == {"decision": "approve", "middleware": "HumanInTheLoopMiddleware",
                               "by_grant": grant.grant_id, "reviewer": {"id": "alice", "source": "grant"}}
    assert [(u.call_id, u.thread_id) for u in grant_store(agent).uses(grant.grant_id)] == [("pay-2", "t")]

    assert run(agent, {"messages": [HumanMessage("pay bob 7")]}, config=cfg())["__interrupt__"]  # other args
    run(agent, Command(resume={"decisions": [{"type": "reject"}]}), config=cfg())
    clock.now += 3600  # expired
    assert run(agent, {"messages": [HumanMessage("pay ann 1")]}, config=cfg())["__interrupt__"]
    assert bank.paid == [("ann", 5), ("ann", 7)]


def test_a_tenant_grant_covers_the_tenants_other_threads_only(run: Runner) -> None:
    bank = Bank()
    agent = bank.agent(tenant="org")
    assert run(agent, {"messages": [HumanMessage("pay ann 5")]}, config=cfg("a"), context={"org": "acme"})
    run(agent, Command(resume=grant_decision(expires_in=600, scope="tenant", args={})), config=cfg("a"))
    [grant] = grant_store(agent).grants("tenant", "acme")
    assert grant.args == {}
    out = run(agent, {"messages": [HumanMessage("pay zoe 9")]}, config=cfg("b"), context={"org": "acme"})
    assert "__interrupt__" not in out and bank.paid[-1] == ("zoe", 9)
    other = run(agent, {"messages": [HumanMessage("pay zoe 9")]}, config=cfg("c"), context={"org": "globex"})
    assert other["__interrupt__"]


def test_a_tenant_grant_without_a_tenant_is_refused_and_the_review_stays_pending(run: Runner) -> None:
    bank = Bank()
    agent = bank.agent()
    run(agent, {"messages": [HumanMessage("pay ann 5")]}, config=cfg())
    with pytest.raises(InvalidResumeError, match="tenant="):
        run(agent, Command(resume=grant_decision(expires_in=60, scope="tenant")), config=cfg())
    run(agent, Command(resume=APPROVE), config=cfg())
    assert bank.paid == [("ann", 5)] and grant_store(agent).grants() == []


def test_an_app_grant_and_its_revocation(run: Runner) -> None:
    bank, clock = Bank(), Clock()
    agent = bank.agent(clock=clock)
    store = grant_store(agent)
    store.grant(Grant(grant_id="g-ops", tool="pay", args={"to": "*@acme.com"}, scope="thread", scope_id="t",
                      granted_by="ops-bot", granted_at=clock.now - 1, expires_at=clock.now + 100))
    out = run(agent, {"messages": [HumanMessage("pay bill@acme.com 3")]}, config=cfg())
    assert "__interrupt__" not in out and bank.paid == [("bill@acme.com", 3)]
    store.revoke("g-ops", clock.now + 1)
    clock.now += 2
    assert run(agent, {"messages": [HumanMessage("pay bill@acme.com 3")]}, config=cfg())["__interrupt__"]


def test_argument_patterns() -> None:
    assert matches({"to": "*@acme.com"}, {"to": "a@acme.com", "amount": 3})
    assert not matches({"to": "*@acme.com"}, {"to": "a@evil.com"})
    assert not matches({"amount": 3}, {"to": "a"}) and matches({}, {"x": 1})
    exact = literal_pattern({"path": "a*b", "n": 2})
    assert matches(exact, {"path": "a*b", "n": 2}) and not matches(exact, {"path": "aXb", "n": 2})


def test_grants_live_in_the_sqlite_file(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "agent.sqlite"
    bank = Bank()
    first = bank.agent(SqliteSaver(sqlite3.connect(db, check_same_thread=False)))
    first.invoke({"messages": [HumanMessage("pay ann 5")]}, cfg())
    first.invoke(Command(resume=grant_decision(expires_in=3600)), cfg())
    second = Bank().agent(SqliteSaver(sqlite3.connect(db, check_same_thread=False)))  # another connection
    out = second.invoke({"messages": [HumanMessage("pay ann 5")]}, cfg())
    assert "__interrupt__" not in out
    [grant] = grant_store(second).grants()
    assert [u.call_id for u in grant_store(second).uses(grant.grant_id)] == ["pay-2"]


def test_grants_under_ainvoke_with_the_async_sqlite_saver(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def main() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
            bank = Bank()
            agent = bank.agent(saver)
            await agent.ainvoke({"messages": [HumanMessage("pay ann 5")]}, cfg())
            await agent.ainvoke(Command(resume=grant_decision(expires_in=3600)), cfg())
            out = await agent.ainvoke({"messages": [HumanMessage("pay ann 5")]}, cfg())
            assert "__interrupt__" not in out and bank.paid == [("ann", 5), ("ann", 5)]
            [grant] = await grant_store(agent).agrants()
            assert [u.call_id for u in await grant_store(agent).auses(grant.grant_id)] == ["pay-2"]

    asyncio.run(main())


def test_grants_live_in_the_postgres_database(postgres_dsn: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    thread = f"pg-{id(object())}"
    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        saver.setup()
        bank = Bank()
        agent = bank.agent(saver)
        agent.invoke({"messages": [HumanMessage("pay ann 5")]}, cfg(thread))
        agent.invoke(Command(resume=grant_decision(expires_in=3600)), cfg(thread))
        assert "__interrupt__" not in agent.invoke({"messages": [HumanMessage("pay ann 5")]}, cfg(thread))

    async def from_another_connection() -> None:
        async with AsyncPostgresSaver.from_conn_string(postgres_dsn) as asaver:
            agent = Bank().agent(asaver)
            [grant] = await grant_store(agent).agrants("thread", thread)
            assert grant.granted_by == "alice"
            assert [u.call_id for u in await grant_store(agent).auses(grant.grant_id)] == ["pay-2"]
            out = await agent.ainvoke({"messages": [HumanMessage("pay ann 5")]}, cfg(thread))
            assert "__interrupt__" not in out
            assert len(await grant_store(agent).auses(grant.grant_id)) == 2

    asyncio.run(from_another_connection())


# -- who decided -----------------------------------------------------------------------------------------------------
class ServerUser:
    """What LangGraph Server puts in ``configurable["langgraph_auth_user"]`` (a ``BaseUser``)."""

    identity = "user-42"
    display_name = "Ann"
    is_authenticated = True
    permissions: tuple[str, ...] = ()


def test_the_reviewer_is_recorded_in_the_thread_and_the_event(run: Runner, mode: str) -> None:
    bank = Bank()
    agent = bank.agent()
    run(agent, {"messages": [HumanMessage("pay ann 5")]}, config=cfg())
    resume: Command[Any] = Command(resume={"decisions": [{"type": "approve"}], "reviewer": "bob"})
    if mode == "invoke":
        events = list(agent.stream(resume, cfg(), stream_mode="custom"))
    else:
        async def collect() -> list[Any]:
            return [e async for e in agent.astream(resume, cfg(), stream_mode="custom")]

        events = asyncio.run(collect())
    [received] = [e for e in events if e["event"] == "decisions_received"]
    assert received["decisions"] == [{"id": "pay-1", "name": "pay", "type": "approve",
                                      "reviewer": {"id": "bob", "source": "resume"}}]
    assert agent.get_state(cfg()).values["human_review"]["pay-1"]["reviewer"] == {"id": "bob", "source": "resume"}


def test_the_authenticated_user_wins_over_a_claimed_reviewer(run: Runner) -> None:
    bank = Bank()
    agent = bank.agent()
    server = cfg(langgraph_auth_user=ServerUser())
    run(agent, {"messages": [HumanMessage("pay ann 5")]}, config=server)
    run(agent, Command(resume={"decisions": [{"type": "reject", "reviewer": "mallory"}]}), config=server)
    assert agent.get_state(cfg()).values["human_review"]["pay-1"]["reviewer"] == {
        "id": "user-42", "source": "langgraph_server", "claimed": "mallory"}


@pytest.mark.parametrize("interrupt_mode", ["batched", "per_call"])
def test_in_a_turn_only_the_calls_no_grant_covers_are_asked_about(run: Runner, interrupt_mode: str) -> None:
    bank = Bank()
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("pay", {"to": "ann", "amount": 1}, id="a1")]), "ok",
        AIMessage("", tool_calls=[tool_call("pay", {"to": "ann", "amount": 2}, id="a2"),
                                  tool_call("pay", {"to": "bob", "amount": 3}, id="b1")]), "ok",
    ])
    hitl = HumanInTheLoopMiddleware({"pay": True}, interrupt_mode=interrupt_mode)  # type: ignore[arg-type]
    agent = create_agent(model, [bank.tool], middleware=[hitl], checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("one")]}, config=cfg())
    run(agent, Command(resume=grant_decision(expires_in=600, args={"to": "ann"})), config=cfg())
    [pending] = run(agent, {"messages": [HumanMessage("two")]}, config=cfg())["__interrupt__"]
    asked = pending.value["action_requests"] if interrupt_mode == "batched" else [pending.value]
    assert [a.get("id", a.get("tool_call_id")) for a in asked] == ["b1"]  # a2 is covered: not asked about
    assert bank.paid == [("ann", 1)]  # nothing of the turn ran before every decision was in
    out = run(agent, Command(resume={"decisions": [{"type": "reject"}]}), config=cfg())
    assert bank.paid == [("ann", 1), ("ann", 2)] and out["messages"][-1].content == "ok"
    review = agent.get_state(cfg()).values["human_review"]
    assert (review["a2"]["decision"], review["b1"]["decision"]) == ("approve", "reject") and "by_grant" in review["a2"]


@pytest.mark.parametrize(("resume", "says"), [
    ({"decisions": [{"type": "approve"}], "reviewer": 5}, "'reviewer' (who decided) must be a str"),
    ({"decisions": [{"type": "approve", "grant": {"expires_in": 0}}]}, "'grant.expires_in': Input should be greater"),
    ({"decisions": [{"type": "approve", "grant": {"expires_in": 9, "bogus": 1}}]},
     "'grant' for 'pay' (call id 'pay-1') has unexpected key(s) ['bogus']; it takes ['args', 'expires_in', 'scope']"),
])
def test_a_bad_reviewer_or_grant_is_refused_and_nothing_is_lost(run: Runner, resume: Any, says: str) -> None:
    bank = Bank()
    agent = bank.agent()
    run(agent, {"messages": [HumanMessage("pay ann 5")]}, config=cfg())
    with pytest.raises(InvalidResumeError) as caught:
        run(agent, Command(resume=resume), config=cfg())
    assert says in str(caught.value) and "HumanInTheLoopMiddleware" in str(caught.value)
    run(agent, Command(resume=APPROVE), config=cfg())
    assert bank.paid == [("ann", 5)] and grant_store(agent).grants() == []


@pytest.mark.parametrize("hitl_first", [True, False])
def test_a_call_pii_restores_for_the_tool_still_matches_its_approval(run: Runner, hitl_first: bool) -> None:
    """PIIMiddleware gives the tool the real value of a placeholder the reviewer approved: not a change of the call."""
    from middleware_kit.middlewares.pii import PIIMiddleware

    sent: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return "sent"

    def email_reply(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("done")
        return AIMessage("", tool_calls=[tool_call("send_email", {"to": str(messages[-1].content).split()[-1]},
                                                   id="c1")])

    pii = PIIMiddleware("email", strategy="placeholder", key=OTHER_KEY, apply_to_input=True)
    hitl = HumanInTheLoopMiddleware({"send_email": True}, key=KEY)
    agent = create_agent(ScriptedChatModel(default=email_reply), [send_email],
                         middleware=[hitl, pii] if hitl_first else [pii, hitl], checkpointer=InMemorySaver())
    paused = run(agent, {"messages": [HumanMessage("email ann@example.com")]}, config=cfg())
    assert paused["__interrupt__"][0].value["action_requests"][0]["args"]["to"].startswith("<EMAIL_")
    run(agent, Command(resume=APPROVE), config=cfg())
    assert sent == ["ann@example.com"]


@pytest.mark.parametrize("rewriter_first", [True, False])
def test_a_before_tool_rewriting_arguments_must_be_listed_after_the_review(run: Runner, rewriter_first: bool) -> None:
    from middleware_kit import before_tool

    @before_tool
    def round_up(request: Any) -> Any:
        args = {**request.tool_call["args"], "amount": request.tool_call["args"]["amount"] + 1}
        return request.override(tool_call={**request.tool_call, "args": args})

    bank = Bank()
    hitl = HumanInTheLoopMiddleware({"pay": True})
    agent = create_agent(ScriptedChatModel(default=reply), [bank.tool],
                         middleware=[round_up, hitl] if rewriter_first else [hitl, round_up],
                         checkpointer=InMemorySaver())
    run(agent, {"messages": [HumanMessage("pay ann 5")]}, config=cfg())
    if rewriter_first:
        with pytest.raises(ApprovalMismatchError, match="list it after HumanInTheLoopMiddleware"):
            run(agent, Command(resume=APPROVE), config=cfg())
        assert bank.paid == []
    else:
        run(agent, Command(resume=APPROVE), config=cfg())
        assert bank.paid == [("ann", 6)]
