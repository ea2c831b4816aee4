"""Tool-call pairing: every tool call in the history has its ``ToolMessage``, and every ``ToolMessage`` its call.

The framework never sends a model a dangling call. Runs that end early (``jump_to: "end"``, limits, rejections)
close the open calls with an explicit error ``ToolMessage``; a thread left with open calls (an interrupt that was
never resumed, then a new message) is repaired before the next model call. Answers always stand right after the
calls' ``AIMessage`` (providers reject anything else), so when other messages already follow it the history is
rewritten with the answers in place (``RemoveMessage(REMOVE_ALL_MESSAGES)`` + the repaired history): rare, and O(n)
only then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage, ToolCall, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

__all__ = ["PairingFix", "close_pending", "closing_messages", "last_ai_index", "pending_tool_calls"]


def last_ai_index(messages: Sequence[Any]) -> int:
    """Index of the last ``AIMessage`` (-1 if none). Walks back from the end: O(messages since it)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            return i
    return -1


def _last_calling(messages: Sequence[Any]) -> tuple[int, set[str]]:
    """Index of the newest ``AIMessage`` with tool calls (-1 if none), and the ids answered after it."""
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            return i, answered
    return -1, answered


def pending_tool_calls(messages: Sequence[Any]) -> list[ToolCall]:
    """Calls of the newest tool-calling ``AIMessage`` that have no ``ToolMessage`` yet, in call order.

    Walks back to that message only (earlier calls were answered before the model was called again).
    """
    i, answered = _last_calling(messages)
    if i < 0:
        return []
    return [call for call in messages[i].tool_calls if call["id"] not in answered]


def _malformed_answers(message: AIMessage, answered: set[str]) -> list[ToolMessage]:
    """Error ``ToolMessage``s for the message's invalid tool calls (arguments that did not parse) that have an id
    and no answer yet: the model learns the call did not run (LangChain 1.5's text)."""
    answers = []
    for call in message.invalid_tool_calls:
        call_id = call.get("id")
        if call_id is None or call_id in answered:
            continue
        name = call.get("name") or "unknown"
        answers.append(
            ToolMessage(
                content=f"Tool call {name} with id {call_id} could not be executed - arguments were malformed or "
                f"truncated.",
                name=name,
                tool_call_id=call_id,
                status="error",
            )
        )
    return answers


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


@dataclass(frozen=True, slots=True)
class PairingFix:
    """How to close the open calls of a history."""

    history: list[AnyMessage]
    """The history with every call answered (what a model may be sent)."""
    update: list[Any]
    """The ``messages`` write that turns the stored history into ``history`` (appended answers, or a rewrite)."""


def close_pending(messages: Sequence[AnyMessage], reason: str, *, malformed: bool = False) -> PairingFix | None:
    """Close the open calls of the newest tool-calling ``AIMessage`` with error ``ToolMessage``s; None if none.

    ``malformed`` (before a model call): its invalid tool calls with an id are answered too (providers send them
    back as calls), as LangChain 1.5 does; an answer that ends the run leaves them as the model wrote them."""
    i, answered = _last_calling(messages)
    if i < 0:
        return None
    calling: AIMessage = messages[i]  # type: ignore[assignment]
    missing = [call for call in calling.tool_calls if call["id"] not in answered]
    closing: list[ToolMessage] = closing_messages(missing, reason) if missing else []
    if malformed:
        closing.extend(_malformed_answers(calling, answered))
    if not closing:
        return None
    j = i + 1
    while j < len(messages) and isinstance(messages[j], ToolMessage):
        j += 1
    if j == len(messages):
        return PairingFix([*messages, *closing], list(closing))
    history: list[AnyMessage] = [*messages[:j], *closing, *messages[j:]]
    return PairingFix(history, [RemoveMessage(id=REMOVE_ALL_MESSAGES), *history])
