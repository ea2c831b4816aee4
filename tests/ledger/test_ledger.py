"""The call ledger in one process, on InMemorySaver and SQLite, under invoke and ainvoke: calls recorded with their
results, idempotency keys, replay of finished calls, the reconcile policy for in-doubt calls, and the ways to turn
it off. A crash is a ``Crash`` (a ``BaseException``, as ``KeyboardInterrupt``) raised where the process would die;
``tests/ledger/test_crash_matrix.py`` kills real processes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command, interrupt

from middleware_kit import AgentMiddleware, ToolRetryMiddleware, create_agent
from middleware_kit.ledger import (
    CallKey,
    InDoubtCall,
    Ledger,
    LedgerConfigError,
    LedgerResumeError,
    MarkDone,
    Retry,
    Skip,
    current_idempotency_key,
    idempotency_key,
    ledger_store,
)
from middleware_kit.ledger.policy import RESPONSE_SCHEMA
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.run_control.helpers import assert_paired, call, cfg


class Crash(BaseException):
    """Where the process would die (not an ``Exception``: nothing handles it on the way out)."""


class Effects:
    """What the tools did: (tool, ref, idempotency key seen by the helper, key seen in ``runtime.config``)."""

    def __init__(self) -> None:
        self.done: list[tuple[str, str, str | None, str | None]] = []
        self.crash_in: set[str] = set()
        """Refs whose next run crashes after its effect (once)."""

    def tools(self, **metadata: Any) -> list[BaseTool]:
        effects = self

        @tool
        def pay(ref: str, runtime: ToolRuntime) -> str:
            """Pay."""
            effects.done.append(("pay", ref, current_idempotency_key(), runtime.config["metadata"].get(
                "idempotency_key")))
            if ref in effects.crash_in:
                effects.crash_in.discard(ref)
                raise Crash(ref)
            return f"paid {ref}"

        @tool
        def lookup(ref: str) -> str:
            """Look up."""
            effects.done.append(("lookup", ref, current_idempotency_key(), None))
            return f"found {ref}"

        pay.metadata = dict(metadata) or None
        return [pay, lookup]

    def runs(self, tool_name: str = "pay") -> list[str]:
        return [ref for name, ref, _, _ in self.done if name == tool_name]


def model(*calls: tuple[str, str, str]) -> ScriptedChatModel:
    """One model turn calling ``calls`` (name, ref, id) in parallel, then a final answer listing the results."""

    def final(messages: list[Any]) -> str:
        results = sorted(str(m.content) for m in messages if isinstance(m, ToolMessage))
        return "done: " + " | ".join(results)

    turn = AIMessage("", tool_calls=[tool_call(n, {"ref": r}, id=i) for n, r, i in calls])
    return ScriptedChatModel([turn], default=final)


async def crashed(agent: Any, mode: str, inp: Any, thread: str) -> None:
    with pytest.raises(Crash):
        await call(agent, mode, inp, cfg(thread), durability="sync")


async def entries(saver: Any, thread: str) -> list[Any]:
    return await ledger_store(saver).aentries(thread)


def turn(text: str = "go") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


# -- recording and keys --------------------------------------------------------------------------------------------
async def test_each_call_is_recorded_with_its_result_and_a_key_the_tool_sees(saver: Any, mode: str) -> None:
    fx = Effects()
    agent = create_agent(model(("pay", "a", "c1"), ("pay", "b", "c2")), fx.tools(), checkpointer=saver)
    out = await call(agent, mode, turn(), cfg("t"))
    assert out["messages"][-1].content == "done: paid a | paid b"
    recorded = sorted((await entries(saver, "t")), key=lambda e: e[0].call_id)
    assert [(k.call_id, e.status, e.attempt, e.tool) for k, e in recorded] == [
        ("c1", "finished", 1, "pay"), ("c2", "finished", 1, "pay")]
    assert [ledger_store(saver).serde.loads_typed(e.result).content for _, e in recorded] == ["paid a", "paid b"]
    keys = {ref: (seen, in_config) for _, ref, seen, in_config in fx.done}
    for key, _ in recorded:
        ref = "a" if key.call_id == "c1" else "b"
        assert keys[ref] == (idempotency_key(key), idempotency_key(key))
        assert key.thread_id == "t" and key.checkpoint_ns.startswith("tools:")
    assert keys["a"][0] != keys["b"][0]


async def test_a_tool_call_id_reused_in_a_later_turn_is_a_new_call(saver: Any, mode: str) -> None:
    fx = Effects()
    again = AIMessage("", tool_calls=[tool_call("pay", {"ref": "b"}, id="c1")])
    scripted = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("pay", {"ref": "a"}, id="c1")]), "one",
                                  again, "two"])
    agent = create_agent(scripted, fx.tools(), checkpointer=saver)
    await call(agent, mode, turn(), cfg("t"))
    out = await call(agent, mode, turn("again"), cfg("t"))
    assert fx.runs() == ["a", "b"]
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["paid a", "paid b"]


async def test_without_a_checkpointer_there_is_no_ledger_and_no_key(mode: str) -> None:
    fx = Effects()
    agent = create_agent(model(("pay", "a", "c1")), fx.tools())
    out = await call(agent, mode, turn(), None)
    assert out["messages"][-1].content == "done: paid a"
    assert fx.done == [("pay", "a", None, None)]


# -- replay --------------------------------------------------------------------------------------------------------
class CrashAfterTool(AgentMiddleware):
    """Dies after the tool returned (its result recorded), before the step's writes are saved."""

    def __init__(self, once: set[str]) -> None:
        super().__init__()
        self.once = once

    def _after(self, request: Any, result: Any) -> Any:
        if request.tool_call["id"] in self.once:
            self.once.discard(request.tool_call["id"])
            raise Crash(request.tool_call["id"])
        return result

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._after(request, handler(request))

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._after(request, await handler(request))


async def test_a_finished_call_is_not_run_again_when_the_step_is_replayed(saver: Any, mode: str) -> None:
    fx = Effects()
    agent = create_agent(model(("pay", "a", "c1")), fx.tools(), checkpointer=saver,
                         middleware=[CrashAfterTool({"c1"})])
    await crashed(agent, mode, turn(), "t")
    out = await call(agent, mode, None, cfg("t"), durability="sync")
    assert fx.runs() == ["a"]
    assert out["messages"][-1].content == "done: paid a"
    assert_paired(out["messages"])


async def test_with_the_ledger_off_a_replayed_step_runs_the_tool_again(saver: Any, mode: str) -> None:
    fx = Effects()
    agent = create_agent(model(("pay", "a", "c1")), fx.tools(), checkpointer=saver, ledger=False,
                         middleware=[CrashAfterTool({"c1"})])
    await crashed(agent, mode, turn(), "t")
    await call(agent, mode, None, cfg("t"), durability="sync")
    assert fx.runs() == ["a", "a"]
    assert await entries(saver, "t") == []


@pytest.mark.parametrize("how", ["metadata", "exclude"])
async def test_a_tool_opted_out_is_run_again_on_replay(saver: Any, mode: str, how: str) -> None:
    fx = Effects()
    tools = fx.tools(ledger=False) if how == "metadata" else fx.tools()
    agent = create_agent(model(("pay", "a", "c1")), tools, checkpointer=saver,
                         ledger=Ledger(exclude=["pay"]) if how == "exclude" else None,
                         middleware=[CrashAfterTool({"c1"})])
    await crashed(agent, mode, turn(), "t")
    await call(agent, mode, None, cfg("t"), durability="sync")
    assert fx.runs() == ["a", "a"]
    assert fx.done[0][2] is None  # no key outside the ledger


# -- in-doubt calls ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("decision", ["retry", "skip", "done"])
async def test_an_in_doubt_call_pauses_the_run_until_a_person_decides(saver: Any, mode: str, decision: str) -> None:
    fx = Effects()
    fx.crash_in.add("a")
    agent = create_agent(model(("pay", "a", "c1")), fx.tools(), checkpointer=saver)
    await crashed(agent, mode, turn(), "t")
    paused = await call(agent, mode, None, cfg("t"), durability="sync")
    [pending] = paused["__interrupt__"]
    value = pending.value
    json.dumps(value)  # JSON-ready, for LangGraph Server
    assert pending.response_schema == RESPONSE_SCHEMA
    [(key, entry)] = await entries(saver, "t")
    assert entry.status == "started"
    assert value["type"] == "tool_call_in_doubt" and value["attempt"] == 1
    assert value["tool_call"] == {"name": "pay", "args": {"ref": "a"}, "id": "c1"}
    assert value["idempotency_key"] == idempotency_key(key) == fx.done[0][2]
    answer = {"retry": {"type": "retry"}, "skip": {"type": "skip", "message": "not paid; ask the user"},
              "done": {"type": "done", "result": "paid a (reconciled)"}}[decision]
    out = await call(agent, mode, Command(resume=answer), cfg("t"))
    result = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(result) == 1
    if decision == "retry":
        assert fx.runs() == ["a", "a"] and fx.done[0][2] == fx.done[1][2]  # the same key on the retry
        assert result[0].content == "paid a"
        assert [e.attempt for _, e in await entries(saver, "t")] == [2]
    elif decision == "skip":
        assert fx.runs() == ["a"] and result[0].status == "error" and result[0].content == "not paid; ask the user"
    else:
        assert fx.runs() == ["a"] and result[0].content == "paid a (reconciled)" and result[0].status == "success"
    assert out["messages"][-1].content == f"done: {result[0].content}"
    assert_paired(out["messages"])


async def test_an_in_doubt_idempotent_tool_is_retried_without_asking(saver: Any, mode: str) -> None:
    for ledger, metadata in ((None, {"idempotent": True}), (Ledger(idempotent=["pay"]), {})):
        fx = Effects()
        fx.crash_in.add("a")
        agent = create_agent(model(("pay", "a", "c1")), fx.tools(**metadata), checkpointer=saver, ledger=ledger)
        thread = f"t-{bool(ledger)}"
        await crashed(agent, mode, turn(), thread)
        out = await call(agent, mode, None, cfg(thread), durability="sync")
        assert "__interrupt__" not in out
        assert out["messages"][-1].content == "done: paid a"
        assert fx.runs() == ["a", "a"] and fx.done[0][2] == fx.done[1][2]


@pytest.mark.parametrize("style", ["sync", "async"])
async def test_a_reconcile_hook_decides_or_hands_over_to_a_person(saver: Any, mode: str, style: str) -> None:
    seen: list[tuple[InDoubtCall, Any]] = []

    def decide(call_: InDoubtCall, runtime: Any) -> Any:
        seen.append((call_, runtime))
        return MarkDone("paid a (provider says so)") if call_.args["ref"] == "a" else None

    async def adecide(call_: InDoubtCall, runtime: Any) -> Any:
        return decide(call_, runtime)

    fx = Effects()
    fx.crash_in.update({"a", "b"})
    agent = create_agent(model(("pay", "a", "c1"), ("pay", "b", "c2")), fx.tools(), checkpointer=saver,
                         ledger=Ledger(reconcile=decide if style == "sync" else adecide))
    await crashed(agent, mode, turn(), "t")
    if len(fx.runs()) < 2:  # the crash of one call stopped the other before it started: it runs now
        fx.crash_in.discard("b" if fx.runs() == ["a"] else "a")
    paused = await call(agent, mode, None, cfg("t"), durability="sync")
    asked = [i.value["tool_call"]["id"] for i in paused.get("__interrupt__", ())]
    assert set(asked) <= {"c2"} and all(isinstance(r, ToolRuntime) for _, r in seen)
    assert {c.call_id for c, _ in seen} | {"c2"} >= {"c1"}
    out = paused
    for pending in paused.get("__interrupt__", ()):
        out = await call(agent, mode, Command(resume={pending.id: Skip("not paid")}), cfg("t"))
    contents = sorted(str(m.content) for m in out["messages"] if isinstance(m, ToolMessage))
    assert contents in (["not paid", "paid a (provider says so)"], ["paid a (provider says so)", "paid b"])
    assert_paired(out["messages"])


async def test_a_reconcile_hook_that_returns_no_decision_is_named(saver: Any, mode: str) -> None:
    fx = Effects()
    fx.crash_in.add("a")
    agent = create_agent(model(("pay", "a", "c1")), fx.tools(), checkpointer=saver,
                         ledger=Ledger(reconcile=lambda c, r: cast(Any, "retry")))
    await crashed(agent, mode, turn(), "t")
    with pytest.raises(LedgerConfigError) as err:
        await call(agent, mode, None, cfg("t"), durability="sync")
    assert err.value.middleware == "ledger" and err.value.hook == "reconcile"
    assert "returned 'retry' for the in-doubt call 'pay' (id 'c1'); return Retry(), Skip(message)" in str(err.value)


async def test_a_resume_that_is_no_decision_is_refused_with_the_forms_it_takes(saver: Any, mode: str) -> None:
    fx = Effects()
    fx.crash_in.add("a")
    agent = create_agent(model(("pay", "a", "c1")), fx.tools(), checkpointer=saver)
    await crashed(agent, mode, turn(), "t")
    await call(agent, mode, None, cfg("t"), durability="sync")
    with pytest.raises(LedgerResumeError) as err:
        await call(agent, mode, Command(resume={"type": "approve"}), cfg("t"))
    assert err.value.hook == "reconcile"
    assert "does not answer the in-doubt call 'pay' (id 'c1'); resume with {\"type\": \"retry\"}" in str(err.value)
    out = await call(agent, mode, Command(resume=Retry()), cfg("t"))  # still pending: a valid answer applies
    assert out["messages"][-1].content == "done: paid a"


# -- tools that raise, interrupt, or are called again --------------------------------------------------------------
async def test_a_tool_that_raises_is_not_in_doubt_and_a_retry_layer_keeps_its_key(saver: Any, mode: str) -> None:
    keys: list[str | None] = []

    @tool
    def flaky(ref: str) -> str:
        """Fails on its first run."""
        keys.append(current_idempotency_key())
        if len(keys) == 1:
            raise ConnectionError("provider timed out")
        return f"ok {ref}"

    agent = create_agent(model(("flaky", "a", "c1")), [flaky], checkpointer=saver,
                         middleware=[ToolRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)])
    out = await call(agent, mode, turn(), cfg("t"))
    assert out["messages"][-1].content == "done: ok a"
    assert len(keys) == 2 and keys[0] == keys[1] is not None
    assert [(e.status, e.attempt) for _, e in await entries(saver, "t")] == [("finished", 1)]


async def test_a_tool_that_interrupts_runs_again_on_resume_as_without_the_ledger(saver: Any, mode: str) -> None:
    asked: list[Any] = []

    @tool
    def confirm(ref: str) -> str:
        """Asks first."""
        answer = interrupt({"confirm": ref})
        asked.append(answer)
        return f"confirmed {ref}: {answer}"

    agent = create_agent(model(("confirm", "a", "c1")), [confirm], checkpointer=saver)
    paused = await call(agent, mode, turn(), cfg("t"))
    assert paused["__interrupt__"][0].value == {"confirm": "a"}
    out = await call(agent, mode, Command(resume="yes"), cfg("t"))
    assert asked == ["yes"] and out["messages"][-1].content == "done: confirmed a: yes"


class CallTwice(AgentMiddleware):
    """Calls the tool handler twice in one step and returns the second result."""

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        handler(request)
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        await handler(request)
        return await handler(request)


async def test_a_middleware_calling_the_handler_again_in_one_step_runs_the_tool_again(saver: Any, mode: str) -> None:
    fx = Effects()
    agent = create_agent(model(("pay", "a", "c1")), fx.tools(), checkpointer=saver, middleware=[CallTwice()])
    await call(agent, mode, turn(), cfg("t"))
    assert fx.runs() == ["a", "a"]
    assert [(e.status, e.attempt) for _, e in await entries(saver, "t")] == [("finished", 2)]


# -- configuration -------------------------------------------------------------------------------------------------
def test_unknown_tool_names_and_bad_options_are_refused_when_the_agent_is_built() -> None:
    tools = Effects().tools()
    with pytest.raises(LedgerConfigError) as err:
        create_agent(ScriptedChatModel(), tools, ledger=Ledger(idempotent=["pya"]))
    assert err.value.hook == "idempotent"
    assert "Ledger(idempotent=...) names ['pya'], which the agent has no tool for (its tools: ['lookup', 'pay'])" in (
        str(err.value))
    with pytest.raises(LedgerConfigError) as bad:
        create_agent(ScriptedChatModel(), tools, ledger="on")  # type: ignore[arg-type]
    assert bad.value.middleware == "create_agent" and bad.value.hook == "ledger"
    assert "pass a Ledger(...) to tune the call ledger, or False to turn it off" in str(bad.value)


async def test_a_thread_s_records_are_deleted_with_it(saver: Any, mode: str) -> None:
    fx = Effects()
    agent = create_agent(model(("pay", "a", "c1")), fx.tools(), checkpointer=saver)
    await call(agent, mode, turn(), cfg("t"))
    store = ledger_store(saver)
    assert len(await entries(saver, "t")) == 1
    if mode == "invoke":
        store.delete_thread("t")
    else:
        await store.adelete_thread("t")
    assert await entries(saver, "t") == []
    assert isinstance(CallKey("t", "", "c"), CallKey)


async def test_a_command_result_is_replayed_as_recorded(saver: Any, mode: str) -> None:
    runs: list[str] = []

    @tool
    def remember(ref: str, runtime: ToolRuntime) -> Command[Any]:
        """Stores a note in the conversation."""
        runs.append(ref)
        return Command(update={"messages": [ToolMessage(f"noted {ref}", tool_call_id=runtime.tool_call_id or "")]})

    agent = create_agent(model(("remember", "x", "c1")), [remember], checkpointer=saver,
                         middleware=[CrashAfterTool({"c1"})])
    await crashed(agent, mode, turn(), "t")
    out = await call(agent, mode, None, cfg("t"), durability="sync")
    assert runs == ["x"]
    assert out["messages"][-1].content == "done: noted x"
    assert_paired(out["messages"])
