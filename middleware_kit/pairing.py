"""Tool-call pairing: every tool call in the history has its ``ToolMessage``, and every ``ToolMessage`` its call.

The framework never sends a model a dangling call. Runs that end early (``jump_to: "end"``, limits, rejections)
close the open calls of the last ``AIMessage`` with an explicit error ``ToolMessage``; a thread left with open calls
(an interrupt that was never resumed, then a new message) is repaired before the next model call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage

__all__ = ["closing_messages", "last_ai_index", "pending_tool_calls", "repair_dangling"]


def last_ai_index(messages: Sequence[Any]) -> int:
    """Index of the last ``AIMessage`` (-1 if none). Walks back from the end: O(messages since it)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            return i
    return -1


def pending_tool_calls(messages: Sequence[Any]) -> list[ToolCall]:
    """Calls of the last ``AIMessage`` that have no ``ToolMessage`` after it yet, in call order."""
    i = last_ai_index(messages)
    if i < 0:
        return []
    calls = messages[i].tool_calls
    if not calls:
        return []
    answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolMessage)}
    return [c for c in calls if c["id"] not in answered]


def closing_messages(calls: Sequence[ToolCall], reason: str) -> list[ToolMessage]:
    """Error ``ToolMessage``s that close ``calls`` without running them, telling the model why."""
    return [
        ToolMessage(
            content=f"Tool call '{call['name']}' was not executed: {reason}",
            name=call["name"],
            tool_call_id=call["id"] or "",
            status="error",
        )
        for call in calls
    ]


def repair_dangling(messages: Sequence[AnyMessage]) -> list[AnyMessage] | None:
    """If an ``AIMessage`` other than the last message has unanswered calls, return the history with error
    ``ToolMessage``s inserted right after each such message; else None (the common case, checked in O(tail)).

    Only the newest ``AIMessage`` can be left dangling by a run (earlier ones were answered before the model was
    called again), so the check walks back to it and stops.
    """
    i = last_ai_index(messages)
    if i < 0 or i == len(messages) - 1 or not messages[i].tool_calls:  # type: ignore[union-attr]
        return None
    missing = pending_tool_calls(messages)
    if not missing:
        return None
    # Close them right after the calls' own ToolMessages, before whatever came next (a new human turn).
    j = i + 1
    while j < len(messages) and isinstance(messages[j], ToolMessage):
        j += 1
    closing = closing_messages(missing, "the previous run ended before it ran (it was interrupted or stopped).")
    return [*messages[:j], *closing, *messages[j:]]
