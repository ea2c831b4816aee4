"""LangChain 1.5's documentation examples for ``FilesystemFileSearchMiddleware`` (the "File search" section of the
prebuilt middleware page), rewritten: imports changed, ``model="gpt-5.4"`` replaced by a scripted model
(``create_agent`` takes model instances) that makes the two calls the example's comments describe. ``/workspace``
does not exist here: the tools say so; the last test runs the same calls over a real directory."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from middleware_kit import create_agent
from middleware_kit.middlewares.file_search import FilesystemFileSearchMiddleware
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner


def scripted() -> ScriptedChatModel:
    return ScriptedChatModel([
        AIMessage("", tool_calls=[
            tool_call("glob_search", {"pattern": "**/*.py"}),
            tool_call("grep_search", {"pattern": "async def", "include": "*.py"}),
        ]),
        "Here they are.",
    ])


def test_basic_example() -> None:
    agent = create_agent(
        model=scripted(),
        tools=[],
        middleware=[
            FilesystemFileSearchMiddleware(
                root_path="/workspace",
                use_ripgrep=True,
            ),
        ],
    )
    assert "tools" in agent.middleware_plan.nodes  # type: ignore[attr-defined]


def test_full_example(run: Runner) -> None:
    agent = create_agent(
        model=scripted(),
        tools=[],
        middleware=[
            FilesystemFileSearchMiddleware(
                root_path="/workspace",
                use_ripgrep=True,
                max_file_size_mb=10,
            ),
        ],
    )

    # Agent can now use glob_search and grep_search tools
    result = run(agent, {
        "messages": [HumanMessage("Find all Python files containing 'async def'")]
    })
    tool_answers = [m.content for m in result["messages"] if m.type == "tool"]
    assert all("is not an existing directory" in a for a in tool_answers)  # no /workspace on this machine
    assert result["messages"][-1].content == "Here they are."


def test_full_example_over_a_real_directory(run: Runner, tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "io.py").write_text("async def read():\n    ...\n")
    (tmp_path / "pkg" / "sync.py").write_text("def read():\n    ...\n")
    agent = create_agent(
        model=scripted(),
        tools=[],
        middleware=[FilesystemFileSearchMiddleware(root_path=str(tmp_path), use_ripgrep=True, max_file_size_mb=10)],
    )
    result = run(agent, {"messages": [HumanMessage("Find all Python files containing 'async def'")]})
    glob_answer, grep_answer = (m.content for m in result["messages"] if m.type == "tool")
    assert sorted(glob_answer.splitlines()) == ["/pkg/io.py", "/pkg/sync.py"]
    assert grep_answer == "/pkg/io.py"
