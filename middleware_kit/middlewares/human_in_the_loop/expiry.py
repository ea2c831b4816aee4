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
from typing import TYPE_CHECKING, Any

from langgraph.types import Command, Interrupt

from middleware_kit.drive import sync_twin
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


async def _athread_ids(saver: Any) -> list[str]:
    seen: dict[str, None] = {}
    async for item in saver.alist(None):
        configurable = item.config.get("configurable") or {}
        if not configurable.get("checkpoint_ns") and configurable.get("thread_id") is not None:
            seen[str(configurable["thread_id"])] = None
    return list(seen)


async def aexpire_pending_approvals(
    agent: Any,
    *,
    config: Any = None,
    thread_ids: Iterable[str] | None = None,
    now: float | None = None,
    context: Any = None,
) -> list[ExpiredApproval]:
    """Resolve every expired human-in-the-loop approval, without user input (``aexpire_pending_approvals``: the
    checkpointer must support async; ``expire_pending_approvals`` is the same body run with ``get_state``/``invoke``,
    derived by :func:`middleware_kit.drive.sync_twin`).

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
    moment = time.time() if now is None else now
    found = await _athread_ids(_checkpointer(agent)) if config is None and thread_ids is None else []
    resolved: list[ExpiredApproval] = []
    for cfg in _configs(agent, config, thread_ids, found):
        due = _due((await agent.aget_state(cfg)).interrupts, moment)
        if not due:
            continue
        try:
            await agent.ainvoke(Command(resume={i.id: dict(EXPIRE) for i, _ in due}), cfg, context=context)
        except InvalidResumeError:
            continue
        resolved += _records(str(cfg["configurable"]["thread_id"]), due)
    return resolved


_RENAMES = {
    "aexpire_pending_approvals": "expire_pending_approvals",
    "_athread_ids": "_thread_ids",
    "alist": "list",
    "aget_state": "get_state",
    "ainvoke": "invoke",
}

if TYPE_CHECKING:

    def _thread_ids(saver: Any) -> list[str]:
        """The sync form of :func:`_athread_ids`."""

    def expire_pending_approvals(
        agent: Any,
        *,
        config: Any = None,
        thread_ids: Iterable[str] | None = None,
        now: float | None = None,
        context: Any = None,
    ) -> list[ExpiredApproval]:
        """The sync form of :func:`aexpire_pending_approvals` (``get_state``/``invoke``)."""

else:
    _thread_ids = sync_twin(_athread_ids, _RENAMES)
    expire_pending_approvals = sync_twin(aexpire_pending_approvals, _RENAMES)
