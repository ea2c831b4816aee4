"""A shell for the agent that cannot run away: timeouts kill the whole process tree, output is bounded, secrets are
redacted, and the session is gone when the run ends.

What it shows
    ``ShellToolMiddleware`` with a ``HostExecutionPolicy`` (2 s per command, 20 lines of output), a private
    workspace, an explicit ``env`` (the host's secrets stay out), a startup command and a redaction rule. The scripted
    model runs four commands: one that keeps state (``cd``), one that prints a secret, one that floods the output,
    and one that starts a grandchild process sleeping forever. The recipe checks every answer, that no process of
    the runaway tree survives, and that no session is left open.

When to use it
    Coding and ops agents -- inside a container or VM (the commands are real). Swap in
    ``DockerExecutionPolicy(image=...)`` where Docker is available for a container per run.

Run it: ``python recipes/shell_tool.py``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from middleware_kit import create_agent
from middleware_kit.middlewares.shell_tool import (
    HostExecutionPolicy,
    RedactionRule,
    ShellToolMiddleware,
    open_shell_sessions,
)
from middleware_kit.testing import ScriptedChatModel, tool_call


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def main() -> None:
    workspace = Path(tempfile.mkdtemp(prefix="recipe_shell_"))
    pidfile = workspace / "sleeper.pid"
    shell = ShellToolMiddleware(
        workspace_root=workspace,
        startup_commands=["mkdir -p build"],
        execution_policy=HostExecutionPolicy(command_timeout=2, max_output_lines=20),
        redaction_rules=[RedactionRule("api_key", detector=r"sk-[A-Za-z0-9]{20}")],
        env={"HOME": str(workspace), "API_TOKEN": "sk-AAAAAAAAAAAAAAAAAAAA"},
    )
    commands = [
        "cd build && touch out.o && ls",
        "echo token is $API_TOKEN",
        "yes building",
        f"bash -c 'sleep 100000 & echo $! > {pidfile}; wait'",
        "pwd",
    ]
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("shell", {"command": c}, id=f"c{i}")]) for i, c in enumerate(commands)]
        + ["All done."]
    )
    agent = create_agent(model, middleware=[shell])
    result = agent.invoke({"messages": [HumanMessage("Build the project.")]})
    answers = [m for m in result["messages"] if m.type == "tool"]
    for command, answer in zip(commands, answers, strict=True):
        first_line = str(answer.content).splitlines()[0] if answer.content else ""
        print(f"$ {command}\n  -> [{answer.status}] {first_line[:70]}")

    assert answers[0].content == "out.o"
    assert answers[1].content == "token is [REDACTED_API_KEY]"
    assert answers[2].status == "error" and "Output truncated at 20 lines" in answers[2].content
    assert len(answers[2].content) < 2000
    assert answers[3].status == "error" and "timed out after 2.0 seconds" in answers[3].content
    assert answers[4].content == str(workspace)  # a fresh session after the timeout: back in the workspace
    sleeper = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while running(sleeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(sleeper), "the runaway grandchild survived"
    assert open_shell_sessions() == ()
    print("OK: state kept, secret redacted, flood bounded, runaway tree killed, no session left")


if __name__ == "__main__":
    main()
