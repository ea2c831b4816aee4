"""The middleware examples of LangChain 1.5's "Context engineering" page (docs.langchain.com/oss/python/langchain/
context-engineering): the system prompt, messages, tools and model of each call, read from state, store or runtime
context. Rewritten for middleware_kit: imports changed, models scripted (``init_chat_model(...)`` is
``middleware_kit.models.resolve_model(...)`` over fake provider packages). Each test asserts what the page says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NotRequired

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.store.memory import InMemoryStore

from middleware_kit import AgentState, ModelRequest, ModelResponse, create_agent, dynamic_prompt, wrap_model_call
from middleware_kit.models import resolve_model
from middleware_kit.testing import ScriptedChatModel
from tests.conftest import Runner

Handler = Callable[[ModelRequest], ModelResponse]
HI = {"messages": [HumanMessage("hi")]}


def system_text(model: ScriptedChatModel, call: int = 0) -> str:
    return str(model.calls[call].messages[0].content)


# -- System prompt -----------------------------------------------------------------------------------------------
@dynamic_prompt
def state_aware_prompt(request: ModelRequest) -> str:
    message_count = len(request.messages)
    base = "You are a helpful assistant."
    if message_count > 10:
        base += "\nThis is a long conversation - be extra concise."
    return base


@dataclass
class UserContext:
    user_id: str


@dynamic_prompt
def store_aware_prompt(request: ModelRequest) -> str:
    user_id = request.runtime.context.user_id  # type: ignore[attr-defined]
    store = request.runtime.store
    user_prefs = store.get(("preferences",), user_id)  # type: ignore[union-attr]
    base = "You are a helpful assistant."
    if user_prefs:
        style = user_prefs.value.get("communication_style", "balanced")
        base += f"\nUser prefers {style} responses."
    return base


@dataclass
class RoleContext:
    user_role: str
    deployment_env: str


@dynamic_prompt
def context_aware_prompt(request: ModelRequest) -> str:
    user_role = request.runtime.context.user_role  # type: ignore[attr-defined]
    env = request.runtime.context.deployment_env  # type: ignore[attr-defined]
    base = "You are a helpful assistant."
    if user_role == "admin":
        base += "\nYou have admin access. You can perform all operations."
    elif user_role == "viewer":
        base += "\nYou have read-only access. Guide users to read operations only."
    if env == "production":
        base += "\nBe extra careful with any data modifications."
    return base


def test_system_prompt_from_state_store_and_context(run: Runner) -> None:
    model = ScriptedChatModel(["ok"], cycle=True)
    run(create_agent(model, tools=[], middleware=[state_aware_prompt]),
        {"messages": [HumanMessage(f"m{i}") for i in range(11)]})
    assert system_text(model, 0).endswith("This is a long conversation - be extra concise.")

    store = InMemoryStore()
    store.put(("preferences",), "u1", {"communication_style": "terse"})
    run(create_agent(model, tools=[], middleware=[store_aware_prompt], context_schema=UserContext, store=store),
        HI, context=UserContext(user_id="u1"))
    assert system_text(model, 1) == "You are a helpful assistant.\nUser prefers terse responses."

    run(create_agent(model, tools=[], middleware=[context_aware_prompt], context_schema=RoleContext),
        HI, context=RoleContext(user_role="viewer", deployment_env="production"))
    assert system_text(model, 2) == (
        "You are a helpful assistant.\nYou have read-only access. Guide users to read operations only."
        "\nBe extra careful with any data modifications."
    )


# -- Messages (transient) ----------------------------------------------------------------------------------------
class FilesState(AgentState):
    uploaded_files: NotRequired[list[dict[str, str]]]


@wrap_model_call
def inject_file_context(request: ModelRequest, handler: Handler) -> ModelResponse:
    """Inject context about files user has uploaded this session."""
    uploaded_files = request.state.get("uploaded_files", [])
    if uploaded_files:
        file_descriptions = [f"- {file['name']} ({file['type']}): {file['summary']}" for file in uploaded_files]
        file_context = f"""Files you have access to in this conversation:
{chr(10).join(file_descriptions)}

Reference these files when answering questions."""
        messages = [*request.messages, {"role": "user", "content": file_context}]
        request = request.override(messages=messages)  # type: ignore[arg-type]
    return handler(request)


@dataclass
class ComplianceContext:
    user_jurisdiction: str
    industry: str
    compliance_frameworks: list[str]


@wrap_model_call
def inject_compliance_rules(request: ModelRequest, handler: Handler) -> ModelResponse:
    """Inject compliance constraints from Runtime Context."""
    context: Any = request.runtime.context
    rules = []
    if "GDPR" in context.compliance_frameworks:
        rules.append("- Must obtain explicit consent before processing personal data")
        rules.append("- Users have right to data deletion")
    if context.industry == "finance":
        rules.append("- Cannot provide financial advice without proper disclaimers")
    if rules:
        compliance_context = f"Compliance requirements for {context.user_jurisdiction}:\n{chr(10).join(rules)}"
        request = request.override(messages=[*request.messages, {"role": "user", "content": compliance_context}])  # type: ignore[list-item]
    return handler(request)


def test_messages_injected_for_the_call_only(run: Runner) -> None:
    model = ScriptedChatModel(["ok"], cycle=True)
    files = [{"name": "q3.pdf", "type": "pdf", "summary": "Q3 report"}]
    result = run(create_agent(model, tools=[], middleware=[inject_file_context], state_schema=FilesState),
                 {"messages": [HumanMessage("summarize my file")], "uploaded_files": files})
    sent: Any = model.calls[0].messages
    assert sent[-1].content.startswith("Files you have access to in this conversation:\n- q3.pdf (pdf): Q3 report")
    assert [m.content for m in result["messages"]] == ["summarize my file", "ok"]  # transient: not in state

    run(create_agent(model, tools=[], middleware=[inject_compliance_rules], context_schema=ComplianceContext),
        HI, context=ComplianceContext("EU", "finance", ["GDPR"]))
    assert model.calls[1].messages[-1].content == (
        "Compliance requirements for EU:\n- Must obtain explicit consent before processing personal data\n"
        "- Users have right to data deletion\n- Cannot provide financial advice without proper disclaimers"
    )


# -- Tools -------------------------------------------------------------------------------------------------------
@tool
def public_search(query: str) -> str:
    """Public search."""
    return "public"


@tool
def private_search(query: str) -> str:
    """Private search."""
    return "private"


@tool
def advanced_search(query: str) -> str:
    """Advanced search."""
    return "advanced"


class AuthState(AgentState):
    authenticated: NotRequired[bool]


@wrap_model_call
def state_based_tools(request: ModelRequest, handler: Handler) -> ModelResponse:
    """Filter tools based on conversation State."""
    state: Any = request.state
    is_authenticated = state.get("authenticated", False)
    message_count = len(state["messages"])
    if not is_authenticated:
        request = request.override(tools=[t for t in request.tools if t.name.startswith("public_")])  # type: ignore[union-attr]
    elif message_count < 5:
        request = request.override(tools=[t for t in request.tools if t.name != "advanced_search"])  # type: ignore[union-attr]
    return handler(request)


@dataclass
class Role:
    user_role: str


@tool
def read_data(table: str) -> str:
    """Read."""
    return "rows"


@tool
def write_data(table: str) -> str:
    """Write."""
    return "written"


@tool
def delete_data(table: str) -> str:
    """Delete."""
    return "deleted"


@wrap_model_call
def context_based_tools(request: ModelRequest, handler: Handler) -> ModelResponse:
    """Filter tools based on Runtime Context permissions."""
    user_role = request.runtime.context.user_role  # type: ignore[attr-defined]
    if user_role == "editor":
        request = request.override(tools=[t for t in request.tools if t.name != "delete_data"])  # type: ignore[union-attr]
    elif user_role != "admin":
        request = request.override(tools=[t for t in request.tools if t.name.startswith("read_")])  # type: ignore[union-attr]
    return handler(request)


def test_selecting_tools(run: Runner) -> None:
    model = ScriptedChatModel(["ok"], cycle=True)
    agent = create_agent(model, tools=[public_search, private_search, advanced_search],
                         middleware=[state_based_tools], state_schema=AuthState)
    run(agent, HI)
    run(agent, {"messages": [HumanMessage("hi")], "authenticated": True})
    assert model.calls[0].tools == ("public_search",)
    assert model.calls[1].tools == ("public_search", "private_search")

    agent = create_agent(model, tools=[read_data, write_data, delete_data], middleware=[context_based_tools],
                         context_schema=Role)
    for role in ("admin", "editor", "viewer"):
        run(agent, HI, context=Role(role))
    assert [c.tools for c in model.calls[2:]] == [
        ("read_data", "write_data", "delete_data"), ("read_data", "write_data"), ("read_data",)]


# -- Model -------------------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("fake_providers")
def test_selecting_the_model(run: Runner) -> None:
    large_model = resolve_model("claude-sonnet-4-5-20250929")  # init_chat_model(...)
    standard_model = resolve_model("gpt-4o")
    efficient_model = resolve_model("gpt-4o-mini")

    @wrap_model_call
    def state_based_model(request: ModelRequest, handler: Handler) -> ModelResponse:
        """Select model based on State conversation length."""
        message_count = len(request.messages)
        if message_count > 20:
            model = large_model
        elif message_count > 10:
            model = standard_model
        else:
            model = efficient_model
        return handler(request.override(model=model))

    agent = create_agent(ScriptedChatModel(["default"]), tools=[], middleware=[state_based_model])
    assert run(agent, HI)["messages"][-1].content == "scripted gpt-4o-mini"
    medium = run(agent, {"messages": [HumanMessage(f"m{i}") for i in range(11)]})
    assert medium["messages"][-1].content == "scripted gpt-4o"
    long = run(agent, {"messages": [HumanMessage(f"m{i}") for i in range(21)]})
    assert long["messages"][-1].content == "scripted claude-sonnet-4-5-20250929"
