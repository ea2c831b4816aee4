"""Context, concurrency, checkpoints per run, interrupts through wrappers, dangling-call repair."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, NotRequired

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from middleware_kit import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    before_model,
    create_agent,
    dynamic_prompt,
    hook_config,
    wrap_model_call,
    wrap_tool_call,
)
from middleware_kit.run_control import PendingApprovalError, RunControl
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner, add
from tests.helpers import kinds, tool_then_answer


class ModeState(AgentState):
    mode: NotRequired[str]


@dataclass
class Tenant:
    tenant: str
    limit: int = 1


def test_context_is_typed_in_every_hook_and_dicts_are_coerced(run: Runner) -> None:
    seen: list[Any] = []

    @before_model
    def node_hook(state: Any, runtime: Runtime[Tenant]) -> None:
        seen.append(("node", runtime.context))

    @dynamic_prompt
    def prompt(request: ModelRequest[Tenant]) -> str:
        assert request.runtime is not None
        seen.append(("model", request.runtime.context))
        return f"tenant {request.runtime.context.tenant}"

    @wrap_tool_call
    def tool_hook(request: Any, handler: Any) -> Any:
        seen.append(("tool", request.runtime.context))
        return handler(request)

    model = tool_then_answer()
    agent = create_agent(model, [add], middleware=[node_hook, prompt, tool_hook], context_schema=Tenant)
    run(agent, {"messages": [HumanMessage("q")]}, context={"tenant": "acme", "limit": 3})
    assert {where for where, _ in seen} == {"node", "model", "tool"}
    assert all(ctx == Tenant("acme", 3) for _, ctx in seen)
    assert model.calls[0].messages[0].content == "tenant acme"


class PydanticContext(BaseModel):
    user: str


def test_pydantic_context_schema(run: Runner) -> None:
    seen: list[Any] = []

    @before_model
    def hook(state: Any, runtime: Runtime[PydanticContext]) -> None:
        seen.append(runtime.context)

    run(create_agent(ScriptedChatModel(["a"]), middleware=[hook], context_schema=PydanticContext),
        {"messages": [HumanMessage("q")]}, context={"user": "ann"})
    assert seen == [PydanticContext(user="ann")]


def test_sixteen_concurrent_invocations_see_only_their_own_context() -> None:
    class Stamp(AgentMiddleware):
        """Stateless: everything per run comes from the runtime."""

        async def abefore_model(self, state: Any, runtime: Runtime[Tenant]) -> dict[str, Any]:
            await asyncio.sleep(0.001)
            return {"messages": [HumanMessage(f"ctx={runtime.context.tenant}")]}

        def wrap_model_call(self, request: ModelRequest[Tenant], handler: Any) -> Any:
            assert request.runtime is not None
            return handler(request.override(system_prompt=f"tenant={request.runtime.context.tenant}"))

    def reply(messages: list[Any]) -> str:
        return f"{messages[0].content} / {messages[-1].content}"

    agent = create_agent(ScriptedChatModel(default=reply), middleware=[Stamp()], context_schema=Tenant)

    async def main() -> list[Any]:
        return await asyncio.gather(*(
            agent.ainvoke({"messages": [HumanMessage(f"user {i}")]}, context=Tenant(f"t{i}")) for i in range(16)
        ))

    results = asyncio.run(main())
    for i, result in enumerate(results):
        assert result["messages"][-1].content == f"tenant=t{i} / ctx=t{i}"


def test_sixteen_concurrent_sync_invocations_in_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    @dynamic_prompt
    def prompt(request: ModelRequest[Tenant]) -> str:
        assert request.runtime is not None
        return request.runtime.context.tenant

    agent = create_agent(ScriptedChatModel(default=lambda m: m[0].content), middleware=[prompt],
                         context_schema=Tenant)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(
            lambda i: agent.invoke({"messages": [HumanMessage("q")]}, context=Tenant(f"t{i}")), range(16)
        ))
    assert [r["messages"][-1].content for r in results] == [f"t{i}" for i in range(16)]


class CountingSaver(InMemorySaver):
    def __init__(self) -> None:
        super().__init__()
        self.puts = 0

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self.puts += 1
        return super().put(*args, **kwargs)

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        self.puts += 1
        return await super().aput(*args, **kwargs)


class Noop(AgentMiddleware):
    def __init__(self, i: int) -> None:
        self.name = f"noop{i}"

    def before_model(self, state: Any, runtime: Any) -> None:
        return None

    def after_model(self, state: Any, runtime: Any) -> None:
        return None

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return handler(request)


def test_checkpoints_per_run_are_equal_for_1_and_20_middlewares(run: Runner) -> None:
    counts = []
    for n in (1, 20):
        saver = CountingSaver()
        agent = create_agent(tool_then_answer(), [add], middleware=[Noop(i) for i in range(n)], checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        run(agent, {"messages": [HumanMessage("q")]}, config=config)
        counts.append((saver.puts, len(list(agent.get_state_history(config)))))
    assert counts[0] == counts[1]


def test_graph_interrupt_passes_a_retrying_wrapper_and_resumes(run: Runner) -> None:
    attempts: list[str] = []

    @wrap_tool_call
    def stubborn_retry(request: Any, handler: Any) -> Any:
        for _ in range(3):
            try:
                return handler(request)
            except Exception as exc:  # a careless retry: catches everything
                attempts.append(type(exc).__name__)
        return ToolMessage("gave up", tool_call_id=request.tool_call["id"])

    from langchain_core.tools import tool

    @tool
    def approve_me(x: int) -> str:
        """Asks a human first."""
        answer = interrupt({"question": f"run with {x}?"})
        return f"ran with {x}: {answer}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("approve_me", {"x": 1})]), "done"])
    agent = create_agent(model, [approve_me], middleware=[stubborn_retry], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    first = run(agent, {"messages": [HumanMessage("q")]}, config=config)
    assert "__interrupt__" in first
    assert first["__interrupt__"][0].value == {"question": "run with 1?"}
    assert "GraphInterrupt" in attempts  # the wrapper did catch it, and the engine re-raised it anyway
    result = run(agent, Command(resume="yes"), config=config)
    assert [m.content for m in result["messages"]][2:] == ["ran with 1: yes", "done"]


def test_interrupt_from_an_inner_model_wrapper_passes_a_careless_outer_one(run: Runner) -> None:
    @wrap_model_call
    def careless(request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except Exception:
            return AIMessage("swallowed")  # must not win over the interrupt

    @wrap_model_call
    def gate(request: Any, handler: Any) -> Any:
        answer = interrupt("allow model call?")
        return handler(request) if answer == "yes" else AIMessage("denied")

    agent = create_agent(ScriptedChatModel(["real answer"]), middleware=[careless, gate], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    out = run(agent, {"messages": [HumanMessage("q")]}, config=config)
    assert out["__interrupt__"][0].value == "allow model call?"
    assert out["messages"][-1].content == "q"
    done = run(agent, Command(resume="yes"), config=config)
    assert done["messages"][-1].content == "real answer"


def test_interrupt_in_a_node_hook_keeps_its_own_node_and_neighbours_run_once() -> None:
    runs: list[str] = []

    @before_model
    def neighbour(state: Any, runtime: Any) -> None:
        runs.append("neighbour")

    class Approver(AgentMiddleware):
        @hook_config(may_interrupt=True)
        def before_model(self, state: Any, runtime: Any) -> None:
            runs.append("approver")
            interrupt("go?")

    agent = create_agent(ScriptedChatModel(["a"]), middleware=[neighbour, Approver()], checkpointer=InMemorySaver())
    assert "Approver.before_model" in agent.middleware_plan.nodes
    assert "* a node of its own" in str(agent.middleware_plan)
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("q")]}, config)
    agent.invoke(Command(resume=True), config)
    assert runs == ["neighbour", "approver", "approver"]


def test_dangling_calls_from_an_abandoned_interrupt_are_closed_before_the_next_model_call(run: Runner) -> None:
    from langchain_core.tools import tool

    @tool
    def ask(q: str) -> str:
        """Needs a human."""
        return str(interrupt(q))

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("ask", {"q": "?"})]), "fresh answer"])
    saver = InMemorySaver()
    # Safe by default, new input on a thread waiting for a human is refused; "abandon" drops the pending question.
    strict = create_agent(model, [ask], checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    run(strict, {"messages": [HumanMessage("first")]}, config=config)
    with pytest.raises(PendingApprovalError):
        run(strict, {"messages": [HumanMessage("second")]}, config=config)
    agent = create_agent(model, [ask], checkpointer=saver, run_control=RunControl(on_pending_input="abandon"))
    # The user never resumes; they send a new message instead.
    result = run(agent, {"messages": [HumanMessage("second")]}, config=config)
    sent = model.calls[-1].messages
    assert kinds(list(sent)) == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage"]
    assert sent[2].status == "error"
    assert kinds(result["messages"]) == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage", "AIMessage"]
    assert result["messages"][-1].content == "fresh answer"


def test_works_with_a_subclass_of_base_checkpoint_saver_in_sqlite(tmp_path: Any) -> None:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(tmp_path / "agent.sqlite", check_same_thread=False)
    saver = SqliteSaver(conn)
    assert isinstance(saver, BaseCheckpointSaver)
    agent = create_agent(tool_then_answer(), [add], middleware=[Noop(1)], checkpointer=saver)
    config = {"configurable": {"thread_id": "s"}}
    agent.invoke({"messages": [HumanMessage("q")]}, config)
    agent.invoke({"messages": [HumanMessage("again")]}, config)
    messages = agent.get_state(config).values["messages"]
    assert kinds(messages) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"] * 2
    conn.close()


@pytest.mark.parametrize("n", [0, 3])
def test_result_never_contains_private_keys(run: Runner, n: int) -> None:
    result = run(create_agent(tool_then_answer(), [add], middleware=[Noop(i) for i in range(n)]),
                 {"messages": [HumanMessage("q")]})
    assert set(result) == {"messages"}


def test_may_interrupt_after_model_hook_splits_the_node_and_the_model_runs_once(run: Runner) -> None:
    from langchain_core.messages import AIMessage as AI

    ran: list[str] = []

    class Approval(AgentMiddleware):
        @hook_config(may_interrupt=True)
        def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            ran.append("approval")
            if interrupt("approve?") != "yes":
                return {"messages": [AI("blocked")]}
            return None

    @wrap_model_call
    def count_calls(request: Any, handler: Any) -> Any:
        ran.append("model")
        return handler(request)

    from middleware_kit import after_model

    @after_model
    def outer_after(state: Any, runtime: Any) -> None:
        ran.append("outer_after")

    agent = create_agent(ScriptedChatModel(["answer"]), middleware=[outer_after, Approval(), count_calls],
                         checkpointer=InMemorySaver())
    assert agent.middleware_plan.nodes == ("model", "Approval.after_model", "outer_after.after_model")
    config = {"configurable": {"thread_id": "t"}}
    first = run(agent, {"messages": [HumanMessage("q")]}, config=config)
    assert first["__interrupt__"][0].value == "approve?"
    result = run(agent, Command(resume="yes"), config=config)
    assert ran == ["model", "approval", "approval", "outer_after"]  # the model ran once
    assert [m.content for m in result["messages"]] == ["q", "answer"]


def test_undeclared_interrupt_in_a_shared_node_warns(run: Runner) -> None:
    import warnings

    from middleware_kit import InterruptInFusedNodeWarning

    @before_model
    def first(state: Any, runtime: Any) -> None: ...

    @before_model
    def sneaky(state: Any, runtime: Any) -> None:
        interrupt("hmm")

    agent = create_agent(ScriptedChatModel(["a"]), middleware=[first, sneaky], checkpointer=InMemorySaver())
    with pytest.warns(InterruptInFusedNodeWarning, match=r"sneaky\.before_model.*may_interrupt=True"):
        run(agent, {"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": "t"}})
    # First in its node, nothing ran before it that would run again: no warning.
    alone = create_agent(ScriptedChatModel(["a"]), middleware=[sneaky], checkpointer=InMemorySaver())
    with warnings.catch_warnings():
        warnings.simplefilter("error", InterruptInFusedNodeWarning)
        run(alone, {"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": "u"}})


def test_one_model_call_writing_a_plain_key_twice_is_refused(run: Runner) -> None:

    from middleware_kit import AgentState, ConflictingUpdateError, ExtendedModelResponse

    class S(AgentState):
        mode: NotRequired[str]

    def writer(name: str) -> Any:
        @wrap_model_call(name=name, state_schema=ModeState)
        def w(request: Any, handler: Any) -> Any:
            return ExtendedModelResponse(model_response=handler(request), command=Command(update={"mode": name}))

        return w

    with pytest.raises(ConflictingUpdateError, match=r"'mode' is written twice") as err:
        run(create_agent(ScriptedChatModel(["a"]), middleware=[writer("outer"), writer("inner")]),
            {"messages": [HumanMessage("q")]})
    assert err.value.middleware == "outer"
