"""Small builders shared by tests (not fixtures: plain functions keep each test readable)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from middleware_kit.testing import ScriptedChatModel, tool_call


def tool_then_answer(name: str = "add", args: dict[str, Any] | None = None, answer: str = "done") -> ScriptedChatModel:
    """A model that calls one tool, then answers (and does it again for every later run)."""
    return ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call(name, args if args is not None else {"a": 1, "b": 2})]), answer],
        cycle=True,
    )


def kinds(messages: list[BaseMessage]) -> list[str]:
    return [type(m).__name__ for m in messages]
