"""Middleware model calls paid once: a model call a middleware makes for itself is recorded with its step.

A summarizer, a router's classifier, a tool selector: their calls go through
:func:`middleware_kit._engine.internal_calls.invoke_internal` (or ``ainvoke_internal``), which records each answer in
the call ledger's database, beside the checkpoints. When the step is run again (a crashed run continued in a new
process, an interrupted run resumed), the same call is given its recorded answer: the model is not asked, or paid,
twice.

A call is recorded at (thread, checkpoint namespace of the task, site, ordinal):

- the task's checkpoint namespace holds LangGraph's task id, derived from the checkpoint the step started from: the
  same when that step is run again, new in the next step and the next turn (which are never given an older answer);
- the site says which middleware hook made the call (``"SummarizationMiddleware.before_model"``); calls one site
  makes concurrently in one task must each have their own site (a guard's name in it, say);
- the ordinal counts the site's calls in the current run of the task (0 for the first), so a hook that asks twice
  gets two records, and a task run again counts from 0 again.

The record also holds a digest of the call's input: a replay that asks something else (the hook's input changed, a
deployment changed the prompt) is not given the old answer; the model is asked, and the new answer replaces it.

Nothing is recorded outside a run with a checkpointer and a ``thread_id``, nor with ``create_agent(..., ledger=False)``
(which sets :data:`LEDGER_OFF` in the run's config), nor for an answer the checkpointer's serde cannot store. The
answer is written after the model returns and before the hook sees it; a crash while the model is answering leaves
nothing, and the step run again asks the model again.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config

from middleware_kit._engine.compat import CONFIG_KEY_CHECKPOINTER, task_run_marker
from middleware_kit._engine.drive import Step, Steps
from middleware_kit._engine.internal_calls import record_internal_calls
from middleware_kit.ledger.records import Answer, ModelCallKey
from middleware_kit.ledger.store import LedgerStore, ledger_store

__all__ = ["LEDGER_OFF", "Recording", "input_digest", "ledgered_call", "recorded", "recording"]

LEDGER_OFF = "__middleware_kit_ledger_off"
"""The ``config["configurable"]`` key that turns the recording of middleware model calls off for a run (set by
``create_agent(..., ledger=False)``; an outer agent's setting reaches the agents it runs)."""


_ORDINALS: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
"""The next ordinal of each site, per task run (its entry goes with the task run)."""
_ORDINALS_LOCK = threading.Lock()


def _next_ordinal(marker: Any, site: str) -> int:
    with _ORDINALS_LOCK:
        counts = _ORDINALS.get(marker)
        if counts is None:
            counts = _ORDINALS[marker] = {}
        ordinal = counts.get(site, 0)
        counts[site] = ordinal + 1
        return ordinal


def input_digest(value: Any, serde: Any) -> str:
    """A digest of a model call's input (messages, a prompt, a decision model's question), the same in every process
    running the same code: its serialization with the checkpointer's ``serde`` (as the checkpoint would store it),
    else its ``repr``. (An input that is not the same in another process is asked again: safe, not free.)"""
    try:
        data = bytes(serde.dumps_typed(value)[1])
    except Exception:  # not serializable: its repr, which may differ between processes
        data = repr(value).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Recording:
    """Where a middleware model call is recorded, and the digest of what it asks."""

    store: LedgerStore
    key: ModelCallKey
    digest: str


def recording(site: str, input: Any, config: RunnableConfig | None = None) -> Recording | None:
    """Where the running task records the call that ``site`` makes now with ``input`` (this takes the site's next
    ordinal); None when it is not recorded (module doc). ``config``: the run's config (default: the current one)."""
    if config is None:
        config = var_child_runnable_config.get()
    conf = (config or {}).get("configurable") or {}
    saver, thread = conf.get(CONFIG_KEY_CHECKPOINTER), conf.get("thread_id")
    if saver is None or thread is None or conf.get(LEDGER_OFF):
        return None
    marker = task_run_marker(conf)
    if marker is None:
        return None
    key = ModelCallKey(str(thread), str(conf.get("checkpoint_ns") or ""), site, _next_ordinal(marker, site))
    store = ledger_store(saver)
    return Recording(store, key, input_digest(input, store.serde))


def recorded(at: Recording | None, call: Step) -> Steps[Any]:
    """The model call ``call`` through the ledger: the recorded answer when there is one for this input (the model
    is not called); else the model's answer, recorded (durably) before it is returned."""
    __tracebackhide__ = True
    if at is None:
        return (yield call)
    store = at.store
    found: Answer | None = yield Step(store.recorded_answer, store.arecorded_answer, at.key)
    if found is not None and found.digest == at.digest:
        try:
            return store.serde.loads_typed(found.answer)
        except Exception:  # an answer this process cannot read (a class gone): ask the model again
            pass
    answer = yield call
    try:
        kind, data = store.serde.dumps_typed(answer)
    except Exception:  # an answer the serde cannot store is not recorded (module doc)
        return answer
    yield Step(store.record_answer, store.arecord_answer, at.key, at.digest, kind, data)
    return answer


def ledgered_call(site: str, input: Any, call: Step) -> Steps[Any]:
    """The body of an internal call (``invoke_internal``) made by ``site`` with ``input``: ``call`` through the
    ledger when the run records it (its place, the site's next ordinal, is taken now)."""
    return recorded(recording(site, input), call)


record_internal_calls(ledgered_call)
