"""Private state keys (``PrivateStateAttr``) never reach a stream or an output, while hooks, tools and checkpoints
keep reading and writing them (issue 18, item 4)."""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit import (
    AgentMiddleware,
    AgentState,
    OmitFromInput,
    OmitFromOutput,
    PrivateStateAttr,
    before_model,
    create_agent,
)
from middleware_kit.testing import ScriptedChatModel, tool_call

MARK = "zq-private"
MODES = ["updates", "values", "debug", "tasks", "checkpoints", "custom", "messages"]


class SecretState(AgentState[Any]):
    secret: NotRequired[Annotated[str, PrivateStateAttr]]
    tally: NotRequired[Annotated[list[str], operator.add, PrivateStateAttr]]


class Secretive(AgentMiddleware[SecretState, Any]):
    """Writes private keys in two phases and checks every later hook sees them."""

    state_schema = SecretState

    def __init__(self, seen: list[str]) -> None:
        super().__init__()
        self._seen = seen  # test instrumentation: what the hooks and the tool read

    def before_agent(self, state: SecretState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {"secret": f"{MARK}-{len(state.get('tally', []))}"}

    def before_model(self, state: SecretState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._seen.append(f"before_model:{state['secret']}")
        return {"tally": [f"{MARK}-t"]}

    def after_model(self, state: SecretState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._seen.append(f"after_model:{state['secret']}:{len(state['tally'])}")
        return None


def peek_tool(seen: list[str]) -> BaseTool:
    @tool
    def peek(runtime: ToolRuntime) -> str:
        """Read the private state."""
        seen.append(f"tool:{runtime.state['secret']}")
        return "peeked"

    return peek


def make_agent(seen: list[str], checkpointer: BaseCheckpointSaver[Any]) -> Any:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("peek", {})]), "done"], cycle=True)
    return create_agent(model, [peek_tool(seen)], middleware=[Secretive(seen)], checkpointer=checkpointer)


@asynccontextmanager
async def checkpointer(kind: str, mode: str, path: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    if kind == "memory":
        yield InMemorySaver()
    elif mode == "invoke":
        conn = sqlite3.connect(path / "cp.sqlite", check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        async with AsyncSqliteSaver.from_conn_string(str(path / "cp.sqlite")) as saver:
            yield saver


def assert_no_private(value: Any) -> None:
    text = repr(value)
    assert MARK not in text
    assert "'secret'" not in text and "'tally'" not in text


async def collect(graph: Any, inp: Any, config: Any, mode: Literal["invoke", "ainvoke"], **kwargs: Any) -> list[Any]:
    if mode == "invoke":
        return list(graph.stream(inp, config, **kwargs))
    return [chunk async for chunk in graph.astream(inp, config, **kwargs)]


def expected_seen(run: int) -> list[str]:
    """Two model calls per run (tool, then answer), ``tally`` grows by one per model call across runs."""
    secret = f"{MARK}-{2 * run}"
    return [
        f"before_model:{secret}", f"after_model:{secret}:{2 * run + 1}", f"tool:{secret}",
        f"before_model:{secret}", f"after_model:{secret}:{2 * run + 2}",
    ]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("stream_mode", [*MODES, MODES])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_no_stream_mode_carries_private_keys(
    mode: Literal["invoke", "ainvoke"], stream_mode: Any, kind: str, tmp_path: Path
) -> None:
    seen: list[str] = []
    async with checkpointer(kind, mode, tmp_path) as saver:
        agent = make_agent(seen, saver)
        config = {"configurable": {"thread_id": "t"}}
        for run in range(2):  # the second run starts from a checkpoint holding the private keys
            chunks = await collect(agent, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=stream_mode)
            assert chunks or stream_mode == "custom"  # nothing emits custom events here
            assert_no_private(chunks)
            assert seen == expected_seen(run)
            seen.clear()
        # the checkpoint keeps them (state inspection is not a stream)
        if mode == "invoke":
            state, history = agent.get_state(config), list(agent.get_state_history(config))
        else:
            state, history = await agent.aget_state(config), [s async for s in agent.aget_state_history(config)]
        assert state.values["secret"] == f"{MARK}-2" and len(state.values["tally"]) == 4
        assert any("tally" in snapshot.values for snapshot in history)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_invoke_output_has_no_private_keys(mode: Literal["invoke", "ainvoke"]) -> None:
    seen: list[str] = []
    agent = make_agent(seen, InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    inp = {"messages": [HumanMessage("go")]}
    out = agent.invoke(inp, config) if mode == "invoke" else await agent.ainvoke(inp, config)
    assert_no_private(out)
    assert out["messages"][-1].content == "done"
    assert seen == expected_seen(0)


def parent_of(agent: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("stream_mode", [*MODES, MODES])
async def test_private_keys_stay_hidden_in_a_subgraph(mode: Literal["invoke", "ainvoke"], stream_mode: Any) -> None:
    seen: list[str] = []
    agent = make_agent(seen, InMemorySaver())
    parent = parent_of(agent)
    config = {"configurable": {"thread_id": "p"}}
    chunks = await collect(
        parent, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=stream_mode, subgraphs=True
    )
    namespaces = {chunk[0] for chunk in chunks}
    # the agent's own chunks are there
    assert stream_mode == "custom" or any(ns and ns[0].startswith("agent") for ns in namespaces)
    assert_no_private(chunks)
    assert seen == expected_seen(0)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_private_keys_survive_an_interrupt_and_resume(mode: Literal["invoke", "ainvoke"]) -> None:
    """A node interrupted before it runs is re-run on resume from the checkpoint: it still reads the private keys."""
    seen: list[str] = []
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("peek", {})]), "done"], cycle=True)
    agent = create_agent(model, [peek_tool(seen)], middleware=[Secretive(seen)], checkpointer=InMemorySaver(),
                         interrupt_before=["tools"])
    config = {"configurable": {"thread_id": "i"}}
    first = await collect(agent, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=MODES)
    second = await collect(agent, None, config, mode, stream_mode=MODES)
    assert_no_private([first, second])
    assert seen == expected_seen(0)


# --- trying to break it -------------------------------------------------------------------------------------------

PRIVATE = frozenset({"secret", "tally", "jump_to", "human_in_the_loop_pending", "run_control_elapsed", "memo", "spent"})
HOOK_RUN_SUFFIXES = (
    ".before_agent", ".before_model", ".after_model", ".after_agent", ".wrap_model_call", ".modify_model_request",
    ".wrap_tool_call", ".before_tool", ".after_tool",
)


def private_keys_in(value: Any, found: set[str] | None = None, depth: int = 0) -> set[str]:
    """Every private key used as a dict key anywhere in ``value`` (dicts, Commands, lists, tuples, StateSnapshots)."""
    found = set() if found is None else found
    if depth > 40:
        return found
    if isinstance(value, Command):
        private_keys_in(value.update, found, depth + 1)
    elif isinstance(value, dict):
        found.update(key for key in value if key in PRIVATE)
        for item in value.values():
            private_keys_in(item, found, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            private_keys_in(item, found, depth + 1)
    return found


def assert_clean(value: Any) -> None:
    assert_no_private(value)
    assert private_keys_in(value) == set()


def graph_and_node_events(events: list[Any]) -> list[Any]:
    """``astream_events`` of the graph, its nodes, the per-hook runs (``"{middleware}.{hook}"``: their input and
    output are recorded without private keys) and the model calls in them. Left out: tool runs (a tool's output is
    what its own code returned, e.g. a ``Command`` writing a private key)."""
    return [e for e in events if not e["event"].startswith("on_tool_")]


async def events_of(graph: Any, inp: Any, config: Any) -> list[Any]:
    return [event async for event in graph.astream_events(inp, config, version="v2")]


async def test_astream_events_of_the_graph_and_its_nodes_carry_no_private_keys() -> None:
    seen: list[str] = []
    agent = make_agent(seen, InMemorySaver())
    config = {"configurable": {"thread_id": "e"}}
    for run in range(2):
        events = await events_of(agent, {"messages": [HumanMessage("go")]}, config)
        shown = graph_and_node_events(events)
        names = {e["name"] for e in shown}
        assert {"model", "tools", "Secretive.before_agent"} <= names  # the nodes' own runs are checked
        assert any(e["name"].endswith(HOOK_RUN_SUFFIXES) and len(e["parent_ids"]) >= 2 for e in shown)  # hook runs
        assert any(e["event"] == "on_chain_end" and e["name"] == "model" for e in shown)
        assert_clean([e["data"] for e in shown])
        assert seen == expected_seen(run)
        seen.clear()
    state = await agent.aget_state(config)
    assert len(state.values["tally"]) == 4


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_stream_events_v3_carries_no_private_keys(mode: Literal["invoke", "ainvoke"]) -> None:
    import warnings

    seen: list[str] = []
    agent = make_agent(seen, InMemorySaver())
    config = {"configurable": {"thread_id": "v3"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the v3 protocol is a LangChainBetaWarning
        if mode == "invoke":
            run = agent.stream_events({"messages": [HumanMessage("go")]}, config, version="v3")
            items, output = list(run), run.output
        else:
            arun = await agent.astream_events({"messages": [HumanMessage("go")]}, config, version="v3")
            items = [item async for item in arun]
            output = await arun.output()
    assert items and output["messages"][-1].content == "done"
    assert_clean([items, output])
    assert seen == expected_seen(0)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("subgraphs", [False, True])
async def test_stream_parts_v2_carry_no_private_keys(mode: Literal["invoke", "ainvoke"], subgraphs: bool) -> None:
    seen: list[str] = []
    agent = make_agent(seen, InMemorySaver())
    graph = parent_of(agent) if subgraphs else agent
    config = {"configurable": {"thread_id": "v2"}}
    parts = await collect(graph, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=MODES, version="v2",
                          subgraphs=subgraphs)
    assert {part["type"] for part in parts} >= {"updates", "values", "debug", "tasks", "checkpoints", "messages"}
    assert_clean(parts)
    assert seen == expected_seen(0)
    if subgraphs:  # the parent's state of its child still shows the child's private keys
        state = graph.get_state(config, subgraphs=True) if mode == "invoke" else await graph.aget_state(
            config, subgraphs=True)
        assert state.values["messages"][-1].content == "done"


class InputOnly(AgentState[Any]):
    """``memo``: the caller may give it, nothing shows it; ``note``: never input, always output."""

    memo: NotRequired[Annotated[str, OmitFromOutput]]
    note: NotRequired[Annotated[str, OmitFromInput]]


class Memo(AgentMiddleware[InputOnly, Any]):
    state_schema = InputOnly

    def __init__(self, seen: list[str]) -> None:
        super().__init__()
        self._seen = seen

    def before_model(self, state: InputOnly, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._seen.append(f"memo:{state.get('memo')}")
        return {"note": f"saw {len(state['messages'])} messages"}


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_only_keys_omitted_from_output_are_hidden(mode: Literal["invoke", "ainvoke"]) -> None:
    """An ``OmitFromOutput`` key given as input is hidden like a private one; an ``OmitFromInput`` key is shown."""
    seen: list[str] = []
    agent: Any = create_agent(ScriptedChatModel(["done"]), middleware=[Memo(seen)], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "o"}}
    chunks = await collect(agent, {"messages": [HumanMessage("go")], "memo": f"{MARK}-memo"}, config, mode,
                           stream_mode=MODES)
    assert_clean(chunks)
    assert seen == [f"memo:{MARK}-memo"]
    values = [chunk[1] for chunk in chunks if chunk[0] == "values"]
    assert values[-1]["note"] == "saw 1 messages"
    assert any("note" in (update or {}) for chunk in chunks if chunk[0] == "updates" for update in chunk[1].values())
    state = agent.get_state(config) if mode == "invoke" else await agent.aget_state(config)
    assert state.values["memo"] == f"{MARK}-memo"


def injected_tools(seen: list[str]) -> list[BaseTool]:
    @tool
    def whole(state: Annotated[dict[str, Any], InjectedState]) -> str:
        """Read the whole state."""
        seen.append(f"whole:{state['secret']}:{len(state['tally'])}")
        return "ok"

    @tool
    def field(secret: Annotated[str, InjectedState("secret")]) -> str:
        """Read one private key."""
        seen.append(f"field:{secret}")
        return "ok"

    return [whole, field]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("parallel", [False, True])
async def test_injected_state_tools_read_private_keys(mode: Literal["invoke", "ainvoke"], parallel: bool) -> None:
    seen: list[str] = []
    calls = [tool_call("whole", {}, id="c1"), tool_call("field", {}, id="c2")]
    script: list[Any] = (
        [AIMessage("", tool_calls=calls), "done"] if parallel
        else [AIMessage("", tool_calls=calls[:1]), AIMessage("", tool_calls=calls[1:]), "done"]
    )
    agent: Any = create_agent(ScriptedChatModel(script), injected_tools(seen), middleware=[Secretive(seen)],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "inj"}}
    chunks = await collect(agent, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=MODES)
    assert_clean(chunks)
    tools_seen = sorted(item for item in seen if item.startswith(("whole", "field")))
    assert tools_seen == [f"field:{MARK}-0", f"whole:{MARK}-0:1"]


def last_three(old: list[str] | None, new: list[str]) -> list[str]:
    return [*(old or []), *new][-3:]


class Stamp(AgentState[Any]):
    secret: NotRequired[Annotated[str, PrivateStateAttr]]
    spent: NotRequired[Annotated[list[str], last_three, PrivateStateAttr]]


class Spender(AgentMiddleware[Stamp, Any]):
    """Two of these in one node write ``spent`` (a custom reducer) twice: the node returns a list of Commands."""

    state_schema = Stamp

    def __init__(self, name: str, seen: list[str]) -> None:
        super().__init__()
        self.name = name
        self._seen = seen

    def before_model(self, state: Stamp, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._seen.append(f"{self.name}:{state.get('secret')}:{list(state.get('spent', []))}")
        return {"spent": [f"{MARK}-{self.name}"]}


def stamping_tool() -> BaseTool:
    @tool
    def stamp(runtime: ToolRuntime) -> Command[Any]:
        """Write a private key from a tool."""
        return Command(update={
            "secret": f"{MARK}-from-tool",
            "messages": [ToolMessage("stamped", tool_call_id=runtime.tool_call_id)],
        })

    return stamp


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_private_writes_of_commands_and_tools_still_land(mode: Literal["invoke", "ainvoke"]) -> None:
    """A node returning a list of Commands (a custom reducer written twice) and a tool returning a Command with a
    private key: the streams hide the keys, the next hooks and the checkpoint get them, in order."""
    seen: list[str] = []
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("stamp", {})]), "done"])
    agent: Any = create_agent(model, [stamping_tool()], middleware=[Spender("a", seen), Spender("b", seen)],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "w"}}
    inp = {"messages": [HumanMessage("go")]}
    if mode == "invoke":
        chunks = list(agent.stream(inp, config, stream_mode=MODES))
    else:
        chunks = [await events_of(agent, inp, config)]
    assert_clean(chunks if mode == "invoke" else [e["data"] for e in graph_and_node_events(chunks[0])])
    assert seen == [
        "a:None:[]", f"b:None:['{MARK}-a']",
        f"a:{MARK}-from-tool:['{MARK}-a', '{MARK}-b']", f"b:{MARK}-from-tool:['{MARK}-a', '{MARK}-b', '{MARK}-a']",
    ]
    state = agent.get_state(config) if mode == "invoke" else await agent.aget_state(config)
    assert state.values["spent"] == [f"{MARK}-b", f"{MARK}-a", f"{MARK}-b"]
    assert state.values["secret"] == f"{MARK}-from-tool"


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_jump_to_never_shows(mode: Literal["invoke", "ainvoke"]) -> None:
    calls: list[int] = []

    @before_model(can_jump_to=["end"])
    def stop_second(state: Any, runtime: Any) -> dict[str, Any] | None:
        calls.append(len(state["messages"]))
        return {"jump_to": "end", "messages": [AIMessage("stopped")]} if len(calls) == 2 else None

    agent: Any = create_agent(ScriptedChatModel([AIMessage("", tool_calls=[tool_call("peek", {})])]),
                         [peek_tool([])], middleware=[Secretive([]), stop_second], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "j"}}
    chunks = await collect(agent, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=MODES)
    assert_clean(chunks)
    assert calls == [1, 3]
    assert [chunk[1] for chunk in chunks if chunk[0] == "values"][-1]["messages"][-1].content == "stopped"


KEY = "h15-test-key-0123456789abcdefghijklmnop"
APPROVE = {"decisions": [{"type": "approve"}]}


def mail_tool(outbox: list[str], seen: list[str]) -> BaseTool:
    @tool
    def send_email(to: str, runtime: ToolRuntime) -> str:
        """Send an email."""
        outbox.append(to)
        seen.append(f"tool:{runtime.state['secret']}")
        return f"sent to {to}"

    return send_email


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("how", ["create_agent", "with_run_control"])
async def test_run_controlled_agent_with_review_and_pii_streams_no_private_keys(
    mode: Literal["invoke", "ainvoke"], kind: str, how: str, tmp_path: Path
) -> None:
    """Run control (its private clock), human review (its private pending calls, an interrupt and a resume), PII
    placeholders (sealed in messages) and our own private keys, in one agent: no stream of either turn shows a
    private key or the raw address; the checkpoint keeps every key; the tool gets the real address and the state."""
    from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
    from middleware_kit.middlewares.pii import Keyring, PIIMiddleware
    from middleware_kit.run_control import RunControl, controlled_middleware, with_run_control

    seen: list[str] = []
    outbox: list[str] = []
    placeholder = Keyring.of(KEY).name("email", "jane@example.com")
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("send_email", {"to": placeholder})]), "done"], cycle=True
    )
    stack: list[AgentMiddleware[Any, Any]] = [Secretive(seen), PIIMiddleware("email", strategy="placeholder", key=KEY),
             HumanInTheLoopMiddleware({"send_email": True})]
    async with checkpointer(kind, mode, tmp_path) as saver:
        if how == "create_agent":
            agent: Any = create_agent(model, [mail_tool(outbox, seen)], middleware=stack, checkpointer=saver,
                                 run_control=RunControl(deadline=600))  # a deadline keeps the run's time in state
        else:
            agent = with_run_control(create_agent(model, [mail_tool(outbox, seen)],
                                                  middleware=controlled_middleware(stack), checkpointer=saver))
        config = {"configurable": {"thread_id": f"rc-{how}"}}
        first = await collect(agent, {"messages": [HumanMessage("Email jane@example.com")]}, config, mode,
                              stream_mode=MODES)
        state = agent.get_state(config) if mode == "invoke" else await agent.aget_state(config)
        assert state.interrupts and state.values["human_in_the_loop_pending"]  # paused, the pending call private
        assert "run_control_elapsed" in state.values and state.values["secret"] == f"{MARK}-0"
        second = await collect(agent, Command(resume=APPROVE), config, mode, stream_mode=MODES)
        assert_clean([first, second])
        assert "jane@example.com" not in repr([first, second])
        assert outbox == ["jane@example.com"]
        assert f"tool:{MARK}-0" in seen and all(MARK in item for item in seen)
        state = agent.get_state(config) if mode == "invoke" else await agent.aget_state(config)
        assert state.values["messages"][-1].content == "done" and len(state.values["tally"]) == 2


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_state_reads_during_concurrent_streams_see_private_keys_and_streams_never_do(
    mode: Literal["invoke", "ainvoke"],
) -> None:
    """``get_state`` reads every key and streams only public ones through one graph object at the same time (the
    snapshot switch is per call context, not per graph): six threads streaming while their state is read."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    def reply(messages: list[Any]) -> AIMessage:  # per thread, whatever the order calls arrive in
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("done")
        return AIMessage("", tool_calls=[tool_call("peek", {}, id=f"call_{len(messages)}")])

    agent: Any = create_agent(ScriptedChatModel(default=reply), [peek_tool([])], middleware=[Secretive([])],
                         checkpointer=InMemorySaver())
    configs = [{"configurable": {"thread_id": f"c{i}"}} for i in range(6)]
    inp = {"messages": [HumanMessage("go")]}
    for config in configs:  # every thread has private keys in its checkpoint
        await collect(agent, inp, config, mode)

    def stream_sync(config: Any) -> list[Any]:
        return list(agent.stream(inp, config, stream_mode=MODES))

    def read_sync(config: Any) -> list[Any]:
        return [agent.get_state(config).values for _ in range(15)]

    async def read_async(config: Any) -> list[Any]:
        values = []
        for _ in range(15):
            values.append((await agent.aget_state(config)).values)
            await asyncio.sleep(0)
        return values

    if mode == "invoke":
        with ThreadPoolExecutor(max_workers=12) as pool:
            streams = [pool.submit(stream_sync, c) for c in configs]
            reads = [pool.submit(read_sync, c) for c in configs]
            chunks, states = [f.result() for f in streams], [v for f in reads for v in f.result()]
    else:
        results = await asyncio.gather(
            *(collect(agent, inp, c, mode, stream_mode=MODES) for c in configs), *(read_async(c) for c in configs)
        )
        chunks, states = list(results[:6]), [v for r in results[6:] for v in r]
    assert_clean(chunks)
    assert len(states) == 90 and all(s["secret"].startswith(MARK) and s["tally"] for s in states)
    for config in configs:
        state = agent.get_state(config) if mode == "invoke" else await agent.aget_state(config)
        assert len(state.values["tally"]) == 4


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_any_combination_of_stream_options_carries_no_private_keys(mode: Literal["invoke", "ainvoke"]) -> None:
    import asyncio

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        modes=st.lists(st.sampled_from(MODES), min_size=1, max_size=7, unique=True),
        single=st.booleans(), version=st.sampled_from(["v1", "v2"]), subgraphs=st.booleans(),
        interrupt=st.booleans(),
    )
    def check(modes: list[str], single: bool, version: str, subgraphs: bool, interrupt: bool) -> None:
        seen: list[str] = []
        model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("peek", {})]), "done"], cycle=True)
        agent: Any = create_agent(model, [peek_tool(seen)], middleware=[Secretive(seen)], checkpointer=InMemorySaver(),
                             interrupt_before=["tools"] if interrupt else None)
        graph = parent_of(agent) if subgraphs else agent
        stream_mode: Any = modes[0] if single else modes
        config = {"configurable": {"thread_id": "h"}}
        kwargs = {"stream_mode": stream_mode, "version": version, "subgraphs": subgraphs}
        chunks = asyncio.run(collect(graph, {"messages": [HumanMessage("go")]}, config, mode, **kwargs))
        if interrupt:
            chunks += asyncio.run(collect(graph, None, config, mode, **kwargs))
        assert_clean(chunks)
        assert f"tool:{MARK}-0" in seen

    check()


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_copies_of_the_agent_hide_the_same_keys(mode: Literal["invoke", "ainvoke"]) -> None:
    """``with_config()``/``copy()`` make a new graph object (LangGraph's ``copy``): it streams and snapshots alike."""
    seen: list[str] = []
    agent = make_agent(seen, InMemorySaver()).with_config(recursion_limit=40, tags=["copied"]).copy()
    config = {"configurable": {"thread_id": "copy"}}
    chunks = await collect(agent, {"messages": [HumanMessage("go")]}, config, mode, stream_mode=MODES)
    assert_clean(chunks)
    assert seen == expected_seen(0)
    state = agent.get_state(config) if mode == "invoke" else await agent.aget_state(config)
    assert state.values["secret"] == f"{MARK}-0"
