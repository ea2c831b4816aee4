"""``current_agent()``: node hooks read their agent's model-call defaults, per run, re-entrant, under concurrency and
nesting; and SummarizationMiddleware, a ``before_model`` hook, counts them."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from pydantic import BaseModel

from middleware_kit import (
    AgentMiddleware,
    after_agent,
    after_model,
    before_agent,
    before_model,
    create_agent,
    wrap_model_call,
)
from middleware_kit.agent_defaults import AgentDefaults, agent_scope, current_agent
from middleware_kit.middlewares._tokens import TiktokenCounter
from middleware_kit.middlewares.summarization import SummarizationMiddleware, is_summary
from middleware_kit.testing import ScriptedChatModel, run_hook
from tests.conftest import Runner, add, echo

Q = {"messages": [HumanMessage("hi")]}


def seen_by(hooks: list[tuple[str, AgentDefaults | None]], name: str) -> Callable[..., None]:
    def record(state: Any, runtime: Any) -> None:
        hooks.append((name, current_agent()))

    return record


# -- what node hooks see ---------------------------------------------------------------------------------------
class Answer(BaseModel):
    text: str


class WithTool(AgentMiddleware):
    def __init__(self) -> None:
        self.tools = [echo]


def test_every_hook_of_the_agent_sees_its_defaults(run: Runner) -> None:
    seen: list[tuple[str, AgentDefaults | None]] = []

    @wrap_model_call
    def wrapper(request: Any, handler: Any) -> Any:
        seen.append(("wrap_model_call", current_agent()))
        return handler(request)

    in_tool: list[AgentDefaults | None] = []

    @tool
    def probe(x: int) -> int:
        """Probe."""
        in_tool.append(current_agent())
        return x

    model = ScriptedChatModel([
        AIMessage("", tool_calls=[{"name": "probe", "args": {"x": 1}, "id": "c1"}]),
        AIMessage("", tool_calls=[{"name": "Answer", "args": {"text": "done"}, "id": "c2"}]),
    ])
    middleware = [
        before_agent(name="BA")(seen_by(seen, "before_agent")), before_model(name="BM")(seen_by(seen, "before_model")),
        after_model(name="AM")(seen_by(seen, "after_model")), after_agent(name="AA")(seen_by(seen, "after_agent")),
        wrapper, WithTool(),
    ]
    agent = create_agent(model, [probe, add], system_prompt="Be brief.", middleware=middleware, response_format=Answer)
    result = run(agent, Q)
    assert result["structured_response"] == Answer(text="done")
    assert {name for name, _ in seen} == {"before_agent", "before_model", "after_model", "after_agent",
                                          "wrap_model_call"}
    first = seen[0][1]
    assert first is not None and all(defaults is first for _, defaults in seen)  # built once per agent
    assert first.model is model and first.system_prompt == "Be brief."
    assert isinstance(first.system_message, SystemMessage)
    assert [t.name for t in first.tools if isinstance(t, BaseTool)] == ["probe", "add", "echo"]
    assert first.response_format is not None and dict(first.model_settings) == {}
    assert model.calls[0].tools is not None  # the model did get the tools the defaults list
    assert in_tool == [None]  # tools run outside node hooks
    assert current_agent() is None  # and nothing leaks out of the run


def test_defaults_are_frozen() -> None:
    defaults = AgentDefaults(system_message=SystemMessage("x"), tools=[add], model_settings={"temperature": 0})  # type: ignore[arg-type]
    assert isinstance(defaults.tools, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        defaults.system_message = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        defaults.model_settings["temperature"] = 1  # type: ignore[index]


def test_outside_an_agent_there_are_none_and_agent_scope_sets_them() -> None:
    assert current_agent() is None
    defaults = AgentDefaults(system_message=SystemMessage("Be brief."), tools=(add,))
    with agent_scope(defaults) as entered:
        assert entered is defaults and current_agent() is defaults
        with agent_scope(None):
            assert current_agent() is None
        assert current_agent() is defaults
    assert current_agent() is None
    request = defaults.request([HumanMessage("hi")], model=ScriptedChatModel([]))
    assert request.system_prompt == "Be brief." and request.tools == [add]
    with pytest.raises(ValueError, match="no model"):
        defaults.request([HumanMessage("hi")])


def test_a_failing_hook_leaves_nothing_current(run: Runner) -> None:
    @before_model
    def boom(state: Any, runtime: Any) -> None:
        assert current_agent() is not None
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run(create_agent(ScriptedChatModel(["a"]), middleware=[boom]), Q)
    assert current_agent() is None


# -- per run: two agents sharing one middleware instance, in parallel ------------------------------------------
class Recorder(AgentMiddleware):
    """One instance shared by two agents: records (the input's marker, the system prompt it saw) per hook call."""

    def __init__(self, pause: threading.Barrier | None = None) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.pause = pause

    def _record(self, state: Any) -> None:
        defaults = current_agent()
        self.seen.append((str(state["messages"][0].content), defaults.system_prompt if defaults else "NONE"))

    def before_model(self, state: Any, runtime: Any) -> None:
        self._record(state)
        if self.pause is not None:
            self.pause.wait(timeout=10)  # both agents have entered their node
        self._record(state)
        if self.pause is not None:
            self.pause.wait(timeout=10)  # and neither leaves it before both recorded again

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self._record(state)
        await asyncio.sleep(0.001)  # the other agents' tasks run here
        self._record(state)
        await asyncio.sleep(0.001)


def test_two_agents_sharing_one_middleware_see_their_own_defaults_in_parallel(mode: str) -> None:
    runs = 24
    shared = Recorder(threading.Barrier(2) if mode == "invoke" else None)
    agents = {name: create_agent(ScriptedChatModel([], default="ok"), system_prompt=f"I am {name}.",
                                 middleware=[shared]) for name in ("A", "B")}

    def inp(name: str, i: int) -> dict[str, Any]:
        return {"messages": [HumanMessage(f"{name}{i}")]}

    if mode == "invoke":
        with ThreadPoolExecutor(2) as pool:
            for i in range(runs):
                list(pool.map(lambda name, i=i: agents[name].invoke(inp(name, i)), ["A", "B"]))
    else:
        async def main() -> None:
            await asyncio.gather(*(agents[n].ainvoke(inp(n, i)) for i in range(runs) for n in ("A", "B")))

        asyncio.run(main())
    assert len(shared.seen) == 2 * 2 * runs
    assert all(prompt == f"I am {marker[0]}." for marker, prompt in shared.seen), shared.seen[:6]


# -- nesting: an agent inside another agent's node, an agent as a subgraph -------------------------------------
def test_an_agent_run_inside_another_agents_hook_sees_its_own_and_restores_the_outer(run: Runner, mode: str) -> None:
    seen: list[tuple[str, str | None]] = []

    @before_model(name="InnerProbe")
    def inner_probe(state: Any, runtime: Any) -> None:
        defaults = current_agent()
        seen.append(("inner", defaults.system_prompt if defaults else None))

    inner = create_agent(ScriptedChatModel([], default="inner answer"), system_prompt="inner", middleware=[inner_probe])

    class Outer(AgentMiddleware):
        def before_model(self, state: Any, runtime: Any) -> None:
            seen.append(("outer before", _prompt()))
            inner.invoke({"messages": [HumanMessage("nested")]})
            seen.append(("outer after", _prompt()))

        async def abefore_model(self, state: Any, runtime: Any) -> None:
            seen.append(("outer before", _prompt()))
            await inner.ainvoke({"messages": [HumanMessage("nested")]})
            seen.append(("outer after", _prompt()))

    run(create_agent(ScriptedChatModel([], default="outer answer"), system_prompt="outer", middleware=[Outer()]), Q)
    assert seen == [("outer before", "outer"), ("inner", "inner"), ("outer after", "outer")]


def _prompt() -> str | None:
    defaults = current_agent()
    return defaults.system_prompt if defaults else None


def test_agents_as_subgraph_nodes_each_see_their_own(run: Runner) -> None:
    shared = Recorder()
    first = create_agent(ScriptedChatModel([], default="one"), system_prompt="I am h.", middleware=[shared])
    second = create_agent(ScriptedChatModel([], default="two"), [add], system_prompt="I am h2.", middleware=[shared])
    graph = StateGraph(MessagesState)
    graph.add_node("first", first)
    graph.add_node("second", second)
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    result = run(graph.compile(checkpointer=InMemorySaver()), {"messages": [HumanMessage("h")]},
                 config={"configurable": {"thread_id": "sub"}})
    assert [m.content for m in result["messages"]] == ["h", "one", "two"]
    assert [prompt for _, prompt in shared.seen] == ["I am h."] * 2 + ["I am h2."] * 2


# -- SummarizationMiddleware counts the agent's system prompt and tools from before_model ----------------------
LONG_PROMPT = "You answer questions about the weather, politely, in full sentences. " * 20


def _whole_request_tokens(messages: list[AnyMessage], tools: list[Any]) -> int:
    counter = TiktokenCounter("cl100k_base")
    return counter([SystemMessage(LONG_PROMPT), *messages]) + counter.count_tools(tools)


def test_the_trigger_counts_the_agents_system_prompt_and_tools(run: Runner) -> None:
    history: list[AnyMessage] = [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]
    messages_only = TiktokenCounter("cl100k_base")(history)
    whole = _whole_request_tokens(history, [add, echo])
    assert whole > messages_only * 5
    mw = SummarizationMiddleware(ScriptedChatModel([], default="S"), trigger=("tokens", whole), keep=("messages", 1))
    with_prompt = create_agent(ScriptedChatModel([], default="a"), [add, echo], system_prompt=LONG_PROMPT,
                               middleware=[mw])
    bare = create_agent(ScriptedChatModel([], default="a"), middleware=[mw])  # the same instance
    assert is_summary(run(with_prompt, {"messages": history})["messages"][0])
    assert not any(is_summary(m) for m in run(bare, {"messages": history})["messages"])
    # One token below the whole request: it does not fire.
    above = mw.replace(trigger=("tokens", whole + 1))
    assert not any(is_summary(m) for m in run(create_agent(
        ScriptedChatModel([], default="a"), [add, echo], system_prompt=LONG_PROMPT, middleware=[above]),
        {"messages": history})["messages"])


def test_the_hook_called_directly_counts_what_agent_scope_gives() -> None:
    history: list[AnyMessage] = [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]
    whole = _whole_request_tokens(history, [add, echo])
    mw = SummarizationMiddleware(ScriptedChatModel([], default="S"), trigger=("tokens", whole), keep=("messages", 1))
    assert run_hook(mw, "before_model", {"messages": history}) is None  # messages only: below the trigger
    with agent_scope(AgentDefaults(system_message=SystemMessage(LONG_PROMPT), tools=(add, echo))):
        update = run_hook(mw, "before_model", {"messages": history})
    assert update is not None and is_summary(update["messages"][1]) and update["messages"][2:] == history[2:]


class Pause(AgentMiddleware):
    """Yields the thread or the event loop in before_model, so concurrent runs interleave inside their nodes."""

    def before_model(self, state: Any, runtime: Any) -> None:
        time.sleep(0.005)

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_two_agents_share_one_summarizer_concurrently_each_with_its_own_prompt(
    kind: str, mode: str, tmp_path: Path
) -> None:
    # One SummarizationMiddleware instance in two agents, run concurrently on one checkpointer: the one with the long
    # system prompt summarizes (its whole request reaches the trigger), the other never does, in every thread.
    history: list[AnyMessage] = [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]
    whole = _whole_request_tokens(history, [add, echo])
    mw = SummarizationMiddleware(ScriptedChatModel([], default="S"), trigger=("tokens", whole), keep=("messages", 1))
    with _saver(kind, mode, tmp_path) as (saver, call, state):
        pause = Pause()  # before summarization: the other agent's node starts while this one waits
        big = create_agent(ScriptedChatModel([], default="a"), [add, echo], system_prompt=LONG_PROMPT,
                           middleware=[pause, mw], checkpointer=saver)
        small = create_agent(ScriptedChatModel([], default="a"), [add, echo], middleware=[pause, mw],
                             checkpointer=saver)
        jobs = [(big, True, f"big-{i}") for i in range(8)] + [(small, False, f"small-{i}") for i in range(8)]

        def config(thread: str) -> Any:
            return {"configurable": {"thread_id": thread}}

        if mode == "invoke":
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda job: call(job[0], {"messages": list(history)}, config(job[2])), jobs))
        else:
            async def together() -> None:
                await asyncio.gather(
                    *(agent.ainvoke({"messages": list(history)}, config(thread)) for agent, _, thread in jobs))

            call.loop.run_until_complete(together())  # type: ignore[attr-defined]
        for agent, summarized, thread in jobs:
            stored = state(agent, config(thread))
            assert is_summary(stored[0]) is summarized, thread
            assert [m.content for m in stored[-2:]] == ["q1", "a"]


@contextmanager
def _saver(kind: str, mode: str, tmp_path: Path) -> Iterator[tuple[Any, Callable[..., Any], Callable[..., Any]]]:
    """(saver, call(agent, input, config), state(agent, config)) in the mode; one event loop for ainvoke."""
    if mode == "invoke":
        conn = sqlite3.connect(tmp_path / "cp.db", check_same_thread=False) if kind == "sqlite" else None
        saver = SqliteSaver(conn) if conn is not None else InMemorySaver()
        try:
            yield (saver, lambda agent, inp, config: agent.invoke(inp, config),
                   lambda agent, config: agent.get_state(config).values["messages"])
        finally:
            if conn is not None:
                conn.close()
        return
    loop = asyncio.new_event_loop()
    manager = AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.db")) if kind == "sqlite" else None
    asaver = loop.run_until_complete(manager.__aenter__()) if manager is not None else InMemorySaver()

    def acall(agent: Any, inp: Any, config: Any) -> Any:
        return loop.run_until_complete(agent.ainvoke(inp, config))

    acall.loop = loop  # type: ignore[attr-defined]
    try:
        yield (asaver, acall,
               lambda agent, config: loop.run_until_complete(agent.aget_state(config)).values["messages"])
    finally:
        if manager is not None:
            loop.run_until_complete(manager.__aexit__(None, None, None))
        loop.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_summaries_persist_and_roll_over_turns(kind: str, mode: str, tmp_path: Path) -> None:
    summarizer = ScriptedChatModel(["S1", "S2", "S3"])
    model = ScriptedChatModel([], default="a")
    mw = SummarizationMiddleware(summarizer, trigger=("messages", 4), keep=("messages", 1))
    config: Any = {"configurable": {"thread_id": f"roll-{kind}"}}
    with _saver(kind, mode, tmp_path) as (saver, call, state):
        agent = create_agent(model, [add], system_prompt="Be brief.", middleware=[mw], checkpointer=saver)
        call(agent, {"messages": [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]}, config)
        for i in (2, 3, 4):
            call(agent, {"messages": [HumanMessage(f"q{i}")]}, config)
        history = state(agent, config)
    assert summarizer.call_count == 3
    assert [is_summary(m) for m in history] == [True, False, False]
    assert history[0].content.endswith("S3") and history[0].additional_kwargs == {"lc_source": "summarization"}
    assert [m.content for m in history[1:]] == ["q4", "a"]
    for call_ in model.calls:  # the model always got the stored history (summary first when there is one)
        assert sum(is_summary(m) for m in call_.messages) <= 1


def test_summarization_runs_in_order_among_before_model_hooks(run: Runner) -> None:
    seen: dict[str, list[str]] = {}

    def probe(name: str) -> Any:
        @before_model(name=name)
        def look(state: Any, runtime: Any) -> None:
            seen[name] = ["summary" if is_summary(m) else str(m.content) for m in state["messages"]]

        return look

    mw = SummarizationMiddleware(ScriptedChatModel([], default="S"), trigger=("messages", 3), keep=("messages", 1))
    history = [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]
    run(create_agent(ScriptedChatModel(["final"]), middleware=[probe("Before"), mw, probe("After")]),
        {"messages": history})
    assert seen == {"Before": ["q0", "a0", "q1"], "After": ["summary", "q1"]}


def test_an_agent_with_summarization_as_a_subgraph_counts_its_own_prompt(run: Runner) -> None:
    # Two agents as nodes of one graph share a SummarizationMiddleware: inside the outer graph each counts its own
    # system prompt, so only the first (long prompt) summarizes what its model is sent.
    history: list[AnyMessage] = [HumanMessage("q0"), AIMessage("a0"), HumanMessage("q1")]
    whole = _whole_request_tokens(history, [])
    summarizer = ScriptedChatModel([], default="S")
    mw = SummarizationMiddleware(summarizer, trigger=("tokens", whole), keep=("messages", 1))
    first_model, second_model = ScriptedChatModel([], default="one"), ScriptedChatModel([], default="two")
    graph = StateGraph(MessagesState)
    graph.add_node("first", create_agent(first_model, system_prompt=LONG_PROMPT, middleware=[mw]))
    graph.add_node("second", create_agent(second_model, system_prompt="Be brief.", middleware=[mw]))
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    run(graph.compile(checkpointer=InMemorySaver()), {"messages": history},
        config={"configurable": {"thread_id": "nested-summaries"}})
    (first_call,), (second_call,) = first_model.calls, second_model.calls
    first_sent = [m for m in first_call.messages if not isinstance(m, SystemMessage)]
    assert is_summary(first_sent[0]) and [m.content for m in first_sent[1:]] == ["q1"]
    # The second did not summarize: its model got the parent's history as it is (LangGraph merges a subgraph's output
    # by message id, so the first agent's summary sits after the messages it replaced inside the first agent).
    assert [m.content for m in second_call.messages[1:4]] == ["q0", "a0", "q1"]
    assert summarizer.call_count == 1


def test_runs_with_callback_handlers_see_the_defaults_too(run: Runner) -> None:
    # A run with callback handlers takes the traced twin of each node (hook runs as callback runs): same defaults.
    seen: list[AgentDefaults | None] = []

    @before_model
    def probe(state: Any, runtime: Any) -> None:
        seen.append(current_agent())

    agent = create_agent(ScriptedChatModel(["ok"]), system_prompt="Traced.", middleware=[probe])
    run(agent, Q, config={"callbacks": [BaseCallbackHandler()]})
    assert [d.system_prompt if d else None for d in seen] == ["Traced."]
