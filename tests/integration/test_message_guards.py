"""Message guards: no raw value reaches a checkpointer's bytes, a pending write or any stream chunk.

The toy guard replaces "SECRET" with "[x]" in every message's content and tool-call arguments. Every test puts the
secret everywhere it can: the graph input, the model's answer and tool-call arguments, a tool result, a hook update.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit import AgentMiddleware, HookReturnError, create_agent
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

RAW = "SECRET"
MODES = ["values", "updates", "messages", "debug", "tasks", "checkpoints", "custom"]


def scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(RAW, "[x]")
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


class Redact(AgentMiddleware):
    """The toy guard; records the runtimes it was given."""

    def __init__(self) -> None:
        self.runtimes: list[Runtime[Any] | None] = []

    def guard_messages(
        self, messages: Sequence[AnyMessage], runtime: Runtime[Any] | None
    ) -> Sequence[AnyMessage] | None:
        self.runtimes.append(runtime)
        if not any(RAW in repr(m) for m in messages):
            return None
        out: list[AnyMessage] = []
        for m in messages:
            update: dict[str, Any] = {"content": scrub(m.content)}
            if isinstance(m, AIMessage):
                update["tool_calls"] = [{**c, "args": scrub(c["args"])} for c in m.tool_calls]
            out.append(m.model_copy(update=update))
        return out


@tool
def lookup(query: str) -> str:
    """Look something up (always leaks the secret)."""
    return f"the {RAW} for {query}"


class Commentator(AgentMiddleware):
    """after_model: adds a message with the secret, and replaces the model's answer (same id) by one with it."""

    def after_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        last = state["messages"][-1]
        if last.tool_calls:
            return {"messages": [HumanMessage(f"note: {RAW} seen")]}
        return {"messages": [last.model_copy(update={"content": f"{last.content} (edited, {RAW})"})]}


def agent_with(checkpointer: Any, *guards: AgentMiddleware) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(
        [
            AIMessage(f"let me look {RAW} up", tool_calls=[tool_call("lookup", {"query": RAW})]),
            f"the answer is {RAW}",
        ],
        cycle=True,
    )
    agent = create_agent(model, [lookup], middleware=[*guards, Commentator()], checkpointer=checkpointer)
    return agent, model


INPUT = {"messages": [HumanMessage(f"my password is {RAW}")]}


def stream_all(agent: Any, inp: Any, mode: str, config: dict[str, Any]) -> list[Any]:
    if mode == "invoke":
        return list(agent.stream(inp, config, stream_mode=MODES))

    async def collect() -> list[Any]:
        return [chunk async for chunk in agent.astream(inp, config, stream_mode=MODES)]

    return asyncio.run(collect())


def memory_bytes(saver: InMemorySaver) -> bytes:
    return pickle.dumps((dict(saver.storage), dict(saver.writes), dict(saver.blobs)))


def test_without_a_guard_the_secret_is_everywhere(mode: str) -> None:
    """The test's own control: it does detect the secret when nothing guards."""
    saver = InMemorySaver()
    agent, _ = agent_with(saver)
    chunks = stream_all(agent, INPUT, mode, {"configurable": {"thread_id": "t"}})
    assert RAW.encode() in memory_bytes(saver)
    seen = {chunk[0] for chunk in chunks if RAW in repr(chunk[1])}
    assert {"values", "updates", "messages", "debug", "tasks", "checkpoints"} <= seen


def test_in_memory_saver_and_every_stream_mode_never_see_the_secret(mode: str) -> None:
    saver = InMemorySaver()
    guard = Redact()
    agent, model = agent_with(saver, guard)
    config = {"configurable": {"thread_id": "t"}}
    chunks = stream_all(agent, INPUT, mode, config)
    assert {chunk[0] for chunk in chunks} >= {"values", "updates", "messages", "debug", "tasks", "checkpoints"}
    leaked = [chunk for chunk in chunks if RAW in repr(chunk)]
    assert leaked == []
    # stream_mode="messages" carries each node's guarded messages whole (the raw tokens never reach it).
    streamed = [chunk[1][0] for chunk in chunks if chunk[0] == "messages"]
    assert any(isinstance(m, AIMessage) and "[x]" in str(m.content) for m in streamed)
    assert any(isinstance(m, ToolMessage) and "[x]" in str(m.content) for m in streamed)
    assert RAW.encode() not in memory_bytes(saver)
    assert "[x]" in repr(agent.get_state(config).values["messages"])
    # The model itself saw the raw answer it produced, nothing else did; the guarded input is what it received.
    assert RAW not in repr(model.calls[0].messages)
    # Input guarded in the reducer (no runtime), node writes with the node's runtime.
    assert None in guard.runtimes
    assert any(isinstance(r, Runtime) for r in guard.runtimes)


def test_a_second_turn_and_a_resume_command_are_guarded(run: Runner) -> None:
    saver = InMemorySaver()
    agent, _ = agent_with(saver, Redact())
    config = {"configurable": {"thread_id": "t"}}
    run(agent, INPUT, config=config)
    run(agent, {"messages": [HumanMessage(f"again {RAW}")]}, config=config)
    run(agent, Command(update={"messages": [HumanMessage(f"via command {RAW}")]}), config=config)
    agent.update_state(config, {"messages": [HumanMessage(f"via update_state {RAW}")]})
    assert RAW.encode() not in memory_bytes(saver)
    history = agent.get_state(config).values["messages"]
    assert sum("[x]" in str(m.content) for m in history) >= 6


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agent.sqlite"


def sqlite_bytes(path: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-journal", "-shm"):
        file = Path(str(path) + suffix)
        if file.exists():
            data += file.read_bytes()
    return data


def test_sqlite_file_and_wal_never_hold_the_secret(mode: str, db: Path) -> None:
    config = {"configurable": {"thread_id": "t"}}
    if mode == "invoke":
        conn = sqlite3.connect(db, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        saver = SqliteSaver(conn)
        agent, _ = agent_with(saver, Redact())
        chunks = stream_all(agent, INPUT, mode, config)
        raw = sqlite_bytes(db)  # read while the WAL still holds the latest pages
        conn.close()
    else:

        async def main() -> tuple[list[Any], bytes]:
            async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
                await saver.conn.execute("PRAGMA journal_mode=WAL")
                agent, _ = agent_with(saver, Redact())
                got = [chunk async for chunk in agent.astream(INPUT, config, stream_mode=MODES)]
                return got, sqlite_bytes(db)

        chunks, raw = asyncio.run(main())
    assert any(chunk[0] == "checkpoints" for chunk in chunks)
    assert [chunk for chunk in chunks if RAW in repr(chunk)] == []
    assert len(raw) > 0 and b"[x]" in raw
    assert RAW.encode() not in raw
    assert os.path.getsize(db) > 0


def test_control_sqlite_holds_the_secret_without_a_guard(db: Path) -> None:
    conn = sqlite3.connect(db, check_same_thread=False)
    agent, _ = agent_with(SqliteSaver(conn))
    agent.invoke(INPUT, {"configurable": {"thread_id": "t"}})
    raw = sqlite_bytes(db)
    conn.close()
    assert RAW.encode() in raw


class Counter(AgentMiddleware):
    def __init__(self, tag: str, log: list[str]) -> None:
        self.tag, self.log = tag, log
        self.name = f"Counter_{tag}"

    def guard_messages(
        self, messages: Sequence[AnyMessage], runtime: Runtime[Any] | None
    ) -> Sequence[AnyMessage] | None:
        self.log.append(self.tag)
        return [m.model_copy(update={"content": f"{m.content}|{self.tag}"}) if isinstance(m, HumanMessage)
                and f"|{self.tag}" not in str(m.content) else m for m in messages]


def test_guards_run_in_list_order(run: Runner) -> None:
    log: list[str] = []
    agent = create_agent(ScriptedChatModel(["ok"]), middleware=[Counter("a", log), Counter("b", log)])
    result = run(agent, {"messages": [HumanMessage("hi")]})
    assert result["messages"][0].content == "hi|a|b"
    assert log[:2] == ["a", "b"]


def test_a_guard_returning_a_bad_value_names_itself(run: Runner) -> None:
    class Broken(AgentMiddleware):
        def guard_messages(self, messages: Sequence[AnyMessage], runtime: Runtime[Any] | None) -> Any:
            return "redacted"

    agent = create_agent(ScriptedChatModel(["ok"]), middleware=[Broken()])
    with pytest.raises(HookReturnError, match=r"Broken\.guard_messages returned") as info:
        run(agent, {"messages": [HumanMessage("hi")]})
    assert info.value.hook == "guard_messages"


def test_no_guard_no_change_and_the_plan_lists_guards() -> None:
    agent = create_agent(ScriptedChatModel(["ok"]), middleware=[Redact()])
    assert "guards" in str(agent.middleware_plan) and "Redact" in str(agent.middleware_plan)
    plain = create_agent(ScriptedChatModel(["ok"]))
    assert "guards" not in str(plain.middleware_plan)


def test_a_fused_node_writes_only_the_final_version_of_a_replaced_message(mode: str) -> None:
    """after_model replaces the model's answer (same id): the node's pending write holds only the replacement."""
    saver = InMemorySaver()
    agent = create_agent(ScriptedChatModel([f"raw {RAW}"]), middleware=[Commentator()], checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    chunks = stream_all(agent, {"messages": [HumanMessage("q")]}, mode, config)
    model_updates = [c[1]["model"] for c in chunks if c[0] == "updates" and "model" in c[1]]
    written = [m for update in model_updates for m in _messages_of(update)]
    ai = [m for m in written if isinstance(m, AIMessage)]
    assert len(ai) == 1 and str(ai[0].content).endswith("(edited, SECRET)")
    final = agent.get_state(config).values["messages"]
    assert [type(m).__name__ for m in final] == ["HumanMessage", "AIMessage"]
    pending = [
        saver.serde.loads_typed(typed)
        for writes in saver.writes.values()
        for (_task, channel, typed, _path) in writes.values()
        if channel == "messages"
    ]
    ai_written = [m for value in pending for m in (value if isinstance(value, list) else [value])
                  if isinstance(m, AIMessage)]
    assert [m.content for m in ai_written] == [f"raw {RAW} (edited, {RAW})"]


def _messages_of(update: Any) -> list[BaseMessage]:
    if isinstance(update, dict):
        value = update.get("messages", [])
        return value if isinstance(value, list) else [value]
    if isinstance(update, (list, tuple)):
        return [m for u in update for m in _messages_of(u)]
    return []


def test_tool_results_and_command_updates_are_guarded(run: Runner) -> None:
    @tool
    def cmd_tool(x: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Answers with a Command."""
        return Command(update={"messages": [ToolMessage(f"cmd {RAW}", tool_call_id=tool_call_id)]})

    saver = InMemorySaver()
    calls = [tool_call("cmd_tool", {"x": 1}), tool_call("lookup", {"query": "q"})]
    model = ScriptedChatModel([AIMessage("", tool_calls=calls), "done"])
    agent = create_agent(model, [cmd_tool, lookup], middleware=[Redact()], checkpointer=saver)
    result = run(agent, {"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": "t"}})
    tool_texts = sorted(str(m.content) for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool_texts == ["cmd [x]", "the [x] for q"]
    assert RAW.encode() not in memory_bytes(saver)


class ResumeScrub(AgentMiddleware):
    """A resume guard: scrubs the secret out of every resume value; refuses one holding "REFUSE"."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Runtime[Any] | None]] = []

    def guard_resume(self, value: Any, runtime: Runtime[Any] | None) -> Any:
        self.seen.append((value, runtime))
        if "REFUSE" in repr(value):
            raise ValueError("ResumeScrub.guard_resume: this resume is refused")
        return scrub(value) if RAW in repr(value) else None


class AskHuman(AgentMiddleware):
    """before_model: asks a human once per turn and writes the answer as a message."""

    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        from langgraph.types import interrupt

        if any(isinstance(m, HumanMessage) and m.content.startswith("answer:") for m in state["messages"]):
            return None
        return {"messages": [HumanMessage(f"answer: {interrupt('your name?')}")]}


def resume_agent(saver: Any, *middleware: AgentMiddleware) -> Any:
    return create_agent(ScriptedChatModel(["hello"], cycle=True), middleware=[*middleware, AskHuman()],
                        checkpointer=saver)


def test_a_resume_value_is_guarded_before_langgraph_stores_it(run: Runner) -> None:
    saver, guard = InMemorySaver(), ResumeScrub()
    agent = resume_agent(saver, guard)
    config = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": [HumanMessage("hi")]}, config=config)
    out = run(agent, Command(resume={"name": f"{RAW} agent", "tags": [RAW, 3]}), config=config)
    assert out["messages"][1].content == "answer: {'name': '[x] agent', 'tags': ['[x]', 3]}"
    assert RAW.encode() not in memory_bytes(saver)  # the __resume__ write included
    assert guard.seen and all(runtime is None for _, runtime in guard.seen)
    assert "resume:     ResumeScrub.guard_resume" in str(agent.middleware_plan)


def test_a_refused_resume_stores_nothing_and_the_interrupt_stays(run: Runner) -> None:
    saver = InMemorySaver()
    agent = resume_agent(saver, ResumeScrub())
    config = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": [HumanMessage("hi")]}, config=config)
    before = memory_bytes(saver)
    with pytest.raises(ValueError, match="this resume is refused"):
        run(agent, Command(resume="REFUSE me"), config=config)
    assert memory_bytes(saver) == before and agent.get_state(config).interrupts
    out = run(agent, Command(resume="Ada"), config=config)
    assert out["messages"][1].content == "answer: Ada"


def test_resume_guards_run_in_list_order_and_without_guards_nothing_changes(run: Runner) -> None:
    order: list[str] = []

    class Tag(AgentMiddleware):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        @property
        def name(self) -> str:
            return f"Tag{self.tag}"

        def guard_resume(self, value: Any, runtime: Runtime[Any] | None) -> Any:
            order.append(self.tag)
            return f"{value}{self.tag}"

    agent = resume_agent(InMemorySaver(), Tag("1"), Tag("2"))
    config = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": [HumanMessage("hi")]}, config=config)
    out = run(agent, Command(resume="x"), config=config)
    assert out["messages"][1].content == "answer: x12" and order == ["1", "2"]
    plain = resume_agent(InMemorySaver())
    run(plain, {"messages": [HumanMessage("hi")]}, config=config)
    assert run(plain, Command(resume=f"{RAW}"), config=config)["messages"][1].content == f"answer: {RAW}"
