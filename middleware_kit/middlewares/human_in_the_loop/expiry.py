"""Approval expiry without user input: the function a background job calls.

``expire_pending_approvals(agent)`` finds every pending human-in-the-loop approval whose deadline has passed (in one
thread, some threads, or every thread the agent's checkpointer holds) and resumes it with ``{"expired": True}``: the
middleware checks the deadline itself (with its own clock), gives every reviewed call of that turn its
``on_timeout`` decision, tells the model the approval expired, and the run continues as after any resume.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from langgraph.types import Command, Interrupt

from middleware_kit._engine.drive import Step, Steps, run_async, run_sync
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares.human_in_the_loop.types import ExpiredApproval, InvalidResumeError

__all__ = ["aexpire_pending_approvals", "expire_pending_approvals"]

EXPIRE: Mapping[str, Any] = {"expired": True}
"""The resume value that resolves an expired approval with its ``on_timeout`` decisions."""


def _deadline(value: Any) -> float | None:
    """The deadline of one of our interrupts (None: not ours, or no timeout)."""
    if not isinstance(value, Mapping) or not ("action_requests" in value or value.get("type") == "tool_approval"):
        return None
    deadline = value.get("expires_at_epoch")
    return float(deadline) if isinstance(deadline, (int, float)) and not isinstance(deadline, bool) else None


def _due(interrupts: Iterable[Interrupt], now: float) -> list[tuple[Interrupt, float]]:
    due = []
    for pending in interrupts:
        deadline = _deadline(pending.value)
        if deadline is not None and deadline <= now:
            due.append((pending, deadline))
    return due


def _calls(value: Mapping[str, Any]) -> tuple[str, ...]:
    if value.get("type") == "tool_approval":  # per_call: LangChain 1.5's ToolApprovalRequest
        return (str(value["tool_call_id"]),) if value.get("tool_call_id") is not None else ()
    requests = value.get("action_requests") or []
    return tuple(str(r.get("id")) for r in requests if r.get("id") is not None)


def _records(thread_id: str, due: list[tuple[Interrupt, float]]) -> list[ExpiredApproval]:
    return [
        ExpiredApproval(thread_id=thread_id, interrupt_id=i.id, expires_at=datetime.fromtimestamp(d, UTC),
                        tool_call_ids=_calls(i.value))
        for i, d in due
    ]


def _configs(agent: Any, config: Any, thread_ids: Iterable[str] | None, found: Iterable[str]) -> Iterator[Any]:
    if config is not None:
        yield config
        return
    for thread in thread_ids if thread_ids is not None else found:
        yield {"configurable": {"thread_id": thread}}


def _checkpointer(agent: Any) -> Any:
    saver = getattr(agent, "checkpointer", None)
    if saver is None or isinstance(saver, bool):
        raise MiddlewareConfigError(
            "expire_pending_approvals needs an agent built with a checkpointer: pending approvals live in its "
            "checkpoints. Fix: create_agent(..., checkpointer=SqliteSaver(...) or PostgresSaver(...)).",
            middleware="HumanInTheLoopMiddleware",
            hook="expire_pending_approvals",
        )
    return saver


def _thread_of(item: Any) -> str | None:
    """The thread of a checkpoint listed by ``saver.list``/``alist`` (None: a subgraph's checkpoint)."""
    configurable = item.config.get("configurable") or {}
    thread = configurable.get("thread_id")
    return None if configurable.get("checkpoint_ns") or thread is None else str(thread)


def _thread_ids(saver: Any) -> list[str]:
    return list(dict.fromkeys(t for item in saver.list(None) if (t := _thread_of(item)) is not None))


async def _athread_ids(saver: Any) -> list[str]:
    return list(dict.fromkeys([t async for item in saver.alist(None) if (t := _thread_of(item)) is not None]))


def _expiring(
    agent: Any, config: Any, thread_ids: Iterable[str] | None, now: float | None, context: Any
) -> Steps[list[ExpiredApproval]]:
    """The body of :func:`expire_pending_approvals` and :func:`aexpire_pending_approvals` (one body, two drivers)."""
    moment = time.time() if now is None else now
    found: list[str] = []
    if config is None and thread_ids is None:
        found = yield Step(_thread_ids, _athread_ids, _checkpointer(agent))
    resolved: list[ExpiredApproval] = []
    for cfg in _configs(agent, config, thread_ids, found):
        due = _due((yield Step(agent.get_state, agent.aget_state, cfg)).interrupts, moment)
        if not due:
            continue
        resume: Command[Any] = Command(resume={i.id: dict(EXPIRE) for i, _ in due})
        try:
            yield Step(partial(agent.invoke, context=context), partial(agent.ainvoke, context=context), resume, cfg)
        except InvalidResumeError:
            continue
        resolved += _records(str(cfg["configurable"]["thread_id"]), due)
    return resolved


def expire_pending_approvals(
    agent: Any, *, config: Any = None, thread_ids: Iterable[str] | None = None, now: float | None = None,
    context: Any = None,
) -> list[ExpiredApproval]:
    """Resolve every expired human-in-the-loop approval, without user input (``aexpire_pending_approvals``: the
    same, with the checkpointer's and the agent's async methods).

    Args:
        agent: The compiled agent (``create_agent(...)`` with a checkpointer).
        config: One thread's config (``{"configurable": {"thread_id": ...}}``); or
        thread_ids: Several threads; with neither, every thread in the agent's checkpointer (one scan of it).
        now: The time the deadlines are compared with (seconds since the epoch; default ``time.time()``). The
            middleware checks the deadline again with its own ``clock``: an approval it does not consider expired is
            left pending.
        context: The run context to resume with (LangGraph does not restore it), if the agent has a
            ``context_schema``.

    Returns:
        The approvals resolved, one per interrupt (each resumed run has continued: tools approved on timeout ran, and
        the model answered).
    """
    return run_sync(_expiring(agent, config, thread_ids, now, context))


async def aexpire_pending_approvals(
    agent: Any, *, config: Any = None, thread_ids: Iterable[str] | None = None, now: float | None = None,
    context: Any = None,
) -> list[ExpiredApproval]:
    """:func:`expire_pending_approvals` under ``ainvoke``: ``alist``, ``aget_state`` and ``ainvoke`` (the checkpointer
    must support async)."""
    return await run_async(_expiring(agent, config, thread_ids, now, context))
