"""A dynamic system prompt built from the run's context: one agent, one prompt per tenant.

What it shows
    ``@dynamic_prompt`` turns ``fn(request) -> str`` into a middleware that sets the system prompt of every model
    call. The function reads ``request.runtime.context``, an instance of the agent's ``context_schema`` (a frozen
    dataclass here) given per run with ``invoke(..., context=...)``. Two tenants calling the same agent get two
    different system prompts; ``model.calls`` (the scripted model's record) shows exactly what each call received.
    A plain dict given as context is coerced to the schema, and the dynamic prompt replaces
    ``create_agent(system_prompt=...)``.

When to use it
    Per-user or per-tenant instructions (persona, language, policy, units) that must not live in the conversation
    state: context is immutable during a run and never checkpointed, so it is also the place for secrets and
    policy flags. Build the agent once, and pass the context on every call.

Run it: ``python recipes/dynamic_prompt_from_context.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from middleware_kit import ModelRequest, create_agent, dynamic_prompt
from middleware_kit.testing import ScriptedChatModel


@dataclass(frozen=True)
class TenantContext:
    """Who is calling. Given per run: ``agent.invoke(..., context=TenantContext(...))``."""

    tenant: str
    language: str = "English"
    tone: str = "friendly"


@dynamic_prompt
def tenant_prompt(request: ModelRequest[TenantContext]) -> str:
    """The system prompt for this call, from the run's context."""
    assert request.runtime is not None, "inside an agent the request always carries the runtime"
    ctx = request.runtime.context
    return f"You are the support assistant of {ctx.tenant}. Answer in {ctx.language}, in a {ctx.tone} tone."


def system_prompt_of(call: Any) -> str:
    """The system prompt one recorded model call received (it is sent first)."""
    first = call.messages[0]
    if not isinstance(first, SystemMessage):
        raise SystemExit(f"the model call has no system message: {call.messages!r}")
    return first.text


def main() -> None:
    model = ScriptedChatModel(["Hello from the assistant."], cycle=True)
    agent = create_agent(
        model,
        middleware=[tenant_prompt],
        context_schema=TenantContext,
        system_prompt="Generic prompt, replaced by the dynamic one.",
    )
    question = {"messages": [HumanMessage("Where is my parcel?")]}

    results = [
        agent.invoke(question, context=TenantContext("Acme Corp", language="French", tone="formal")),
        agent.invoke(question, context=TenantContext("Globex")),
        agent.invoke(question, context={"tenant": "Initech", "language": "German"}),  # a dict is coerced
    ]

    prompts = [system_prompt_of(call) for call in model.calls]
    for prompt in prompts:
        print(f"  system prompt: {prompt}")

    expected = [
        "You are the support assistant of Acme Corp. Answer in French, in a formal tone.",
        "You are the support assistant of Globex. Answer in English, in a friendly tone.",
        "You are the support assistant of Initech. Answer in German, in a friendly tone.",
    ]
    if prompts != expected:
        raise SystemExit(f"unexpected system prompts:\n{prompts}\n!=\n{expected}")
    if any(len(call.messages) != 2 for call in model.calls):
        raise SystemExit("each call should receive exactly one system message and the question")
    if any("Generic prompt" in p for p in prompts):
        raise SystemExit("the dynamic prompt should replace create_agent(system_prompt=...)")
    if any(isinstance(m, SystemMessage) for result in results for m in result["messages"]):
        raise SystemExit("the system prompt is sent to the model, never stored in state")
    print(f"\nOK: {len(set(prompts))} tenants, {len(set(prompts))} different system prompts from one agent.")


if __name__ == "__main__":
    main()
