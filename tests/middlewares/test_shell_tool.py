"""ShellToolMiddleware: a persistent shell running real commands. These tests try to break its guarantees: timeouts
kill every process of the group, output stays bounded, redaction holds at the truncation edge, sessions never leak
between runs or threads."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime

from middleware_kit import create_agent
from middleware_kit.errors import MiddlewareConfigError
from middleware_kit.middlewares._frozen import FrozenMiddlewareError
from middleware_kit.middlewares.shell_tool import (
    SESSION_ENV_VAR,
    SHELL_TEMP_PREFIX,
    BaseExecutionPolicy,
    CodexSandboxExecutionPolicy,
    DockerExecutionPolicy,
    HostExecutionPolicy,
    RedactionRule,
    ShellEnvironmentError,
    ShellSession,
    ShellSessionError,
    ShellToolMiddleware,
    UnsupportedPolicyOptionError,
    open_shell_sessions,
)
from middleware_kit.testing import ScriptedChatModel, tool_call
from tests.conftest import Runner


def shell_calls(*commands: str | dict[str, Any]) -> ScriptedChatModel:
    steps: list[Any] = []
    for i, command in enumerate(commands):
        args = command if isinstance(command, dict) else {"command": command}
        steps.append(AIMessage("", tool_calls=[tool_call("shell", args, id=f"c{i}")]))
    return ScriptedChatModel([*steps, "done"])


def outputs(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def run_commands(run: Runner, mw: ShellToolMiddleware, *commands: str | dict[str, Any], **kw: Any) -> list[ToolMessage]:
    agent = create_agent(shell_calls(*commands), middleware=[mw], **kw)
    return outputs(run(agent, {"messages": [HumanMessage("go")]}, **({"config": kw["cfg"]} if "cfg" in kw else {})))


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def wait_until(predicate: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_session_persists_within_a_run_and_closes_after(run: Runner, tmp_path: Path) -> None:
    mw = ShellToolMiddleware(tmp_path / "ws", startup_commands=["export GREETING=hello"])
    answers = run_commands(run, mw, "cd sub 2>/dev/null || mkdir sub && cd sub", "echo $GREETING $(basename $PWD)",
                           "X=42", "echo $X")
    assert [a.content for a in answers] == ["<no output>", "hello sub", "<no output>", "42"]
    assert all(a.status == "success" and a.name == "shell" for a in answers)
    assert open_shell_sessions() == ()
    assert (tmp_path / "ws" / "sub").is_dir()


def test_temporary_workspace_is_removed_with_the_session(run: Runner) -> None:
    answers = run_commands(run, ShellToolMiddleware(), "pwd")
    workspace = Path(answers[0].content)
    assert workspace.name.startswith("mk_shell_")
    assert not workspace.exists()


def test_timeout_kills_the_whole_process_group_including_grandchildren(run: Runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    mw = ShellToolMiddleware(execution_policy=HostExecutionPolicy(command_timeout=1.0))
    answers = run_commands(
        run, mw, "echo $$", f"bash -c 'sleep 1000 & echo $! > {pidfile}; wait'", "echo $$ && echo alive"
    )
    shell_pid = int(answers[0].content)
    grandchild = int(pidfile.read_text())
    assert answers[1].status == "error"
    assert "timed out after 1.0 seconds" in answers[1].content and "killed with all its processes" in answers[1].content
    assert wait_until(lambda: not alive(grandchild)), "the grandchild survived the timeout"
    assert group_members(shell_pid) == [], "a process of the timed-out group survived"
    new_pid, status = answers[2].content.splitlines()
    assert status == "alive" and int(new_pid) != shell_pid  # the session restarted


def test_background_jobs_die_with_the_session(run: Runner) -> None:
    answers = run_commands(run, ShellToolMiddleware(), "sleep 1000 & echo $!")
    background = int(answers[0].content)
    assert wait_until(lambda: not alive(background))


def test_yes_flood_is_bounded(run: Runner) -> None:
    policy = HostExecutionPolicy(command_timeout=1.0, max_output_lines=50)
    answers = run_commands(run, ShellToolMiddleware(execution_policy=policy), "yes")
    content = answers[0].content
    assert content.startswith("y\n" * 49 + "y\n\n... Output truncated at 50 lines (observed ")
    assert len(content) < 1000 and "timed out" in content


def test_one_huge_line_is_bounded_by_bytes(run: Runner) -> None:
    policy = HostExecutionPolicy(max_output_bytes=1000)
    answers = run_commands(run, ShellToolMiddleware(execution_policy=policy),
                           "head -c 20000000 /dev/zero | tr '\\0' a; echo; echo end")
    content = answers[0].content
    assert content.startswith("a" * 1000 + "\n\n... Output truncated")
    assert len(content.encode()) < 1300 and answers[0].status == "success"


def test_exit_codes_exit_and_restart(run: Runner) -> None:
    answers = run_commands(
        run, ShellToolMiddleware(), "X=1; (exit 3)", "exit 7", "echo ${X:-unset}", "Y=2",
        {"command": "echo ${Y:-unset}", "restart": True}, {"restart": True}, "echo ${Y:-unset}", {"command": "  "},
        {},
    )
    assert (answers[0].content, answers[0].status) == ("<no output>\n\nExit code: 3", "error")
    assert answers[0].artifact["exit_code"] == 3 and answers[0].artifact["timed_out"] is False
    assert "session exited" in answers[1].content and "Exit code: 7" in answers[1].content
    assert answers[2].content == "unset"  # a new session
    assert answers[4].status == "error" and "only one of 'command' or 'restart'" in answers[4].content
    assert answers[5].content == "Shell session restarted."
    assert answers[6].content == "unset"  # restart=True wiped Y
    for answer in answers[7:]:
        assert answer.status == "error" and "expects a 'command' string" in answer.content


def test_redaction_strategies(run: Runner) -> None:
    rules = [
        RedactionRule("api_key", detector=r"sk-[a-z0-9]{12}"),
        RedactionRule("email", strategy="mask"),
        RedactionRule("token", strategy="hash", detector=r"tok_[0-9]+"),
    ]
    answers = run_commands(run, ShellToolMiddleware(redaction_rules=rules),
                           "echo key=sk-abcdef123456 mail=ann@example.com t=tok_42")
    content = answers[0].content
    assert content.startswith("key=[REDACTED_API_KEY] mail=") and "sk-abc" not in content
    assert "ann@example.com" not in content and content.endswith(".com t=<token_hash:" + content[-9:])
    blocked = run_commands(run, ShellToolMiddleware(redaction_rules=[RedactionRule("ip", strategy="block")]),
                           "echo 10.1.2.3")
    assert blocked[0].status == "error" and "10.1.2.3" not in blocked[0].content and "ip" in blocked[0].content


def test_redaction_sees_a_secret_cut_by_the_truncation(run: Runner) -> None:
    policy = HostExecutionPolicy(max_output_bytes=20)
    mw = ShellToolMiddleware(execution_policy=policy, redaction_rules=[RedactionRule("key", detector=r"sk-\w{20}")])
    answers = run_commands(run, mw, "echo 0123456789abcde sk-SECRETSECRETSECRET01")
    assert "sk-" not in answers[0].content and "SECRET" not in answers[0].content


def test_explicit_env_keeps_host_secrets_out(run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H4_HOST_SECRET", "do-not-leak")
    inherited = run_commands(run, ShellToolMiddleware(), "echo ${H4_HOST_SECRET:-none}")
    isolated = run_commands(run, ShellToolMiddleware(env={"ONLY": 1}), "echo ${H4_HOST_SECRET:-none} $ONLY")
    assert inherited[0].content == "do-not-leak"
    assert isolated[0].content == "none 1"


def test_cpu_limit_of_the_host_policy(run: Runner) -> None:
    policy = HostExecutionPolicy(cpu_time_seconds=1, command_timeout=20)
    started = time.monotonic()
    answers = run_commands(run, ShellToolMiddleware(execution_policy=policy), "bash -c 'while :; do :; done'")
    assert time.monotonic() - started < 15
    assert answers[0].status == "error" and "timed out" not in answers[0].content


def test_startup_failure_is_a_clear_error(run: Runner) -> None:
    mw = ShellToolMiddleware(startup_commands=["true", "false"])
    with pytest.raises(ShellSessionError) as caught:
        run_commands(run, mw, "echo never")
    assert caught.value.hook == "startup_commands" and "Startup command 'false' failed (exited with 1)" in str(
        caught.value
    )
    assert open_shell_sessions() == ()


def test_shutdown_commands_run_when_the_run_ends(run: Runner, tmp_path: Path) -> None:
    marker = tmp_path / "bye.txt"
    mw = ShellToolMiddleware(shutdown_commands=[f"echo bye > {marker}"])
    run_commands(run, mw, "echo hi")
    assert marker.read_text() == "bye\n"


def test_concurrent_runs_never_share_a_session(tmp_path: Path) -> None:
    mw = ShellToolMiddleware()

    def one(i: int) -> str:
        model = shell_calls(f"export MINE={i}; cd /tmp", "sleep 0.3; echo $MINE")
        saver = InMemorySaver()
        agent = create_agent(model, middleware=[mw], checkpointer=saver)
        config = {"configurable": {"thread_id": f"t{i}"}}
        if i % 2:
            result = asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}, config))
        else:
            result = agent.invoke({"messages": [HumanMessage("go")]}, config)
        return str(outputs(result)[1].content)

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one, range(4))) == ["0", "1", "2", "3"]
    assert open_shell_sessions() == ()


def test_a_crashed_run_leaves_no_session_behind_on_its_thread(run: Runner) -> None:
    mw = ShellToolMiddleware()
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("shell", {"command": "echo 1"})]),
                               RuntimeError("model down"), "recovered"])
    agent = create_agent(model, middleware=[mw], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "crash"}}
    with pytest.raises(RuntimeError):
        run(agent, {"messages": [HumanMessage("go")]}, config=config)
    assert len(open_shell_sessions()) == 1  # the crashed run could not close it ...
    run(agent, {"messages": [HumanMessage("again")]}, config=config)
    assert open_shell_sessions() == ()  # ... the thread's next run did


def test_events_on_the_custom_stream() -> None:
    agent = create_agent(shell_calls("echo hi"), middleware=[ShellToolMiddleware()])
    events = list(agent.stream({"messages": [HumanMessage("go")]}, stream_mode="custom"))
    assert [e["event"] for e in events] == ["shell_command", "shell_session_closed"]
    assert events[0]["exit_code"] == 0 and events[0]["timed_out"] is False and events[0]["truncated"] is False


def test_the_tool_refuses_to_run_outside_an_agent_run() -> None:
    runtime = ToolRuntime(state={"messages": []}, context=None, config={}, stream_writer=lambda _: None,
                          tool_call_id="x", store=None)
    answer = ShellToolMiddleware().run_tool("echo hi", restart=False, runtime=runtime)
    assert answer.status == "error" and "no shell session" in answer.content


def test_docker_command_construction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    policy = DockerExecutionPolicy(image="alpine:3", memory_bytes=1 << 28, cpus="0.5", read_only_rootfs=True,
                                   user="1000:1000", extra_run_args=["--pids-limit", "64"])
    env = {"TOKEN": "s3cret", SESSION_ENV_VAR: "x"}
    argv = policy.command_line(workspace=tmp_path, env=env, command=["/bin/sh"])
    assert argv == [
        "docker", "run", "-i", "--rm", "--name", "mk-shell-x", "--network", "none", "--memory", str(1 << 28),
        "-v", f"{tmp_path}:{tmp_path}", "-w", str(tmp_path), "--read-only", "-e", "TOKEN", "-e", SESSION_ENV_VAR,
        "--cpus", "0.5", "--user", "1000:1000", "--pids-limit", "64", "alpine:3", "/bin/sh",
    ]
    assert "s3cret" not in " ".join(argv)  # values travel in the client's environment, never on its command line
    temporary = tmp_path / f"{SHELL_TEMP_PREFIX}abc"
    loose = DockerExecutionPolicy(network_enabled=True, remove_container_on_exit=False)
    assert loose.command_line(workspace=temporary, env={}, command=["/bin/sh"]) == [
        "docker", "run", "-i", "-w", "/", "python:3.12-alpine3.19", "/bin/sh",
    ]
    assert loose._build_command(temporary, {}, ["/bin/sh"])[0] == "/usr/bin/docker"  # resolved when it starts
    assert ShellToolMiddleware(execution_policy=loose).shell_argv == ("/bin/sh",)
    with pytest.raises(UnsupportedPolicyOptionError, match="cpu_time_seconds is not supported"):
        DockerExecutionPolicy(cpu_time_seconds=5)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(UnsupportedPolicyOptionError, match="not installed or not on PATH"):
        loose._build_command(tmp_path, {}, ["/bin/sh"])


def _docker_daemon() -> str | None:
    if shutil.which("docker") is None:
        return "no docker binary on PATH"
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    return None if probe.returncode == 0 else "the docker binary is present but its daemon is not reachable"


def test_docker_run(run: Runner, tmp_path: Path) -> None:
    reason = _docker_daemon()
    if reason is not None:
        pytest.skip(reason)
    mw = ShellToolMiddleware(tmp_path, execution_policy=DockerExecutionPolicy(image="alpine:3", command_timeout=60))
    answers = run_commands(run, mw, "cat /etc/os-release | head -1", "wget -q -T 2 http://example.com || echo offline")
    assert "Alpine" in answers[0].content and "offline" in answers[1].content


def test_codex_command_construction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/opt/{name}")
    overrides = {"z": 1, "sandbox_permissions": ["disk-read"]}
    policy = CodexSandboxExecutionPolicy(platform="linux", config_overrides=overrides)
    assert policy._build_command(["/bin/bash"]) == [
        "/opt/codex", "sandbox", "linux", "-c", 'sandbox_permissions=["disk-read"]', "-c", "z=1", "--", "/bin/bash",
    ]
    assert CodexSandboxExecutionPolicy()._determine_platform() in ("linux", "macos")


def test_frozen_configuration(run: Runner) -> None:
    commands = ["export A=1"]
    mw = ShellToolMiddleware(startup_commands=commands)
    commands.append("exit 1")  # mutating the caller's list changes nothing
    create_agent(ScriptedChatModel(["ok"]), middleware=[mw])  # adopted: read-only from now on
    with pytest.raises(FrozenMiddlewareError):
        mw.startup_commands = ()  # type: ignore[misc]
    assert mw.startup_commands == ("export A=1",)
    changed = mw.replace(startup_commands=["export A=2"])
    assert run_commands(run, changed, "echo $A")[0].content == "2"
    assert run_commands(run, mw, "echo $A")[0].content == "1"


@pytest.mark.parametrize(
    ("build", "owner", "param"),
    [
        (lambda: ShellToolMiddleware(execution_policy="host"), "ShellToolMiddleware", "execution_policy"),
        (lambda: ShellToolMiddleware(redaction_rules=["sk-"]), "ShellToolMiddleware", "redaction_rules"),
        (lambda: ShellToolMiddleware(redaction_rules=[RedactionRule("api_key")]), "ShellToolMiddleware",
         "redaction_rules"),
        (lambda: ShellToolMiddleware(redaction_rules=[RedactionRule("k", detector="(")]), "ShellToolMiddleware",
         "redaction_rules"),
        (lambda: ShellToolMiddleware(redaction_rules=[RedactionRule("email", strategy="drop")]),  # type: ignore[arg-type]
         "ShellToolMiddleware", "redaction_rules"),
        (lambda: ShellToolMiddleware(startup_commands=[""]), "ShellToolMiddleware", "startup_commands"),
        (lambda: ShellToolMiddleware(tool_name="my shell"), "ShellToolMiddleware", "tool_name"),
        (lambda: ShellToolMiddleware(shell_command=[]), "ShellToolMiddleware", "shell_command"),
        (lambda: HostExecutionPolicy(command_timeout=0), "HostExecutionPolicy", "command_timeout"),
        (lambda: HostExecutionPolicy(max_output_lines=0), "HostExecutionPolicy", "max_output_lines"),
        (lambda: HostExecutionPolicy(memory_bytes=-1), "HostExecutionPolicy", "memory_bytes"),
        (lambda: DockerExecutionPolicy(image=""), "DockerExecutionPolicy", "image"),
        (lambda: CodexSandboxExecutionPolicy(platform="windows"), "CodexSandboxExecutionPolicy", "platform"),  # type: ignore[arg-type]
        # found by the hostile review: these crashed at the first command with ValueError / NotImplementedError
        (lambda: ShellToolMiddleware(env={"A": "x\x00y"}), "ShellToolMiddleware", "env"),
        (lambda: ShellToolMiddleware(env={"A=B": "1"}), "ShellToolMiddleware", "env"),
        (lambda: ShellToolMiddleware("/tmp/a\x00b"), "ShellToolMiddleware", "workspace_root"),
        (lambda: ShellToolMiddleware(shell_command=["/bin/bash\x00"]), "ShellToolMiddleware", "shell_command"),
        (lambda: ShellToolMiddleware(execution_policy=BaseExecutionPolicy()), "ShellToolMiddleware",
         "execution_policy"),
    ],
)
def test_constructor_errors_name_class_and_parameter(build: Any, owner: str, param: str) -> None:
    with pytest.raises(MiddlewareConfigError) as caught:
        build()
    assert (caught.value.middleware, caught.value.hook) == (owner, param)
    assert str(caught.value).startswith(f"{owner}:")


def test_never_on_by_default() -> None:
    agent = create_agent(ScriptedChatModel(["hi"]))
    assert "shell" not in str(agent.get_graph().nodes)
    assert os.environ.get("MIDDLEWARE_KIT_SHELL") is None


@settings(max_examples=25, deadline=None)
@given(prefix=st.integers(0, 80), limit=st.integers(8, 60), secret_body=st.text("0123456789", min_size=24, max_size=24))
def test_no_part_of_a_secret_leaks_whatever_the_truncation_point(prefix: int, limit: int, secret_body: str) -> None:
    secret = f"sk-{secret_body}"
    mw = ShellToolMiddleware(execution_policy=HostExecutionPolicy(max_output_bytes=limit),
                             redaction_rules=[RedactionRule("key", detector=r"sk-[0-9]{24}")])
    agent = create_agent(shell_calls(f"printf '%s%s\\n' '{'x' * prefix}' '{secret}'"), middleware=[mw])
    [answer] = outputs(agent.invoke({"messages": [HumanMessage("go")]}))
    shown = str(answer.content).split("\n\n... Output truncated")[0]
    assert len(shown.encode()) <= limit
    assert "sk-" not in shown
    assert not any(secret_body[i:i + 4] in shown for i in range(0, 21))


def test_the_session_survives_human_approval_interrupts(run: Runner) -> None:
    from langgraph.types import Command

    from middleware_kit.middlewares.human_in_the_loop import HumanInTheLoopMiddleware

    agent = create_agent(shell_calls("export X=7; echo $$", "echo $X $$"),
                         middleware=[HumanInTheLoopMiddleware({"shell": True}), ShellToolMiddleware()],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "hitl"}}
    run(agent, {"messages": [HumanMessage("go")]}, config=config)
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    run(agent, approve, config=config)
    assert len(open_shell_sessions()) == 1  # paused again, before the second command: the session is kept
    result = run(agent, approve, config=config)
    first, second = (str(m.content) for m in outputs(result))
    assert second == f"7 {first}"  # same shell process, same variables
    assert open_shell_sessions() == ()


def test_startup_commands_run_again_after_a_timeout(run: Runner) -> None:
    mw = ShellToolMiddleware(startup_commands=["export READY=yes"],
                             execution_policy=HostExecutionPolicy(command_timeout=0.5))
    answers = run_commands(run, mw, "unset READY; echo ${READY:-no}", "sleep 5", "echo ${READY:-no}")
    assert answers[0].content == "no"
    assert "timed out" in answers[1].content
    assert answers[2].content == "yes"



def test_a_huge_command_cannot_deadlock_against_its_own_output(run: Runner) -> None:
    # The first line floods stdout while the rest of the command (300 kB) is still being sent to the shell.
    payload = "x" * 300_000
    policy = HostExecutionPolicy(command_timeout=10, max_output_bytes=100)
    started = time.monotonic()
    answers = run_commands(run, ShellToolMiddleware(execution_policy=policy),
                           f"head -c 200000 /dev/zero | tr '\\0' y; echo\nprintf '%s' '{payload}' | wc -c")
    assert time.monotonic() - started < 8
    content = answers[0].content
    assert content.startswith("y" * 100 + "\n\n... Output truncated") and answers[0].status == "success"
    assert "timed out" not in content


# -- hostile review (H10) ------------------------------------------------------------------------------------------
def test_cancelling_ainvoke_mid_command_kills_everything_and_closes_the_session(tmp_path: Path) -> None:
    """Before the async tool, a cancelled ainvoke left the command (and its shell) running until command_timeout
    and the session open for good: the worker thread could not be interrupted and after_agent never ran."""
    mw = ShellToolMiddleware(execution_policy=HostExecutionPolicy(command_timeout=120))
    agent = create_agent(
        shell_calls(f"sleep 120 & echo $! > {tmp_path}/job; echo $$ > {tmp_path}/shell; wait"), middleware=[mw]
    )

    async def main() -> None:
        task = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("go")]}))
        started = await asyncio.to_thread(
            wait_until, lambda: (tmp_path / "job").exists() and (tmp_path / "shell").exists(), 10
        )
        assert started
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    pids = [int((tmp_path / name).read_text()) for name in ("job", "shell")]
    assert wait_until(lambda: not any(alive(pid) for pid in pids), 5), "the command outlived the cancelled run"
    assert wait_until(lambda: open_shell_sessions() == (), 5)


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs the setsid utility")
@pytest.mark.parametrize("how", ["setsid -f", "nohup setsid -f"])
def test_children_that_leave_the_process_group_die_with_the_session(run: Runner, tmp_path: Path, how: str) -> None:
    """`setsid` puts a child in a new session and process group, out of reach of killpg; the session id in its
    environment finds it. (A child that also clears its environment, `env -i setsid ...`, is not found: use
    DockerExecutionPolicy to contain everything; documented.)"""
    pidfile = tmp_path / "escaped"
    mw = ShellToolMiddleware()
    run_commands(run, mw, f"{how} sh -c 'echo $$ > {pidfile}; exec sleep 120' >/dev/null 2>&1; sleep 0.3")
    assert wait_until(pidfile.exists, 5)
    pid = int(pidfile.read_text())
    assert wait_until(lambda: not alive(pid), 5), "a setsid child outlived the session"


def test_setsid_children_die_on_timeout_too(run: Runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "escaped"
    mw = ShellToolMiddleware(execution_policy=HostExecutionPolicy(command_timeout=1))
    answers = run_commands(run, mw, f"setsid -f sh -c 'echo $$ > {pidfile}; exec sleep 120'; sleep 30")
    assert "timed out" in answers[0].content
    assert wait_until(pidfile.exists, 5)
    assert wait_until(lambda: not alive(int(pidfile.read_text())), 5)


def test_stderr_floods_are_bounded_too(run: Runner) -> None:
    mw = ShellToolMiddleware(execution_policy=HostExecutionPolicy(max_output_lines=5, command_timeout=3))
    answer = run_commands(run, mw, "timeout 1 yes err >&2; echo tail >&2")[0]
    text = str(answer.content)
    assert text.startswith("[stderr] err\n" * 4 + "[stderr] err\n\n... Output truncated at 5 lines")
    assert len(text) < 1000


def test_nul_bytes_in_output_never_reach_messages(run: Runner) -> None:
    answer = run_commands(run, ShellToolMiddleware(), r"printf 'a\0b\n'; head -c 64 /dev/zero")[0]
    assert "\x00" not in answer.content and answer.content.startswith("a\ufffdb")


def test_the_host_environment_is_never_copied_onto_the_middleware(run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MK_TEST_LATE_VAR", "set-after-construction")
    inherit = ShellToolMiddleware()
    assert inherit.shell_env is None  # inherited when a session starts, as LangChain documents
    assert "set-after-construction" in run_commands(run, inherit, "echo $MK_TEST_LATE_VAR")[0].content
    given = {"FOO": "1"}
    explicit = ShellToolMiddleware(env=given)
    given["FOO"] = "2"
    with pytest.raises(TypeError):
        explicit.shell_env["FOO"] = "3"  # type: ignore[index]
    assert run_commands(run, explicit, "echo $FOO $MK_TEST_LATE_VAR")[0].content == "1"


def test_concurrent_asyncio_runs_on_one_instance_never_share_a_session() -> None:
    mw = ShellToolMiddleware()

    async def one(i: int) -> str:
        agent = create_agent(shell_calls(f"export MINE={i}; cd /", "sleep 0.2; echo $MINE $PWD"), middleware=[mw])
        return str(outputs(await agent.ainvoke({"messages": [HumanMessage("go")]}))[1].content)

    async def main() -> list[str]:
        return list(await asyncio.gather(*(one(i) for i in range(6))))

    assert asyncio.run(main()) == [f"{i} /" for i in range(6)]
    assert open_shell_sessions() == ()


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("if", "syntax error"),
        ("echo '", "unexpected EOF"),
        ("echo a; }; echo b; {", "syntax error"),
        ("cat <<EOF\nabc", "abc"),
        ("echo hi \\", "hi"),
    ],
)
def test_a_malformed_command_fails_alone_fast_and_keeps_the_session(command: str, shown: str) -> None:
    """Before commands ran through eval, these hung until command_timeout (the shell kept reading the marker line as
    part of the command) or killed the session, losing its variables and working directory."""
    mw = ShellToolMiddleware(execution_policy=HostExecutionPolicy(command_timeout=20))
    agent = create_agent(shell_calls("export KEPT=yes", command, "echo KEPT=$KEPT"), middleware=[mw])
    started = time.monotonic()
    answers = outputs(agent.invoke({"messages": [HumanMessage("go")]}))
    assert time.monotonic() - started < 10
    assert shown in answers[1].content and "timed out" not in answers[1].content
    assert answers[2].content == "KEPT=yes"


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_broken_redaction_detector_is_a_middleware_error_naming_the_rule(mode: str) -> None:
    from middleware_kit.errors import MiddlewareError

    rule = RedactionRule("token", detector=lambda text: [{"begin": 0}])
    agent = create_agent(shell_calls("echo hi"), middleware=[ShellToolMiddleware(redaction_rules=[rule])])
    with pytest.raises(MiddlewareError) as caught:
        if mode == "invoke":
            agent.invoke({"messages": [HumanMessage("go")]})
        else:
            asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}))
    assert caught.value.middleware == "ShellToolMiddleware" and caught.value.hook == "redaction_rules"
    assert "RedactionRule('token')" in str(caught.value) and "'start' and 'end'" in str(caught.value)
    assert wait_until(lambda: open_shell_sessions() == (), 5)


def test_a_command_still_queued_when_its_run_is_cancelled_never_runs(tmp_path: Path) -> None:
    """The async tool runs the command in a worker thread; if every worker is busy, the call waits in the queue.
    Cancelled there, it must never start later in a new session that nobody would close (asyncio cancels the
    queued job; this pins it)."""
    import threading
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    mw = ShellToolMiddleware()
    runtime = ToolRuntime(state={"messages": [], "shell_session_id": uuid.uuid4().hex}, context=None, config={},
                          stream_writer=lambda _: None, tool_call_id="queued", store=None)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1))
        gate = threading.Event()
        busy = loop.run_in_executor(None, gate.wait)  # the only worker is taken
        task = asyncio.create_task(mw.arun_tool(f"touch {tmp_path}/ran", restart=False, runtime=runtime))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.set()
        await busy
        await asyncio.sleep(0.5)  # the queued job has had its turn

    asyncio.run(main())
    assert not (tmp_path / "ran").exists()
    assert open_shell_sessions() == ()


# -- LangChain 1.5 surface -----------------------------------------------------------------------------------------
def test_stderr_is_kept_with_a_label_and_the_artifact_has_the_numbers(run: Runner) -> None:
    policy = HostExecutionPolicy(max_output_lines=3)
    answers = run_commands(run, ShellToolMiddleware(execution_policy=policy),
                           "echo out; echo oops >&2; exit_status=4; (exit $exit_status)", "seq 1 10")
    assert answers[0].content == "out\n[stderr] oops\n\nExit code: 4" and answers[0].status == "error"
    assert answers[1].content == "1\n2\n3\n\n... Output truncated at 3 lines (observed 10)."
    assert answers[1].artifact == {
        "timed_out": False, "exit_code": 0, "truncated_by_lines": True, "truncated_by_bytes": False,
        "total_lines": 10, "total_bytes": 21, "redaction_matches": {},
    }


def test_a_shell_session_can_be_driven_directly(tmp_path: Path) -> None:
    session = ShellSession(tmp_path, HostExecutionPolicy(max_output_bytes=8), ("/bin/bash",), {"A": "1"})
    session.start()
    try:
        result = session.execute("echo $A; echo 0123456789", timeout=5)
        assert (result.output, result.exit_code, result.timed_out) == ("1\n012345", 0, False)
        assert result.truncated_by_bytes and result.total_bytes == 13
        slow = session.execute("sleep 5", timeout=0.3)
        assert slow.timed_out and not session.running  # killed with its group; start() again to continue
        with pytest.raises(RuntimeError, match="not running"):
            session.execute("true", timeout=1)
    finally:
        session.stop(1)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hooks_called_directly_start_and_close_the_session(tmp_path: Path, mode: str) -> None:
    from langgraph.runtime import Runtime

    mw = ShellToolMiddleware(tmp_path, startup_commands=["touch started"], shutdown_commands=["touch stopped"])
    state: dict[str, Any] = {"messages": []}
    already = set(open_shell_sessions())
    before = mw.before_agent if mode == "sync" else lambda s, r: asyncio.run(mw.abefore_agent(s, r))
    update = before(state, Runtime())  # type: ignore[arg-type]
    assert update is not None and set(open_shell_sessions()) - already == {update["shell_session_id"]}
    assert (tmp_path / "started").exists()  # the session starts with the run, as in LangChain
    state.update(update)
    if mode == "sync":
        assert mw.after_agent(state, Runtime()) == {"shell_session_id": None}  # type: ignore[arg-type]
    else:
        assert asyncio.run(mw.aafter_agent(state, Runtime())) == {"shell_session_id": None}  # type: ignore[arg-type]
    assert (tmp_path / "stopped").exists() and set(open_shell_sessions()) <= already


def test_langchain_constructor_errors_keep_their_exception_types() -> None:
    with pytest.raises(ShellEnvironmentError, match="must be strings") as caught:
        ShellToolMiddleware(env={1: "x"})  # type: ignore[dict-item]
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, MiddlewareConfigError)
    with pytest.raises(MiddlewareConfigError, match="at least one argument"):
        ShellToolMiddleware(shell_command=())
    for build, message in [
        (lambda: HostExecutionPolicy(cpu_time_seconds=0), "cpu_time_seconds must be positive if provided"),
        (lambda: DockerExecutionPolicy(cpus=" "), "cpus must be a non-empty string when provided"),
        (lambda: DockerExecutionPolicy(user=""), "user must be a non-empty string when provided"),
    ]:
        with pytest.raises(ValueError, match=message):
            build()
