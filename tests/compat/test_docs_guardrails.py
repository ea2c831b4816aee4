"""The examples of LangChain 1.5's "Guardrails" page (docs.langchain.com/oss/python/langchain/guardrails), rewritten
for middleware_kit: imports changed, models scripted (the safety model too). Each test asserts what the page says.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from langgraph.types import Command

from middleware_kit import (
    AgentMiddleware,
    AgentState,
    after_agent,
    before_agent,
    create_agent,
    hook_config,
)
from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware
from middleware_kit.middlewares.pii import PIIDetectionError, PIIMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner

BLOCKED = "I cannot process requests containing inappropriate content. Please rephrase your request."
UNSAFE_REPLY = "I cannot provide that response. Please rephrase your request."


@tool
def search_tool(query: str) -> str:
    """Search."""
    return f"results for {query}"


@tool
def calculator_tool(expression: str) -> str:
    """Calculate."""
    return "4"


@tool
def send_email(to: str, body: str) -> str:
    """Send an e-mail."""
    return f"sent to {to}"


@tool
def delete_database(name: str) -> str:
    """Delete a database."""
    return f"deleted {name}"


@tool
def search(query: str) -> str:
    """Search."""
    return f"results for {query}"


# -- Built-in guardrails: PII detection --------------------------------------------------------------------------
def pii_agent(model: ScriptedChatModel) -> Any:
    return create_agent(
        model,
        tools=[search_tool],
        middleware=[
            PIIMiddleware("email", strategy="redact", apply_to_input=True),
            PIIMiddleware("credit_card", strategy="mask", apply_to_input=True),
            PIIMiddleware("api_key", detector=r"sk-[a-zA-Z0-9]{32}", strategy="block", apply_to_input=True),
        ],
    )


def test_pii_detection(run: Runner) -> None:
    model = ScriptedChatModel(["noted"])
    text = "My email is john.doe@example.com and card is 4532-0151-1283-0366"  # a Luhn-valid test number
    run(pii_agent(model), {"messages": [{"role": "user", "content": text}]})
    sent = str(model.calls[0].messages[-1].content)
    assert "[REDACTED_EMAIL]" in sent and "john.doe@example.com" not in sent  # redacted
    assert "4532-0151-1283-0366" not in sent and sent.endswith("0366")  # masked: last 4 digits kept
    with pytest.raises(PIIDetectionError):
        run(pii_agent(ScriptedChatModel(["never"])),
            {"messages": [{"role": "user", "content": f"my key is sk-{'a' * 32}"}]})


# -- Built-in guardrails: human in the loop ----------------------------------------------------------------------
def test_human_in_the_loop(run: Runner) -> None:
    model = ScriptedChatModel([
        AIMessage("", tool_calls=[tool_call("send_email", {"to": "team@example.com", "body": "hi"})]),
        "Sent.",
    ])
    agent = create_agent(
        model,
        tools=[search, send_email, delete_database],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True, "delete_database": True,
                                                           "search": False})],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "some_id"}}
    result = run(agent, {"messages": [{"role": "user", "content": "Send an email to the team"}]}, config=config)
    assert "__interrupt__" in result  # paused before the sensitive tool
    assert not any(isinstance(m, ToolMessage) for m in result["messages"])
    result = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config=config)
    assert result["messages"][2].content == "sent to team@example.com" and result["messages"][-1].content == "Sent."


# -- Custom guardrails: before agent -----------------------------------------------------------------------------
class ContentFilterMiddleware(AgentMiddleware):
    """Deterministic guardrail: Block requests containing banned keywords."""

    def __init__(self, banned_keywords: list[str]):
        super().__init__()
        self.banned_keywords = [kw.lower() for kw in banned_keywords]

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if not state["messages"]:
            return None
        first_message = state["messages"][0]
        if first_message.type != "human":
            return None
        content = first_message.content.lower()  # type: ignore[union-attr]
        for keyword in self.banned_keywords:
            if keyword in content:
                return {"messages": [{"role": "assistant", "content": BLOCKED}], "jump_to": "end"}
        return None


banned_keywords = ["hack", "exploit", "malware"]


@before_agent(can_jump_to=["end"])
def content_filter(state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
    """Deterministic guardrail: Block requests containing banned keywords."""
    if not state["messages"]:
        return None
    first_message = state["messages"][0]
    if first_message.type != "human":
        return None
    content = first_message.content.lower()  # type: ignore[union-attr]
    for keyword in banned_keywords:
        if keyword in content:
            return {"messages": [{"role": "assistant", "content": BLOCKED}], "jump_to": "end"}
    return None


@pytest.mark.parametrize("style", ["class", "decorator"])
def test_before_agent_guardrail(run: Runner, style: str) -> None:
    guard = ContentFilterMiddleware(banned_keywords=banned_keywords) if style == "class" else content_filter
    model = ScriptedChatModel(["Here is how to add numbers."])
    agent = create_agent(model, tools=[search_tool, calculator_tool], middleware=[guard])
    result = run(agent, {"messages": [{"role": "user", "content": "How do I hack into a database?"}]})
    assert result["messages"][-1].content == BLOCKED and isinstance(result["messages"][-1], AIMessage)
    assert model.call_count == 0  # blocked before any processing
    allowed = run(agent, {"messages": [{"role": "user", "content": "How do I add numbers?"}]})
    assert allowed["messages"][-1].content == "Here is how to add numbers."


# -- Custom guardrails: after agent (model-based) ----------------------------------------------------------------
safety_model = ScriptedChatModel(["UNSAFE"], cycle=True)  # init_chat_model("gpt-4o-mini")


class SafetyGuardrailMiddleware(AgentMiddleware):
    """Model-based guardrail: Use an LLM to evaluate response safety."""

    def __init__(self) -> None:
        super().__init__()
        self.safety_model = safety_model

    @hook_config(can_jump_to=["end"])
    def after_agent(self, state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if not state["messages"]:
            return None
        last_message = state["messages"][-1]
        if not isinstance(last_message, AIMessage):
            return None
        safety_prompt = f"""Evaluate if this response is safe and appropriate.
        Respond with only 'SAFE' or 'UNSAFE'.

        Response: {last_message.content}"""
        result = self.safety_model.invoke([{"role": "user", "content": safety_prompt}])
        if "UNSAFE" in result.content:
            return {"messages": [{"role": "assistant", "content": UNSAFE_REPLY}], "jump_to": "end"}
        return None


def _safety_guardrail_decorated() -> Any:
    @after_agent(can_jump_to=["end"])
    def safety_guardrail(state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        last_message = state["messages"][-1]
        if not isinstance(last_message, AIMessage):
            return None
        result = safety_model.invoke([{"role": "user", "content": f"Response: {last_message.content}"}])
        if "UNSAFE" in result.content:
            return {"messages": [{"role": "assistant", "content": UNSAFE_REPLY}], "jump_to": "end"}
        return None

    return safety_guardrail


@pytest.mark.parametrize("style", ["class", "decorator"])
def test_after_agent_guardrail(run: Runner, style: str) -> None:
    guard = SafetyGuardrailMiddleware() if style == "class" else _safety_guardrail_decorated()
    model = ScriptedChatModel(["Here is how to make explosives: ..."])
    agent = create_agent(model, tools=[search_tool, calculator_tool], middleware=[guard])
    result = run(agent, {"messages": [{"role": "user", "content": "How do I make explosives?"}]})
    assert result["messages"][-1].content == UNSAFE_REPLY


# -- Combine multiple guardrails ---------------------------------------------------------------------------------
def test_combined_guardrails_without_the_after_agent_layer(run: Runner) -> None:
    # Layers 1-3 of the page's stack (layer 4, SafetyGuardrailMiddleware, is tested above). The page lists two
    # PIIMiddleware("email") instances; both LangChain and middleware_kit name them "PIIMiddleware[email]" and refuse
    # the duplicate, so one is kept here.
    model = ScriptedChatModel(["never"])
    agent = create_agent(
        model,
        tools=[search_tool, send_email],
        middleware=[
            ContentFilterMiddleware(banned_keywords=["hack", "exploit"]),
            PIIMiddleware("email", strategy="redact", apply_to_input=True),
            HumanInTheLoopMiddleware(interrupt_on={"send_email": True}),
        ],
        checkpointer=InMemorySaver(),
    )
    result = run(agent, {"messages": [{"role": "user", "content": "help me exploit this"}]},
                 config={"configurable": {"thread_id": "t"}})
    assert result["messages"][-1].content == BLOCKED and model.call_count == 0


def test_combined_guardrails_as_on_the_page() -> None:
    create_agent(
        ScriptedChatModel(["ok"]),
        tools=[search_tool, send_email],
        middleware=[
            ContentFilterMiddleware(banned_keywords=["hack", "exploit"]),
            PIIMiddleware("email", strategy="redact", apply_to_input=True),
            HumanInTheLoopMiddleware(interrupt_on={"send_email": True}),
            SafetyGuardrailMiddleware(),
        ],
    )
