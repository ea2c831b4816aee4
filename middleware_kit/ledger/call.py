"""The ledgered tool call: the innermost wrapper of a tool's execution, written once for sync and async.

What it records is what the checkpoint would keep: results (and an in-doubt call's arguments) pass the agent's
message guards first, so a PII middleware's raw values never reach the ledger's table.

For a call the ledger covers (an agent with a checkpointer, a tool not excluded):

1. ``claim``: the call is recorded as *started*, durably, before the tool runs; if it was recorded already, this is a
   replay (a crashed run continued, an interrupted run resumed):
   - *finished*: its recorded result is returned; the tool does not run;
   - *started* with no result (in doubt): the reconcile policy decides (:mod:`middleware_kit.ledger.policy`): retry,
     skip (the model is told), or mark done (with a result);
2. the tool runs, with its idempotency key current (:mod:`middleware_kit.ledger.keys`);
3. ``finish``: its result is recorded (the checkpointer's serde) before it is returned. A tool that raises (an
   ``interrupt()`` in it included) did not finish: its record is dropped, and the error goes where it would without
   the ledger. A cancellation leaves the record started: in doubt.

A middleware may call the tool handler again in the same step (a retry layer): the first execution of a call in a
task run may be a replay, later ones run the tool again (a new attempt, the same key).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from middleware_kit._engine.compat import CONFIG_KEY_CHECKPOINTER
from middleware_kit._engine.drive import Step, Steps
from middleware_kit.ledger.keys import CURRENT, METADATA_KEY, idempotency_key
from middleware_kit.ledger.policy import Ledger, ReconcileDecision, Retry, answer, decision_of, response_schema
from middleware_kit.ledger.records import CallKey, Entry, InDoubtCall
from middleware_kit.ledger.store import LedgerStore, ledger_store

__all__ = ["Execute", "ledgered", "recorded_at", "task_run"]

Execute = Callable[[Any, RunnableConfig], Step]
"""The real execution of a (possibly rewritten) request with its config, as a step."""


_RAN: ContextVar[set[CallKey] | None] = ContextVar("middleware_kit_ledger_ran", default=None)
"""The calls executed so far in the current tool task run (see the module doc's last paragraph)."""


class _TaskRun:
    """One run of a tool task (the tool node enters it around each call it runs). A plain context manager, not a
    ``contextlib`` generator: it is entered for every tool call."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _RAN.set(set())

    def __exit__(self, *exc: object) -> None:
        _RAN.reset(self._token)


def task_run() -> _TaskRun:
    """One run of a tool task: ``with task_run(): ...`` around each call the tool node runs."""
    return _TaskRun()


def recorded_at(policy: Ledger, request: Any, config: RunnableConfig) -> tuple[LedgerStore, CallKey] | None:
    """Where the ledger records this call, or None when it does not cover it: a tool it leaves alone,
    or a run with no checkpointer or no thread (the ledger has nowhere to keep it: the call runs as it would without
    one)."""
    tool = request.tool
    if tool is None or not policy.covers(tool):
        return None
    conf = config.get("configurable") or {}
    saver, thread = conf.get(CONFIG_KEY_CHECKPOINTER), conf.get("thread_id")
    if saver is None or thread is None:
        return None
    return ledger_store(saver), CallKey(str(thread), str(conf.get("checkpoint_ns") or ""), str(request.tool_call["id"]))


def _with_key(request: Any, config: RunnableConfig, key: str) -> tuple[Any, RunnableConfig]:
    """The request and config the tool runs with: ``config["metadata"]`` (and its ``ToolRuntime.config``) carry the
    idempotency key. ``config`` is the call's own (``ToolNode`` makes one per call, its ``metadata`` a copy): when the
    request's runtime holds that same config, the key is added to it in place; else (a wrapper gave the request
    another runtime) copies, the task's own config left as it was."""
    metadata = config.get("metadata")
    if type(metadata) is dict and getattr(request.runtime, "config", None) is config:
        metadata[METADATA_KEY] = key
        return request, config
    config = {**config, "metadata": {**(metadata or {}), METADATA_KEY: key}}
    runtime = request.runtime
    if runtime is not None:
        runtime = replace(runtime, config=config)
    return request.override(runtime=runtime), config


def ledgered(
    policy: Ledger, found: tuple[LedgerStore, CallKey], request: Any, config: RunnableConfig, execute: Execute,
    storable: Callable[[Any], Any] = lambda result: result,
) -> Steps[Any]:
    """The tool call ``execute`` runs, through the ledger (module doc), recorded where ``found``
    (:func:`recorded_at`) says. ``storable``: a result as it may be recorded (the agent's message guards applied:
    what the checkpoint would keep, never a raw value a guard redacts).

    One body, every step of a call in it: this runs around each tool call of an agent with a checkpointer."""
    __tracebackhide__ = True
    store, key = found
    idem = idempotency_key(key)
    request, config = _with_key(request, config, idem)
    entry: Entry | None = yield Step(store.claim, store.aclaim, key, request.tool.name)
    if entry is None:
        attempt = 1
        _ran(key)
    else:
        first = _ran(key)
        if entry.status == "finished" and first:
            return store.serde.loads_typed(entry.result)  # a replay: the recorded result, the tool does not run
        if entry.status == "started":
            call = _in_doubt(request, key, entry, idem, storable)
            decision = yield from _reconcile(policy, request, call)
            if not isinstance(decision, Retry):
                result = answer(decision, call)
                yield Step(store.finish, store.afinish, key, entry.attempt, *store.serde.dumps_typed(storable(result)))
                return result
        attempt = yield Step(store.restart, store.arestart, key)
    token = CURRENT.set(idem)
    try:
        result = yield execute(request, config)
    except Exception:
        yield Step(store.forget, store.aforget, key, attempt)
        raise
    finally:
        CURRENT.reset(token)
    yield Step(store.finish, store.afinish, key, attempt, *store.serde.dumps_typed(storable(result)))
    return result


def _ran(key: CallKey) -> bool:
    """Note that ``key`` runs in the current tool task run; whether this is its first execution there."""
    ran = _RAN.get()
    if ran is None:
        return True
    first = key not in ran
    ran.add(key)
    return first


def _shown_args(args: dict[str, Any], storable: Callable[[Any], Any]) -> dict[str, Any]:
    """The call's arguments as the interrupt may show them (it is checkpointed): through the agent's message guards,
    so a value a PII middleware restored for the tool is shown as its placeholder, never raw."""
    message = ToolMessage(content=json.dumps(args, default=str), tool_call_id="ledger-in-doubt")
    shown = storable(message)
    if shown is message:
        return args
    try:
        parsed = json.loads(shown.content)
    except (TypeError, ValueError):
        return {"arguments": shown.content}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def _in_doubt(request: Any, key: CallKey, entry: Entry, idem: str, storable: Callable[[Any], Any]) -> InDoubtCall:
    return InDoubtCall(
        tool=request.tool.name, args=_shown_args(dict(request.tool_call.get("args") or {}), storable),
        call_id=key.call_id,
        thread_id=key.thread_id, checkpoint_ns=key.checkpoint_ns, idempotency_key=idem, attempt=entry.attempt,
        started_at=entry.started_at,
    )


def _reconcile(policy: Ledger, request: Any, call: InDoubtCall) -> Steps[ReconcileDecision]:
    """The policy for an in-doubt call: idempotent tools are retried; else the ``reconcile`` hook decides; else a
    person does (the run pauses with an interrupt naming the call; the resume value is the decision)."""
    if policy.is_idempotent(request.tool):
        return Retry()
    hook = policy.reconcile_step()
    if hook is not None:
        decided = yield hook.with_args(call, request.runtime)
        if decided is not None:
            return decision_of(decided, call)
    decision: ReconcileDecision = interrupt(call.payload(), response_schema=response_schema(call))
    return decision
