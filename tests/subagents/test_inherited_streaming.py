"""A sub-agent's streamed tokens wait for its callers' inherited guards too (docs/streaming.md, docs/subagents.md):
run from a tool of an agent whose output guard holds the whole answer back (or whose PII middleware holds a window
back), a sub-agent with no guard of its own streams nothing its caller's guard later rejects, on every surface that
carries nested tokens, under stream and astream."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

from middleware_kit import create_agent
from middleware_kit.middlewares import GuardrailsMiddleware, PIIMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.streaming.conftest import TokenModel, collect
from tests.subagents.test_inherited_policies import agent_task

SECRET = "ZEBRA-7731"
EMAIL = "carol.jones@example.org"
SURFACES = ["stream:messages+subgraphs", "astream:messages+subgraphs", "astream_events:v2", "stream:debug"]


def no_secret(request: Any, answer: Any) -> str | None:
    return "the answer holds a secret code" if SECRET in answer.text else None


def parent_of(child: Any, guard: Any) -> Any:
    model = ScriptedChatModel([AIMessage(content="", tool_calls=[tool_call("task", {"description": "look"})]),
                               "parent done"])
    return create_agent(model, [agent_task(child)], middleware=[guard])


def texts(surface: str, items: list[Any]) -> str:
    """Every streamed token and every event payload of ``items``, as one text to search."""
    if surface.startswith(("stream:messages", "astream:messages")):
        chunks = [item[-1][0] for item in items]
        return " ".join(c.text for c in chunks if isinstance(c, AIMessageChunk))
    return repr(items)


@pytest.mark.parametrize("surface", SURFACES)
def test_a_sub_agents_tokens_wait_for_the_callers_output_guard(surface: str) -> None:
    child = create_agent(TokenModel(answers=[AIMessage(f"the vault code is {SECRET}, keep it safe")]))
    parent = parent_of(child, GuardrailsMiddleware(output_guards=[no_secret]))
    items = collect(parent, surface, {"messages": [HumanMessage("go")]})
    assert items
    assert SECRET not in texts(surface, items)


@pytest.mark.parametrize("surface", SURFACES)
def test_a_sub_agents_tokens_go_through_the_callers_pii_window(surface: str) -> None:
    child = create_agent(TokenModel(answers=[AIMessage(f"write to {EMAIL} about it, then wait for the reply")],
                                    size=2))
    parent = parent_of(child, PIIMiddleware("email", strategy="redact", apply_to_output=True))
    items = collect(parent, surface, {"messages": [HumanMessage("go")]})
    streamed = texts(surface, items)
    assert EMAIL not in streamed and "carol.jones" not in streamed
    if surface.endswith("messages+subgraphs"):
        assert "[REDACTED_EMAIL]" in streamed  # the window released the vetted text, not nothing
