"""Trying to break PIIMiddleware's guarantee: after any run (finished, blocked, interrupted for review, retried,
cancelled), a configured raw value is in no checkpoint, pending write or blob (InMemorySaver's storage, the SQLite
file with its WAL, PostgreSQL's rows), no chunk of any stream mode (with and without ``subgraphs=True``), no interrupt
payload, no log record at DEBUG, no exception (str, repr, args, notes, pickle), and not in the returned result.

The matrix: every built-in type x every entry point (user input, model output text, model tool-call arguments, tool
results, messages added by another middleware's hook) x every strategy, under invoke and ainvoke; the savers rotate
over the cases (each saver sees every type, entry point and strategy), and every stream mode is collected in one
``stream(stream_mode=[...all...])`` call per case, alternately with ``subgraphs=True``.

"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import hmac
import itertools
import logging
import pickle
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command, StreamMode

from middleware_kit import before_model, create_agent, modify_model_request
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.pii import Keyring, PIIDetectionError, PIIMiddleware, Strategy, reveal
from middleware_kit.middlewares.retry import ModelRetryMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.integration.conftest import postgres_dsn  # noqa: F401  (the session's PostgreSQL server)

KEY = "guarantee-test-key-0123456789abcdefghij"
SECRETS: dict[str, str] = {
    "email": "zoe.secret@example.org",
    "credit_card": "5105 1051 0510 5100",
    "ip": "203.0.113.77",
    "mac_address": "3c:22:fb:12:9a:01",
    "url": "https://private.example.net/u/zoe",
}
TYPES = list(SECRETS)
STRATEGIES: list[Strategy] = ["redact", "mask", "hash", "block", "placeholder"]
ENTRIES = ["input", "output", "tool_args", "tool_result", "middleware"]
SAVERS = ["memory", "sqlite", "postgres"]
STREAM_MODES: list[StreamMode] = ["values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"]


def forms(secret: str) -> list[bytes]:
    """The raw value as it could be stored: as written, and a card number without its spaces."""
    out = [secret.encode()]
    if " " in secret:
        out.append(secret.replace(" ", "").encode())
    return out


def leaked(secret: str, blob: bytes | str) -> bool:
    data = blob.encode("utf-8", "backslashreplace") if isinstance(blob, str) else blob
    return any(f in data for f in forms(secret))


# -- savers and their raw bytes --------------------------------------------------------------------------------
def _walk(x: Any) -> Iterator[bytes]:
    if isinstance(x, (bytes, bytearray, memoryview)):
        yield bytes(x)
    elif isinstance(x, str):
        yield x.encode("utf-8", "backslashreplace")
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _walk(k)
            yield from _walk(v)
    elif isinstance(x, (list, tuple, set, frozenset)):
        for v in x:
            yield from _walk(v)
    elif x is not None:
        yield repr(x).encode("utf-8", "backslashreplace")


@dataclass
class Store:
    kind: str
    saver: BaseCheckpointSaver[Any]
    path: Path | None = None
    dsn: str | None = None
    closers: list[Any] = field(default_factory=list)

    def leaks(self, secret: str) -> set[str]:
        """Where the raw value is found in the saver's storage (empty: nowhere)."""
        found: set[str] = set()
        if self.path is None and self.dsn is None:
            assert isinstance(self.saver, InMemorySaver)
            for thread, entry in self.saver.storage.items():
                if leaked(secret, b"|".join(_walk(entry))):
                    found.add(f"storage:{thread}")
            for writes in self.saver.writes.values():
                for _task, channel, value, *_ in writes.values():
                    if leaked(secret, b"|".join(_walk(value))):
                        found.add(f"write:{channel}")
            for blob_key, blob in self.saver.blobs.items():
                if leaked(secret, b"|".join(_walk(blob))):
                    found.add(f"blob:{blob_key[2]}")
            return found
        if self.path is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                file = Path(f"{self.path}{suffix}")
                if file.exists() and leaked(secret, file.read_bytes()):
                    found.add(f"file{suffix or ':db'}")
            return found
        import psycopg

        with psycopg.connect(self.dsn or "", autocommit=True) as conn:
            for name in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
                rows = conn.execute(f"SELECT * FROM {name}").fetchall()
                for row in rows:
                    if leaked(secret, b"|".join(_walk(list(row)))):
                        found.add(f"{name}:{row[2] if name == 'checkpoint_blobs' else ''}")
        return found


@contextlib.contextmanager
def make_store(kind: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    if kind == "memory":
        yield Store(kind, InMemorySaver())
        return
    if kind == "sqlite":
        path = tmp_path / f"cp-{uuid.uuid4().hex}.db"
        if mode == "invoke":
            conn = sqlite3.connect(path, check_same_thread=False)
            try:
                yield Store(kind, SqliteSaver(conn), path=path)
            finally:
                conn.close()
            return
        yield Store(kind, InMemorySaver(), path=path)  # the async saver is opened inside the run's loop
        return
    dsn = request.getfixturevalue("postgres_dsn")
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        yield Store(kind, saver, dsn=dsn)  # under ainvoke the async saver is opened inside the loop


# -- the agent of one case -------------------------------------------------------------------------------------
@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found: {query}"


@dataclass
class Case:
    pii_type: str
    entry: str
    strategy: Strategy
    saver: str
    mode: str
    subgraphs: bool

    @property
    def secret(self) -> str:
        return SECRETS[self.pii_type]


def build(case: Case, saver: BaseCheckpointSaver[Any], extra: list[Any] | None = None) -> tuple[Any, Any]:
    secret = case.secret
    script: list[Any]
    if case.entry == "output":
        script = [f"noted: {secret}", "bye"]
    elif case.entry == "tool_args":
        script = [AIMessage("", tool_calls=[tool_call("lookup", {"query": f"about {secret}"})]), "done"]
    elif case.entry == "tool_result":
        script = [AIMessage("", tool_calls=[tool_call("lookup", {"query": "x"})]), "done"]
    else:
        script = ["ok"]
    model = ScriptedChatModel(script, default="ok")

    @tool("lookup")
    def leaky_lookup(query: str) -> str:
        """Look something up."""
        return f"record for {query}: {secret}" if case.entry == "tool_result" else f"found: {query}"

    @before_model
    def add_context(state: Any, runtime: Any) -> dict[str, Any] | None:
        if case.entry != "middleware" or len(state["messages"]) > 1:
            return None
        return {"messages": [AIMessage(f"(context) the customer is {secret}")]}

    pii = PIIMiddleware(
        case.pii_type,
        strategy=case.strategy,
        apply_to_input=True,
        apply_to_output=True,
        apply_to_tool_results=True,
        key=KEY if case.strategy == "placeholder" else None,
        salt="tenant-salt" if case.strategy == "hash" else None,
    )
    middleware = [add_context, pii, *(extra or [])]
    agent = create_agent(model, [leaky_lookup], middleware=middleware, checkpointer=saver)
    return agent, model


def first_input(case: Case) -> dict[str, Any]:
    text = f"my data is {case.secret}, thanks" if case.entry == "input" else "hello"
    return {"messages": [HumanMessage(text)]}


def collect(agent: Any, inp: Any, config: dict[str, Any], case: Case) -> tuple[list[Any], BaseException | None]:
    """Every chunk of every stream mode of one run, and the error it ended with (if any)."""
    chunks: list[Any] = []
    if case.mode == "invoke":
        try:
            for chunk in agent.stream(inp, config, stream_mode=STREAM_MODES, subgraphs=case.subgraphs):
                chunks.append(chunk)
        except Exception as exc:
            return chunks, exc
        return chunks, None

    async def run() -> BaseException | None:
        try:
            async for chunk in agent.astream(inp, config, stream_mode=STREAM_MODES, subgraphs=case.subgraphs):
                chunks.append(chunk)
        except Exception as exc:
            return exc
        return None

    return chunks, asyncio.run(run())


def assert_error_is_value_free(err: BaseException, secret: str) -> None:
    assert isinstance(err, PIIDetectionError), repr(err)
    texts = [str(err), repr(err), repr(err.args), repr(getattr(err, "__notes__", [])), repr(vars(err))]
    texts.append(repr(pickle.loads(pickle.dumps(err))))
    assert not any(leaked(secret, t) for t in texts)
    assert not leaked(secret, pickle.dumps(err))


def model_inputs(model: ScriptedChatModel) -> str:
    return "\n".join(repr(m) for call in model.calls for m in call.messages)


def _cases() -> list[Case]:
    out: list[Case] = []
    savers = itertools.cycle(SAVERS)
    flip = itertools.cycle([False, True])
    for pii_type in TYPES:
        for entry in ENTRIES:
            for strategy in STRATEGIES:
                saver = next(savers)
                sub = next(flip)
                for mode in ("invoke", "ainvoke"):
                    out.append(Case(pii_type, entry, strategy, saver, mode, sub))
    return out


def _id(case: Case) -> str:
    return f"{case.pii_type}-{case.entry}-{case.strategy}-{case.saver}-{case.mode}{'-sub' if case.subgraphs else ''}"


@pytest.mark.parametrize("case", _cases(), ids=_id)
def test_no_raw_value_anywhere(
    case: Case, tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    secret = case.secret
    caplog.set_level(logging.DEBUG)
    with make_store(case.saver, case.mode, tmp_path, request) as store:
        if case.saver != "memory" and case.mode == "ainvoke":
            chunks, err, state, model = _run_async_saver(case, store)
        else:
            agent, model = build(case, store.saver)
            config: Any = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex}"}}
            chunks, err = collect(agent, first_input(case), config, case)
            state = agent.get_state(config)
        leaks = store.leaks(secret)

    # nothing streamed, returned or logged holds the raw value
    assert not leaked(secret, repr(chunks)), f"stream chunk holds the raw value ({case})"
    assert not leaked(secret, repr(state.values)), "current state holds the raw value"
    assert not leaked(secret, repr([t.interrupts for t in state.tasks])), "interrupt payload"
    assert not any(leaked(secret, r.getMessage() + repr(r.args)) for r in caplog.records), "a DEBUG log record"
    # the model never receives a raw value it did not write itself
    if case.entry not in ("output", "tool_args") or model.calls[1:]:
        assert not leaked(secret, model_inputs(model))
    # the stores: checkpoints, pending writes, blobs, file bytes (WAL included), table rows
    assert not leaks, f"raw value stored: {leaks}"
    # block: a value-free error, nothing stored; other strategies: the run completes
    if case.strategy == "block":
        assert err is not None
        assert_error_is_value_free(err, secret)
    else:
        assert err is None, repr(err)


def _async_saver(store: Store) -> Any:
    if store.path is not None:
        return AsyncSqliteSaver.from_conn_string(str(store.path))
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    return AsyncPostgresSaver.from_conn_string(store.dsn or "")


def _run_async_saver(case: Case, store: Store) -> tuple[list[Any], BaseException | None, Any, Any]:
    """An ainvoke case on SQLite/PostgreSQL: the async saver lives in the run's event loop."""

    async def main() -> tuple[list[Any], BaseException | None, Any, Any]:
        async with _async_saver(store) as saver:
            agent, model = build(case, saver)
            config: Any = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex}"}}
            chunks: list[Any] = []
            err: BaseException | None = None
            try:
                async for chunk in agent.astream(
                    first_input(case), config, stream_mode=STREAM_MODES, subgraphs=case.subgraphs
                ):
                    chunks.append(chunk)
            except Exception as exc:
                err = exc
            state = await agent.aget_state(config)
            return chunks, err, state, model

    return asyncio.run(main())


def test_raw_input_never_reaches_the_checkpointer() -> None:
    """Not even LangGraph's ``__start__`` channel or the ``__start__`` task's pending write hold the raw input."""
    saver = InMemorySaver()
    case = Case("email", "input", "redact", "memory", "invoke", False)
    agent, _ = build(case, saver)
    agent.invoke(first_input(case), {"configurable": {"thread_id": "t"}})
    assert Store("memory", saver).leaks(case.secret) == set()


# -- block: the thread stays usable ----------------------------------------------------------------------------
@pytest.mark.parametrize("entry", ["input", "output", "tool_result"])
def test_block_never_persists_and_the_next_clean_turn_works(run: Any, entry: str) -> None:
    saver = InMemorySaver()
    case = Case("email", entry, "block", "memory", "invoke", False)
    agent, _ = build(case, saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    with pytest.raises(PIIDetectionError) as info:
        run(agent, first_input(case), config=config)
    assert_error_is_value_free(info.value, case.secret)
    assert not leaked(case.secret, repr(agent.get_state(config).values))
    # a later clean turn on the same thread runs to the end (nothing in history re-raises)
    model2 = ScriptedChatModel(["all good"])
    agent2 = create_agent(model2, [lookup], middleware=[PIIMiddleware("email", strategy="block")], checkpointer=saver)
    out = run(agent2, {"messages": [HumanMessage("a clean question")]}, config=config)
    assert out["messages"][-1].content == "all good"
    assert not leaked(case.secret, model_inputs(model2))
    assert not Store("memory", saver).leaks(case.secret)


# -- human review, both orders ---------------------------------------------------------------------------------
# With PII listed first, the engine guards the model's message as soon as the model returns (ModelCall.guards),
# so HITL's inner wrap_model_call never records raw tool-call arguments in its pending-approval key.


def email_review_agent(
    strategy: Strategy,
    saver: BaseCheckpointSaver[Any],
    *,
    pii_first: bool = False,
    to: str = SECRETS["email"],
    salt: Any = None,
) -> tuple[Any, ScriptedChatModel, list[str]]:
    """An agent whose model calls send_email(to), reviewed by a human, with PIIMiddleware on emails (listed before or
    after the review). Returns the agent, its model and the list of what the tool got."""
    ran: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return f"sent to {to}"

    def reply(messages: list[Any]) -> AIMessage:  # per conversation: threads may run at once
        if messages[-1].type == "tool":
            return AIMessage("sent")
        return AIMessage("", tool_calls=[tool_call("send_email", {"to": to}, id="call_email")])

    model = ScriptedChatModel(default=reply)
    pii = PIIMiddleware(
        "email",
        strategy=strategy,
        apply_to_output=True,
        apply_to_tool_results=True,
        key=KEY if strategy == "placeholder" else None,
        **({"salt": salt} if salt is not None else {}),
    )
    hitl = HumanInTheLoopMiddleware(interrupt_on={"send_email": True})
    agent = create_agent(model, [send_email], middleware=[pii, hitl] if pii_first else [hitl, pii], checkpointer=saver)
    return agent, model, ran


@pytest.mark.parametrize("pii_first", [True, False], ids=["pii-first", "hitl-first"])
@pytest.mark.parametrize("strategy", ["redact", "placeholder"])
def test_human_review_sees_no_raw_value(run: Any, pii_first: bool, strategy: Strategy) -> None:
    secret = SECRETS["email"]
    saver = InMemorySaver()
    agent, _, ran = email_review_agent(strategy, saver, pii_first=pii_first)
    config: Any = {"configurable": {"thread_id": "t"}}
    chunks: list[Any] = list(
        agent.stream(
            first_input(Case("email", "x", strategy, "memory", "invoke", False)),
            config,
            stream_mode=STREAM_MODES,
            subgraphs=True,
        )
    )
    state = agent.get_state(config)
    payload = [i.value for t in state.tasks for i in t.interrupts]
    assert payload, "the review interrupt"
    assert not leaked(secret, repr(payload)) and not leaked(secret, repr(chunks))
    assert not Store("memory", saver).leaks(secret)
    if strategy == "placeholder":
        # the authorised reviewer UI reveals the value deliberately, with the key
        shown = reveal(payload, messages=state.values["messages"], key=KEY)
        assert leaked(secret, repr(shown))
        assert not leaked(secret, repr(reveal(payload, messages=state.values["messages"], key="x" * 40)))
    out = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=config)
    assert ran == ([secret] if strategy == "placeholder" else ["[REDACTED_EMAIL]"])
    assert not leaked(secret, repr(out)) and not Store("memory", saver).leaks(secret)


# -- retries, cancellation, logs -------------------------------------------------------------------------------
@pytest.mark.parametrize("retry_first", [True, False], ids=["retry-outer", "retry-inner"])
def test_model_retries_leak_nothing(run: Any, retry_first: bool) -> None:
    secret = SECRETS["credit_card"]
    model = ScriptedChatModel([TimeoutError("try again"), f"your card {secret}", "ok"])
    pii = PIIMiddleware("credit_card", apply_to_output=True)
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    saver = InMemorySaver()
    agent = create_agent(model, middleware=[retry, pii] if retry_first else [pii, retry], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    out = run(agent, {"messages": [HumanMessage("hi")]}, config=config)
    assert out["messages"][-1].content == "your card [REDACTED_CREDIT_CARD]"
    assert not Store("memory", saver).leaks(secret)


def test_a_cancelled_run_leaks_nothing() -> None:
    secret = SECRETS["email"]
    started = asyncio.Event()

    @tool
    async def slow(to: str) -> str:
        """Takes forever."""
        started.set()
        await asyncio.sleep(30)
        return f"done {to}"

    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("slow", {"to": secret})]), "never"])
    pii = PIIMiddleware("email", strategy="placeholder", key=KEY, apply_to_output=True, apply_to_tool_results=True)
    saver = InMemorySaver()
    agent = create_agent(model, [slow], middleware=[pii], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    chunks: list[Any] = []

    async def main() -> None:
        async def consume() -> None:
            async for chunk in agent.astream({"messages": [HumanMessage("go")]}, config, stream_mode=STREAM_MODES):
                chunks.append(chunk)

        task = asyncio.create_task(consume())
        await asyncio.wait_for(started.wait(), 10)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert chunks and not leaked(secret, repr(chunks))
    assert not Store("memory", saver).leaks(secret)
    assert not leaked(secret, repr(agent.get_state(config).values))


def test_placeholder_key_rotation_opens_old_values(run: Any) -> None:
    old, new = "old-key-0123456789abcdefghijklmnopqrstuv", "new-key-0123456789abcdefghijklmnopqrstuv"
    secret = SECRETS["email"]
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "t"}}
    agent = create_agent(
        ScriptedChatModel(["ok"]),
        middleware=[PIIMiddleware("email", strategy="placeholder", key=old)],
        checkpointer=saver,
    )
    run(agent, {"messages": [HumanMessage(f"I am {secret}")]}, config=config)
    name = Keyring.of(old).name("email", secret)
    sent: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return "sent"

    rotated = PIIMiddleware("email", strategy="placeholder", key=[new, old])  # new first: seals; old: still opens
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("send_email", {"to": name})]), "done"])
    agent2 = create_agent(model, [send_email], middleware=[rotated], checkpointer=saver)
    run(agent2, {"messages": [HumanMessage("send it")]}, config=config)
    assert sent == [secret]
    # without the old key the old value stays sealed: the tool gets the placeholder, never a wrong value
    agent3 = create_agent(
        ScriptedChatModel([AIMessage("", tool_calls=[tool_call("send_email", {"to": name})]), "done"]),
        [send_email],
        middleware=[PIIMiddleware("email", strategy="placeholder", key=new)],
        checkpointer=saver,
    )
    run(agent3, {"messages": [HumanMessage("again")]}, config=config)
    assert sent == [secret, name]


@pytest.mark.parametrize("pii_type", TYPES)
def test_messages_added_to_the_request_only_are_covered(run: Any, pii_type: str) -> None:
    secret = SECRETS[pii_type]

    @modify_model_request
    def inject(request: Any, state: Any) -> Any:
        return request.override(messages=[*request.messages, HumanMessage(f"context: {secret}")])

    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, middleware=[inject, PIIMiddleware(pii_type)])
    out = run(agent, {"messages": [HumanMessage("hi")]})
    assert not leaked(secret, model_inputs(model)) and not leaked(secret, repr(out))


def test_concurrent_threads_each_get_their_own_values() -> None:
    """Many threads at once through one agent (one middleware instance): every tool call gets its own thread's
    value back, never another thread's, and no store holds any raw value."""
    sent: list[tuple[str, str]] = []

    @tool
    async def send_email(to: str, thread: str) -> str:
        """Send an email."""
        await asyncio.sleep(0)
        sent.append((thread, to))
        return f"sent to {to}"

    def reply(messages: list[Any]) -> AIMessage | str:
        if any(m.type == "tool" for m in messages):
            return "done"
        text = str(messages[-1].content)
        thread = text.split()[-1]
        placeholder = text.split()[1]  # "write <EMAIL_...> t7"
        return AIMessage("", tool_calls=[tool_call("send_email", {"to": placeholder, "thread": thread})])

    saver = InMemorySaver()
    pii = PIIMiddleware("email", strategy="placeholder", key=KEY)
    agent = create_agent(ScriptedChatModel(default=reply), [send_email], middleware=[pii], checkpointer=saver)
    addresses = {f"t{i}": f"user{i}.private@example.com" for i in range(24)}

    async def main() -> None:
        await asyncio.gather(
            *(
                agent.ainvoke(
                    {"messages": [HumanMessage(f"write {email} {thread}")]}, {"configurable": {"thread_id": thread}}
                )
                for thread, email in addresses.items()
            )
        )

    asyncio.run(main())
    assert sorted(sent) == sorted(addresses.items())
    for email in addresses.values():
        assert not Store("memory", saver).leaks(email)


def _review(
    run: Any,
    strategy: Strategy,
    decision: dict[str, Any],
    saver: BaseCheckpointSaver[Any] | None = None,
    salt: Any = None,
    to: str = SECRETS["email"],
) -> tuple[Any, BaseCheckpointSaver[Any], ScriptedChatModel, list[str], Any]:
    """The model calls send_email(SECRET); the reviewer answers with ``decision`` (holding raw values they typed).
    Returns the resumed run's result (or the error it raised), the saver, the model, what the tool got, the agent."""
    saver = saver or InMemorySaver()
    agent, model, ran = email_review_agent(strategy, saver, to=to, salt=salt)
    config: Any = {"configurable": {"thread_id": "t"}}
    run(agent, {"messages": [HumanMessage("go")]}, config=config)
    try:
        out = run(agent, Command(resume={"decisions": [decision]}), config=config)
    except Exception as exc:  # returned for the test to inspect
        out = exc
    return out, saver, model, ran, agent


TYPED = "typed.by.reviewer@example.net"
EDIT = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": TYPED}}}
REJECT = {"type": "reject", "message": f"Do not send it; write to {TYPED} instead."}


def _resume_writes(saver: InMemorySaver) -> list[Any]:
    return [value for writes in saver.writes.values() for _t, channel, value, *_ in writes.values()
            if channel == "__resume__"]


@pytest.mark.parametrize("strategy", ["redact", "mask", "placeholder"])
def test_a_reviewer_edit_with_a_raw_value_is_guarded_too(run: Any, strategy: Strategy) -> None:
    out, saver, model, ran, _ = _review(run, strategy, EDIT)
    assert isinstance(saver, InMemorySaver)
    expected = {"placeholder": TYPED, "redact": "[REDACTED_EMAIL]", "mask": "typed.by.reviewer@****.net"}
    assert ran == [expected[strategy]]  # placeholder: the tool gets what the reviewer typed
    for raw in (SECRETS["email"], TYPED):
        assert not leaked(raw, repr(out)) and not leaked(raw, model_inputs(model))
        assert not Store("memory", saver).leaks(raw)  # the __resume__ write included
    resumes = _resume_writes(saver)
    assert resumes  # LangGraph stored the reviewer's decision (guarded) as the resume write
    assert not leaked(TYPED, b"|".join(b for value in resumes for b in _walk(value)))
    if strategy == "placeholder":
        assert "|pii" in repr(resumes)  # carried sealed in the resume write ...
        assert "|pii" not in repr(out["messages"])  # ... and settled into a vault once it reached a message


def test_a_reviewers_rejection_note_is_guarded(run: Any) -> None:
    out, saver, model, ran, _ = _review(run, "placeholder", REJECT)
    assert ran == []
    note = out["messages"][2]
    assert note.status == "error" and "<EMAIL_" in note.content and TYPED not in note.content
    assert REJECT["message"] in reveal(note.content, messages=out["messages"], key=KEY)
    for raw in (SECRETS["email"], TYPED):
        assert not leaked(raw, model_inputs(model)) and not Store("memory", saver).leaks(raw)


def test_block_refuses_a_resume_holding_a_raw_value_and_stores_nothing(run: Any) -> None:
    out, saver, _, ran, agent = _review(run, "block", EDIT, to="the team")
    assert isinstance(out, PIIDetectionError) and out.hook == "guard_resume" and TYPED not in str(out)
    assert ran == [] and not Store("memory", saver).leaks(TYPED)
    config: Any = {"configurable": {"thread_id": "t"}}
    assert agent.get_state(config).interrupts  # still waiting for a decision: the refused one left no trace
    clean = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "the whole team"}}}
    out = run(agent, Command(resume={"decisions": [clean]}), config=config)
    assert ran == ["the whole team"] and out["messages"][-1].content == "sent"


def test_a_tenant_hash_of_a_typed_value_is_the_tenants(run: Any) -> None:
    salts = {"acme": b"acme-salt-0123456789"}
    _, saver, _, ran, _ = _review(run, "hash", EDIT, salt=lambda runtime: salts["acme"])
    digest = hmac.new(salts["acme"], TYPED.encode(), hashlib.sha256).hexdigest()[:16]
    assert ran == [f"<email_hash:{digest}>"]  # settled with the run's salt when the edit reached a message
    assert not Store("memory", saver).leaks(TYPED)


def test_the_raw_bytes_of_sqlite_never_hold_a_typed_value(tmp_path: Path) -> None:
    path = tmp_path / "review.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        out, _, _, ran, _ = _review(lambda agent, inp, config: agent.invoke(inp, config), "placeholder", EDIT,
                                    saver=SqliteSaver(conn))
        assert ran == [TYPED] and out["messages"][-1].content == "sent"
    finally:
        conn.close()
    assert not Store("sqlite", InMemorySaver(), path=path).leaks(TYPED)


def test_tool_artifacts_are_guarded(run: Any) -> None:
    secret = SECRETS["ip"]

    @tool(response_format="content_and_artifact")
    def scan() -> tuple[str, dict[str, Any]]:
        """Scan the network."""
        return "1 host up", {"hosts": [secret], "note": f"seen {secret}"}

    saver = InMemorySaver()
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("scan", {})]), "done"])
    agent = create_agent(
        model, [scan], middleware=[PIIMiddleware("ip", apply_to_tool_results=True)], checkpointer=saver
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    out = run(agent, {"messages": [HumanMessage("scan")]}, config=config)
    assert out["messages"][2].artifact == {"hosts": ["[REDACTED_IP]"], "note": "seen [REDACTED_IP]"}
    assert not leaked(secret, repr(out)) and not Store("memory", saver).leaks(secret)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_concurrent_reviewers_each_get_their_own_typed_value_back(mode: str) -> None:
    """Twelve threads paused for review on one agent (one middleware instance) are resumed at once, each reviewer
    typing another address: each tool call gets its own reviewer's address, and no stored byte holds any of them."""
    saver = InMemorySaver()
    agent, _, ran = email_review_agent("placeholder", saver)
    typed = {f"t{i}": f"reviewer{i}.typed@example.org" for i in range(12)}

    def config(thread: str) -> Any:
        return {"configurable": {"thread_id": thread}}

    def edit(thread: str) -> Any:
        return Command(resume={"decisions": [
            {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": typed[thread]}}}]})

    for thread in typed:
        agent.invoke({"messages": [HumanMessage("go")]}, config(thread))
    if mode == "invoke":
        with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
            outs = list(pool.map(lambda t: agent.invoke(edit(t), config(t)), typed))
    else:
        async def resume_all() -> list[Any]:
            return await asyncio.gather(*(agent.ainvoke(edit(t), config(t)) for t in typed))

        outs = asyncio.run(resume_all())
    assert sorted(ran) == sorted(typed.values())
    for thread, out in zip(typed, outs, strict=True):
        [answer] = [m for m in out["messages"] if m.type == "tool"]
        assert "\nsent to <EMAIL_" in answer.content  # echoed back as its placeholder (after the edit notice)
        revealed = reveal(answer.content, messages=out["messages"], key=KEY)
        assert revealed.endswith(f"\nsent to {typed[thread]}")  # this thread's reviewer's address, no other
    for address in typed.values():
        assert not Store("memory", saver).leaks(address)
