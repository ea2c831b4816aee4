"""LangChain 1.5's documentation examples for ``ShellToolMiddleware`` (the "Shell tool" section of the prebuilt
middleware page), rewritten for middleware_kit: imports changed, ``model="gpt-5.4"`` replaced by a scripted model
(``create_agent`` takes model instances), the example's undefined ``search_tool`` defined. The examples only build
agents (nothing runs); the last test runs the redaction example with a temporary workspace instead of
``/workspace``."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from middleware_kit import create_agent
from middleware_kit.middlewares.shell_tool import (
    DockerExecutionPolicy,
    HostExecutionPolicy,
    RedactionRule,
    ShellToolMiddleware,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner


def gpt() -> ScriptedChatModel:
    """Stands in for ``"gpt-5.4"``."""
    return ScriptedChatModel(["ok"], model_name="gpt-5.4")


@tool
def search_tool(query: str) -> str:
    """Search."""
    return query


def test_basic_example() -> None:
    agent = create_agent(
        model=gpt(),
        tools=[search_tool],
        middleware=[
            ShellToolMiddleware(
                workspace_root="/workspace",
                execution_policy=HostExecutionPolicy(),
            ),
        ],
    )
    assert "tools" in agent.middleware_plan.nodes  # type: ignore[attr-defined]


def test_full_example() -> None:
    # Basic shell tool with host execution
    agent = create_agent(
        model=gpt(),
        tools=[search_tool],
        middleware=[
            ShellToolMiddleware(
                workspace_root="/workspace",
                execution_policy=HostExecutionPolicy(),
            ),
        ],
    )

    # Docker isolation with startup commands
    agent_docker = create_agent(
        model=gpt(),
        tools=[],
        middleware=[
            ShellToolMiddleware(
                workspace_root="/workspace",
                startup_commands=["pip install requests", "export PYTHONPATH=/workspace"],
                execution_policy=DockerExecutionPolicy(
                    image="python:3.11-slim",
                    command_timeout=60.0,
                ),
            ),
        ],
    )

    # With output redaction (applied post execution)
    agent_redacted = create_agent(
        model=gpt(),
        tools=[],
        middleware=[
            ShellToolMiddleware(
                workspace_root="/workspace",
                redaction_rules=[
                    RedactionRule(pii_type="api_key", detector=r"sk-[a-zA-Z0-9]{32}"),
                ],
            ),
        ],
    )
    assert agent is not None and agent_docker is not None and agent_redacted is not None


def test_the_redaction_example_runs(run: Runner, tmp_path: Path) -> None:
    secret = "sk-" + "a1" * 16
    scripted = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("shell", {"command": f"echo {secret}"})]),
                                  "done"])
    agent = create_agent(
        model=scripted,
        tools=[],
        middleware=[
            ShellToolMiddleware(
                workspace_root=tmp_path,
                redaction_rules=[RedactionRule(pii_type="api_key", detector=r"sk-[a-zA-Z0-9]{32}")],
            ),
        ],
    )
    result = run(agent, {"messages": [HumanMessage("show the key")]})
    assert result["messages"][2].content == "[REDACTED_API_KEY]"
