"""The tool node runs exactly the pending calls, however the run got there: one task per call after the model (a lone
call by the node's edge, several by one ``Send`` each), a ``jump_to: "tools"``, a resume after
``interrupt_before=["tools"]``, a resume of an interrupted tool."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware_kit import AgentMiddleware, create_agent, hook_config
from middleware_kit.testing import ScriptedChatModel, tool_call


def _tools(ran: Counter[str]) -> list[Any]:
    @tool
    def search(q: str) -> str:
        """Search."""
        ran[f"search:{q}"] += 1
        return f"found {q}"

    @tool
    def fetch(url: str) -> str:
        """Fetch."""
        ran[f"fetch:{url}"] += 1
        return f"page {url}"

    return [search, fetch]


class AnswersSearch(AgentMiddleware):
    """An ``after_model`` that answers every ``search`` call itself (a cache): only the other calls are left."""

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        last = state["messages"][-1]
        answers = [ToolMessage("cached", tool_call_id=c["id"], name=c["name"])
                   for c in getattr(last, "tool_calls", ()) if c["name"] == "search"]
        return {"messages": answers} if answers else None


def _answers(result: dict[str, Any]) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in result["messages"] if isinstance(m, ToolMessage)}


def _run(agent: Any, value: Any, config: Any, mode: str) -> dict[str, Any]:
    if mode == "invoke":
        return agent.invoke(value, config)  # type: ignore[no-any-return]
    return asyncio.run(agent.ainvoke(value, config))  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("saver", [None, "memory"])
def test_a_call_a_middleware_answered_is_not_run_by_the_tool_node(mode: str, saver: str | None) -> None:
    ran: Counter[str] = Counter()
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("search", {"q": "a"}, "c1"), tool_call("fetch", {"url": "u"}, "c2")]),
        "done",
    ])
    agent = create_agent(model, _tools(ran), middleware=[AnswersSearch()],
                         checkpointer=InMemorySaver() if saver else None)
    result = _run(agent, {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}}, mode)
    assert ran == Counter({"fetch:u": 1})  # the answered search never ran
    assert _answers(result) == {"c1": "cached", "c2": "page u"}
    assert result["messages"][-1].content == "done"


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_one_call_and_parallel_calls_each_run_once(mode: str) -> None:
    ran: Counter[str] = Counter()
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("search", {"q": "one"}, "c1")]),
        AIMessage("", tool_calls=[tool_call("search", {"q": "x"}, "c2"), tool_call("fetch", {"url": "y"}, "c3")]),
        "done",
    ])
    agent = create_agent(model, _tools(ran), checkpointer=InMemorySaver())
    result = _run(agent, {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}}, mode)
    assert ran == Counter({"search:one": 1, "search:x": 1, "fetch:y": 1})
    assert _answers(result) == {"c1": "found one", "c2": "found x", "c3": "page y"}


def _task_inputs(agent: Any, value: Any, config: Any, mode: str) -> list[Any]:
    """The input of each tool task, from the ``tasks`` stream mode (what stream consumers read a task's call from)."""
    async def collect() -> list[Any]:
        return [chunk async for chunk in agent.astream(value, config, stream_mode="tasks")]

    chunks = list(agent.stream(value, config, stream_mode="tasks")) if mode == "invoke" else asyncio.run(collect())
    return [chunk["input"] for chunk in chunks if chunk["name"] == "tools" and "input" in chunk]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("saver", [None, "memory"])
def test_each_tool_task_input_holds_its_call(mode: str, saver: str | None) -> None:
    """A lone call's task gets LangChain's ``Send`` payload (the call with the state it runs in); parallel calls get one
    ``[call]`` each."""
    ran: Counter[str] = Counter()
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("search", {"q": "one"}, "c1")]),
        AIMessage("", tool_calls=[tool_call("search", {"q": "x"}, "c2"), tool_call("fetch", {"url": "y"}, "c3")]),
        "done",
    ])
    agent = create_agent(model, _tools(ran), checkpointer=InMemorySaver() if saver else None)
    lone, *parallel = _task_inputs(agent, {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}},
                                   mode)
    assert (lone["__type"], lone["tool_call"]["id"]) == ("tool_call_with_context", "c1")
    assert [m.type for m in lone["state"]["messages"]] == ["human", "ai"]
    assert sorted(call["id"] for [call] in parallel) == ["c2", "c3"]
    assert ran == Counter({"search:one": 1, "search:x": 1, "fetch:y": 1})


def test_interrupt_before_the_tools_then_resume_runs_the_pending_call_once() -> None:
    ran: Counter[str] = Counter()
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("fetch", {"url": "u"}, "c1")]), "done"])
    agent = create_agent(model, _tools(ran), checkpointer=InMemorySaver(), interrupt_before=["tools"])
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    assert ran == Counter() and agent.get_state(config).next == ("tools",)
    result = agent.invoke(None, config)
    assert ran == Counter({"fetch:u": 1})
    assert _answers(result) == {"c1": "page u"}


def test_a_call_answered_while_paused_before_the_tools_is_not_run() -> None:
    """The state changed under a paused run: the tool node runs what is pending when it runs, not what was."""
    ran: Counter[str] = Counter()
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("fetch", {"url": "u"}, "c1")]), "done"])
    agent = create_agent(model, _tools(ran), checkpointer=InMemorySaver(), interrupt_before=["tools"])
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    agent.update_state(config, {"messages": [ToolMessage("answered by hand", tool_call_id="c1", name="fetch")]})
    result = agent.invoke(None, config)
    assert ran == Counter()
    assert _answers(result) == {"c1": "answered by hand"}


class JumpsToTools(AgentMiddleware):
    """A ``before_model`` that finds a call already pending (a resumed thread) and jumps to the tools."""

    @hook_config(can_jump_to=["tools"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return {"jump_to": "tools"}
        return None


def test_a_jump_to_the_tools_runs_the_pending_call_once() -> None:
    ran: Counter[str] = Counter()
    agent = create_agent(ScriptedChatModel(["done"]), _tools(ran), middleware=[JumpsToTools()])
    pending = AIMessage("", tool_calls=[tool_call("fetch", {"url": "u"}, "c1")])
    result = agent.invoke({"messages": [HumanMessage("go"), pending]})
    assert ran == Counter({"fetch:u": 1})
    assert _answers(result) == {"c1": "page u"}
    assert isinstance(result["messages"][-1], AIMessage) and result["messages"][-1].content == "done"


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_resume_of_an_interrupted_tool_reruns_only_that_call(mode: str, durability: str) -> None:
    """A lone call's task reads its call from the saved state when it runs again: the same call, whatever was saved
    when (every durability)."""
    from langgraph.types import interrupt

    ran: Counter[str] = Counter()

    @tool
    def approve(what: str) -> str:
        """Ask a person."""
        ran["approve"] += 1
        return f"{what}: {interrupt('ok?')}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("approve", {"what": "pay"}, "c1")]), "done"])
    agent = create_agent(model, [approve], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}

    def run(value: Any) -> dict[str, Any]:
        if mode == "invoke":
            return agent.invoke(value, config, durability=durability)  # type: ignore[no-any-return]
        return asyncio.run(agent.ainvoke(value, config, durability=durability))  # type: ignore[no-any-return]

    first = run({"messages": [HumanMessage("go")]})
    assert first["__interrupt__"]
    result = run(Command(resume="yes"))
    assert ran["approve"] == 2  # the interrupted tool runs again on resume (LangGraph's rule), once
    assert _answers(result) == {"c1": "pay: yes"}
    assert result["messages"][-1].content == "done"


# -- the route the tool node returns is routing only: streams and checkpoints carry what an edge would have left ------
def _routed_agent(ran: Counter[str]) -> Any:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("fetch", {"url": "u"}, "c1")]), "done"])
    return create_agent(model, _tools(ran), checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_tool_nodes_update_and_its_checkpoint_writes_carry_no_route(mode: str) -> None:
    ran: Counter[str] = Counter()
    agent = _routed_agent(ran)
    config = {"configurable": {"thread_id": "t"}}
    modes = ["updates", "values", "tasks", "debug", "checkpoints", "custom", "messages"]

    async def collect() -> list[Any]:
        return [c async for c in agent.astream({"messages": [HumanMessage("go")]}, config, stream_mode=modes)]

    chunks = (list(agent.stream({"messages": [HumanMessage("go")]}, config, stream_mode=modes)) if mode == "invoke"
              else asyncio.run(collect()))
    assert ran == Counter({"fetch:u": 1})
    tool_updates = [data["tools"] for kind, data in chunks if kind == "updates" and "tools" in data]
    assert len(tool_updates) == 1 and set(tool_updates[0]) == {"messages"}
    assert [m.content for m in tool_updates[0]["messages"]] == ["page u"]
    assert not any(isinstance(data, Command) or "Command(" in repr(data) for _, data in chunks)
    # the tools task wrote its message and the step to the model: what the edge after the node used to write
    saver = agent.checkpointer
    writes = [(channel, value) for (thread, _ns, _cid), per_task in saver.writes.items() if thread == "t"
              for (_task, channel, (kind, raw), _path) in per_task.values()
              for value in [saver.serde.loads_typed((kind, raw))]]
    tool_writes = [channel for channel, value in writes if channel == "messages"
                   and any(isinstance(m, ToolMessage) for m in (value if isinstance(value, list) else [value]))]
    assert tool_writes == ["messages"]
    assert "branch:to:model" in [channel for channel, _ in writes]


class SwallowsEverything(AgentMiddleware):
    """A careless ``wrap_tool_call`` that turns any exception into an answer, an interrupt included."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except BaseException:
            return ToolMessage("swallowed", tool_call_id=request.tool_call["id"], name=request.tool_call["name"])

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            return await handler(request)
        except BaseException:
            return ToolMessage("swallowed", tool_call_id=request.tool_call["id"], name=request.tool_call["name"])


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("run_control", [True, False])
def test_an_interrupt_in_a_tool_is_not_swallowed_by_a_wrapper(mode: str, run_control: bool) -> None:
    """The chain's base runs the tool without a driver step when there is nothing to time; an ``interrupt()`` in the
    tool still pauses the run, whatever a wrapper does with it, and the resume runs the tool once more, to its end."""
    from langgraph.types import interrupt

    asked: list[str] = []

    @tool
    def pay(amount: int) -> str:
        """Pay."""
        answer = interrupt(f"pay {amount}?")
        asked.append(answer)
        return f"paid {amount}: {answer}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("pay", {"amount": 5}, id="p1")]),
                               AIMessage("done")])
    agent = create_agent(model, [pay], middleware=[SwallowsEverything()], checkpointer=InMemorySaver(),
                         run_control=None if run_control else False)
    config = {"configurable": {"thread_id": f"swallow-{mode}-{run_control}"}}
    paused = _run(agent, {"messages": [HumanMessage("go")]}, config, mode)
    assert [i.value for i in paused["__interrupt__"]] == ["pay 5?"]
    assert "swallowed" not in _answers(agent.get_state(config).values).values()
    done = _run(agent, Command(resume="yes"), config, mode)
    assert _answers(done) == {"p1": "paid 5: yes"} and asked == ["yes"]
    assert done["messages"][-1].content == "done"
