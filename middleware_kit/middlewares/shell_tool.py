"""``ShellToolMiddleware``: a persistent shell the model can run **real commands** in.

Nothing here is on by default: a shell exists only in agents built with this middleware, and every command the model
sends runs for real, with the rights of the process (or container) the execution policy starts. Choose the policy for
your threat model: :class:`HostExecutionPolicy` (the host, with resource limits) only where the agent already runs in
a sandbox (container, VM); :class:`DockerExecutionPolicy` for a container per run; :class:`CodexSandboxExecutionPolicy`
for the Codex CLI sandbox.

Guarantees (each has a test that tries to break it):

- **Timeouts kill everything.** The shell leads its own process group; a command that outlives ``command_timeout``
  is killed together with every process of the group (children, grandchildren, background jobs), and the session
  restarts for the next command. Closing a session kills the group too, so background jobs never outlive the run.
  Processes that left the group (``setsid``, ``nohup``) are found by the ``MK_SHELL_SESSION`` variable they inherit
  and killed as well (Linux); one that also clears its environment escapes: only a container contains everything.
- **Cancellation stops the command.** Cancelling ``ainvoke`` mid-command kills the session's processes at once and
  closes the session (the worker thread running the command cannot be interrupted otherwise).
- **Output is bounded.** At most ``max_output_lines`` lines and ``max_output_bytes`` bytes are kept (a hard ceiling of
  1 MiB applies when ``max_output_bytes`` is None); the rest is drained and counted, never stored, so ``yes`` cannot
  exhaust memory.
- **Redaction** (:class:`RedactionRule`) runs on the output before the model sees it (with a margin past the
  truncation point, so a secret cut in half at the limit is still found).
- **Sessions belong to a run.** A session is created lazily at the first command of a run, found through a private
  state key holding its id, and closed (shutdown commands, then the process group is killed, then a temporary
  workspace is removed) when the run ends. The middleware instance holds configuration only; concurrent runs and
  threads never share a shell.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import json
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._pii_detectors import BUILTIN_DETECTORS
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import AgentState, PrivateStateAttr

__all__ = [
    "DEFAULT_TOOL_DESCRIPTION",
    "SESSION_ENV_VAR",
    "SHELL_TOOL_NAME",
    "BaseExecutionPolicy",
    "CodexSandboxExecutionPolicy",
    "DockerExecutionPolicy",
    "HostExecutionPolicy",
    "RedactionRule",
    "ShellSessionError",
    "ShellToolMiddleware",
    "ShellToolState",
    "open_shell_sessions",
]

SHELL_TOOL_NAME = "shell"
DEFAULT_TOOL_DESCRIPTION = (
    "Run a command in a persistent shell session (a real shell: commands have real effects). The working directory, "
    "variables and functions persist between calls. Chain steps with '&&' or ';'. Output is truncated when large, "
    "and a command that runs past the time limit is killed (the session then restarts). Pass restart=true to start "
    "a fresh session."
)
_HARD_OUTPUT_CAP = 1024 * 1024
"""Bytes kept per command when ``max_output_bytes`` is None."""
_REDACTION_SLACK = 1024
"""Bytes captured past the limit so that redaction sees a secret cut by the truncation."""
_READ_CHUNK = 65536
SESSION_ENV_VAR = "MK_SHELL_SESSION"
"""Set in every shell's environment to its session id: processes that left the process group (``setsid``,
``nohup``, double forks) still carry it, and are found by it and killed when the session ends (Linux ``/proc``)."""


class ShellSessionError(MiddlewareError, RuntimeError):
    """The shell session could not start (its process failed to launch, or a startup command failed)."""


# -- redaction -----------------------------------------------------------------------------------------------------
RedactionStrategy = Literal["redact", "mask", "hash", "block"]
Detector = Callable[[str], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class RedactionRule:
    """How one kind of sensitive value is handled in command output.

    Args:
        pii_type: A built-in type (``email``, ``credit_card``, ``ip``, ``mac_address``, ``url``) or your own name
            (then ``detector`` is required).
        strategy: ``"redact"`` (``[REDACTED_API_KEY]``), ``"mask"`` (keeps the last 4 characters), ``"hash"``
            (``<api_key_hash:1a2b3c4d>``) or ``"block"`` (the whole output is withheld from the model).
        detector: A regex (string or compiled) or a function ``(text) -> [{"start", "end", ...}]``; None uses the
            built-in detector of ``pii_type``.
    """

    pii_type: str
    strategy: RedactionStrategy = "redact"
    detector: Detector | str | re.Pattern[str] | None = None

    def resolve(self, owner: str = "RedactionRule") -> Callable[[str], list[tuple[int, int]]]:
        """The detector as a function returning ``(start, end)`` spans (validated; raises MiddlewareConfigError)."""
        if self.strategy not in ("redact", "mask", "hash", "block"):
            raise MiddlewareConfigError(
                f"{owner}: RedactionRule strategy must be 'redact', 'mask', 'hash' or 'block', got "
                f"{self.strategy!r}.",
                middleware=owner,
                hook="redaction_rules",
            )
        detector = self.detector
        if detector is None:
            builtin = BUILTIN_DETECTORS.get(self.pii_type)
            if builtin is None:
                raise MiddlewareConfigError(
                    f"{owner}: RedactionRule({self.pii_type!r}) has no detector and is not a built-in type "
                    f"({', '.join(BUILTIN_DETECTORS)}). Pass detector= (a regex or a function).",
                    middleware=owner,
                    hook="redaction_rules",
                )
            detector = builtin
        if isinstance(detector, (str, re.Pattern)):
            try:
                pattern = re.compile(detector) if isinstance(detector, str) else detector
            except re.error as exc:
                raise MiddlewareConfigError(
                    f"{owner}: the detector regex of RedactionRule({self.pii_type!r}) does not compile: {exc}.",
                    middleware=owner,
                    hook="redaction_rules",
                ) from None
            return lambda text: [(m.start(), m.end()) for m in pattern.finditer(text) if m.end() > m.start()]
        if not callable(detector):
            raise MiddlewareConfigError(
                f"{owner}: RedactionRule detector must be None, a regex or a function, got {detector!r}.",
                middleware=owner,
                hook="redaction_rules",
            )
        function = detector
        pii_type = self.pii_type

        def spans(text: str) -> list[tuple[int, int]]:
            try:
                return [(int(m["start"]), int(m["end"])) for m in function(text)]
            except Exception as exc:  # the user's detector: say whose and what it must return
                raise MiddlewareError(
                    f"{owner}: the detector of RedactionRule({pii_type!r}) failed on command output: "
                    f"{type(exc).__name__}: {exc}. A detector function must return a list of mappings with integer "
                    f"'start' and 'end' offsets.",
                    middleware=owner,
                    hook="redaction_rules",
                ) from exc

        return spans

    def replacement(self, value: str) -> str:
        if self.strategy == "mask":
            return "*" * max(len(value) - 4, 0) + value[-4:]
        if self.strategy == "hash":
            return f"<{self.pii_type}_hash:{hashlib.sha256(value.encode()).hexdigest()[:8]}>"
        return f"[REDACTED_{self.pii_type.upper()}]"


# -- execution policies --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BaseExecutionPolicy:
    """How the shell process is launched and bounded. Subclasses decide the command line.

    Args:
        command_timeout: Seconds a command may run before it is killed with its process group.
        startup_timeout: Seconds each startup (and shutdown) command may run.
        termination_timeout: Seconds to wait for the shell to exit after its input is closed, before killing it.
        max_output_lines: Lines of output kept per command.
        max_output_bytes: Bytes of output kept per command (None: a hard ceiling of 1 MiB).
    """

    command_timeout: float = 30.0
    startup_timeout: float = 30.0
    termination_timeout: float = 10.0
    max_output_lines: int = 100
    max_output_bytes: int | None = None

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name in ("command_timeout", "startup_timeout", "termination_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise MiddlewareConfigError(
                    f"{owner}: {name} must be a positive number of seconds, got {value!r}.", middleware=owner, hook=name
                )
        if isinstance(self.max_output_lines, bool) or not isinstance(self.max_output_lines, int) or (
            self.max_output_lines < 1
        ):
            raise MiddlewareConfigError(
                f"{owner}: max_output_lines must be a positive int, got {self.max_output_lines!r}.",
                middleware=owner,
                hook="max_output_lines",
            )
        if self.max_output_bytes is not None and (
            isinstance(self.max_output_bytes, bool)
            or not isinstance(self.max_output_bytes, int)
            or self.max_output_bytes < 1
        ):
            raise MiddlewareConfigError(
                f"{owner}: max_output_bytes must be None or a positive int, got {self.max_output_bytes!r}.",
                middleware=owner,
                hook="max_output_bytes",
            )

    default_shell: Sequence[str] = field(default=("/bin/bash",), init=False, repr=False, compare=False)

    @property
    def output_byte_limit(self) -> int:
        return self.max_output_bytes if self.max_output_bytes is not None else _HARD_OUTPUT_CAP

    def command(self, workspace: Path, shell: Sequence[str], *, session_name: str, ephemeral: bool) -> list[str]:
        """The argv that starts the shell (unit-testable: nothing is run)."""
        raise NotImplementedError

    def spawn(
        self, workspace: Path, shell: Sequence[str], env: Mapping[str, str], *, session_name: str, ephemeral: bool
    ) -> subprocess.Popen[bytes]:
        argv = self.command(workspace, shell, session_name=session_name, ephemeral=ephemeral)
        limits = self._rlimits()
        use_prlimit = bool(limits) and hasattr(resource, "prlimit")
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=str(workspace),
            env=dict(env),
            start_new_session=self.own_process_group,
            preexec_fn=None if use_prlimit or not limits else _set_limits(limits),
        )
        if use_prlimit:
            # Applied before the first command is written (the shell only waits for input until then), and
            # inherited by everything it starts. prlimit avoids preexec_fn, which is unsafe in threaded programs.
            try:
                for which, value in limits:
                    resource.prlimit(process.pid, which, (value, value))
            except OSError:
                _kill_group(process, self.own_process_group)
                raise
        return process

    @property
    def own_process_group(self) -> bool:
        return True

    def _rlimits(self) -> list[tuple[int, int]]:
        """``(resource.RLIMIT_*, value)`` pairs applied to the shell (and inherited by its children)."""
        return []

    def terminate(self, process: subprocess.Popen[bytes], *, session_name: str) -> None:
        """Kill the shell and everything it started."""
        _kill_group(process, self.own_process_group)


def _kill_group(process: subprocess.Popen[bytes], group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


@dataclass(frozen=True)
class HostExecutionPolicy(BaseExecutionPolicy):
    """Run the shell on this host, in its own process group, with optional resource limits. Full host access: use it
    only where the agent already runs in a sandbox (container, VM).

    Args:
        cpu_time_seconds: ``RLIMIT_CPU`` of the shell and its children (None: unlimited).
        memory_bytes: ``RLIMIT_AS`` of the shell and its children (None: unlimited).
        create_process_group: True (default) starts the shell in a new process group that timeouts kill as a whole.
            False leaves it in the agent's group: a timeout then kills the shell only, and its children survive.
    """

    cpu_time_seconds: int | None = None
    memory_bytes: int | None = None
    create_process_group: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("cpu_time_seconds", "memory_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise MiddlewareConfigError(
                    f"HostExecutionPolicy: {name} must be None or a positive int, got {value!r}.",
                    middleware="HostExecutionPolicy",
                    hook=name,
                )

    @property
    def own_process_group(self) -> bool:
        return self.create_process_group

    def command(self, workspace: Path, shell: Sequence[str], *, session_name: str, ephemeral: bool) -> list[str]:
        return list(shell)

    def _rlimits(self) -> list[tuple[int, int]]:
        limits = []
        if self.cpu_time_seconds is not None:
            limits.append((resource.RLIMIT_CPU, self.cpu_time_seconds))
        if self.memory_bytes is not None:
            limits.append((resource.RLIMIT_AS, self.memory_bytes))
        return limits


def _set_limits(limits: list[tuple[int, int]]) -> Callable[[], None]:
    def apply() -> None:  # runs in the child between fork and exec (platforms without prlimit)
        for which, value in limits:
            resource.setrlimit(which, (value, value))

    return apply


@dataclass(frozen=True)
class DockerExecutionPolicy(BaseExecutionPolicy):
    """Run the shell in a fresh Docker container per session (no network unless ``network_enabled``).

    The workspace is bind-mounted only when it is a directory you gave (``workspace_root``); a temporary workspace is
    not mounted. A timeout kills the container (``docker kill``) as well as the client process.
    """

    binary: str = "docker"
    image: str = "python:3.12-alpine3.19"
    remove_container_on_exit: bool = True
    network_enabled: bool = False
    extra_run_args: Sequence[str] | None = None
    memory_bytes: int | None = None
    cpu_time_seconds: int | None = None
    cpus: str | None = None
    read_only_rootfs: bool = False
    user: str | None = None
    default_shell: Sequence[str] = field(default=("/bin/sh",), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.binary or not self.image:
            raise MiddlewareConfigError(
                "DockerExecutionPolicy: binary and image must be non-empty strings.",
                middleware="DockerExecutionPolicy",
                hook="image" if self.binary else "binary",
            )
        if self.extra_run_args is not None:
            object.__setattr__(self, "extra_run_args", tuple(str(a) for a in self.extra_run_args))

    def command(self, workspace: Path, shell: Sequence[str], *, session_name: str, ephemeral: bool) -> list[str]:
        argv = [self.binary, "run", "-i", "--name", session_name]
        if self.remove_container_on_exit:
            argv.append("--rm")
        if not self.network_enabled:
            argv += ["--network", "none"]
        if self.memory_bytes is not None:
            argv += ["--memory", str(self.memory_bytes)]
        if self.cpu_time_seconds is not None:
            argv += ["--ulimit", f"cpu={self.cpu_time_seconds}"]
        if self.cpus is not None:
            argv += ["--cpus", str(self.cpus)]
        if self.read_only_rootfs:
            argv.append("--read-only")
        if self.user is not None:
            argv += ["--user", self.user]
        if not ephemeral:
            argv += ["-v", f"{workspace}:{workspace}", "-w", str(workspace)]
        argv += list(self.extra_run_args or ())
        argv.append(self.image)
        argv += list(shell)
        return argv

    def terminate(self, process: subprocess.Popen[bytes], *, session_name: str) -> None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [self.binary, "kill", session_name], capture_output=True, timeout=self.termination_timeout, check=False
            )
        super().terminate(process, session_name=session_name)


@dataclass(frozen=True)
class CodexSandboxExecutionPolicy(BaseExecutionPolicy):
    """Run the shell under the Codex CLI sandbox (``codex sandbox <platform> -- <shell>``).

    Args:
        binary: The Codex CLI executable.
        platform: ``"auto"`` (from ``sys.platform``), ``"linux"`` or ``"macos"``.
        config_overrides: ``-c key=value`` options passed to the sandbox (values JSON-encoded).
    """

    binary: str = "codex"
    platform: Literal["auto", "linux", "macos"] = "auto"
    config_overrides: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.platform not in ("auto", "linux", "macos"):
            raise MiddlewareConfigError(
                f"CodexSandboxExecutionPolicy: platform must be 'auto', 'linux' or 'macos', got {self.platform!r}.",
                middleware="CodexSandboxExecutionPolicy",
                hook="platform",
            )
        if self.config_overrides is not None:
            object.__setattr__(self, "config_overrides", MappingProxyType(dict(self.config_overrides)))

    def resolved_platform(self) -> str:
        if self.platform != "auto":
            return self.platform
        return "macos" if sys.platform == "darwin" else "linux"

    def command(self, workspace: Path, shell: Sequence[str], *, session_name: str, ephemeral: bool) -> list[str]:
        argv = [self.binary, "sandbox", self.resolved_platform()]
        for key, value in sorted((self.config_overrides or {}).items()):
            argv += ["-c", f"{key}={json.dumps(value)}"]
        return [*argv, "--", *shell]


# -- the session ---------------------------------------------------------------------------------------------------
@dataclass
class _Capture:
    max_lines: int
    max_bytes: int
    chunks: list[bytes] = field(default_factory=list)
    lines: int = 0
    size: int = 0
    dropped_lines: int = 0
    dropped_bytes: int = 0

    @property
    def full(self) -> bool:
        return self.lines >= self.max_lines or self.size >= self.max_bytes

    def feed(self, data: bytes) -> None:
        if self.full:
            self.dropped_bytes += len(data)
            self.dropped_lines += data.count(b"\n")
            return
        room = self.max_bytes - self.size
        kept = data[:room]
        self.chunks.append(kept)
        self.size += len(kept)
        self.lines += 1 if data.endswith(b"\n") else 0
        if len(kept) < len(data):
            self.dropped_bytes += len(data) - len(kept)
            self.dropped_lines += data[len(kept) :].count(b"\n")


@dataclass
class _Result:
    output: str
    exit_code: int | None
    timed_out: bool = False
    exited: bool = False
    dropped_lines: int = 0
    dropped_bytes: int = 0
    duration: float = 0.0


class _Session:
    """One live shell. Used by one run; its lock serializes parallel tool calls of that run."""

    def __init__(self, session_id: str, config: ShellToolMiddleware) -> None:
        self.id = session_id
        self.config = config
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.workspace: Path | None = None
        self.ephemeral = config.workspace_root is None
        self.closed = False

    @property
    def name(self) -> str:
        return f"mk-shell-{self.id}"

    # lifecycle ---------------------------------------------------------------------------------------------------
    def ensure_started(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        self._discard_process()
        config = self.config
        if self.workspace is None:
            if config.workspace_root is None:
                self.workspace = Path(tempfile.mkdtemp(prefix="mk_shell_"))
            else:
                self.workspace = Path(config.workspace_root)
                self.workspace.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ) if config.shell_env is None else dict(config.shell_env)  # inherit at spawn time
        env[SESSION_ENV_VAR] = self.id
        try:
            self.process = config.policy.spawn(
                self.workspace, config.shell_argv, env, session_name=self.name, ephemeral=self.ephemeral
            )
        except OSError as exc:
            raise ShellSessionError(
                f"{config.name}: could not start the shell {list(config.shell_argv)} with "
                f"{type(config.policy).__name__}: {exc}. Check shell_command and the execution policy.",
                middleware=config.name,
                hook="execution_policy",
            ) from exc
        for command in config.startup_commands:
            result = self._run(command, config.policy.startup_timeout)
            if result.timed_out or result.exit_code != 0:
                self._discard_process()
                how = "timed out" if result.timed_out else f"exited with {result.exit_code}"
                raise ShellSessionError(
                    f"{config.name}: startup command {command!r} {how}; output: {result.output[-500:]!r}. Fix "
                    f"startup_commands (each must succeed within startup_timeout).",
                    middleware=config.name,
                    hook="startup_commands",
                )

    def restart(self) -> None:
        self._discard_process()
        self.ensure_started()

    def close(self) -> None:
        """Shutdown commands, then kill the group, then remove a temporary workspace. Idempotent."""
        if self.closed:
            return
        self.closed = True
        process = self.process
        if process is not None and process.poll() is None:
            for command in self.config.shutdown_commands:
                result = self._run(command, self.config.policy.startup_timeout)
                if result.timed_out or result.exited:
                    break
            with contextlib.suppress(OSError):
                if process.stdin is not None:
                    process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=min(self.config.policy.termination_timeout, 2.0))
        self._discard_process()
        if self.ephemeral and self.workspace is not None:
            shutil.rmtree(self.workspace, ignore_errors=True)

    def _discard_process(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        # Always kill the whole group: background jobs must not outlive the session.
        self.config.policy.terminate(process, session_name=self.name)
        _kill_escaped(self.id)
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()

    def kill(self) -> None:
        """Kill the shell's processes now, without waiting for the command that holds :attr:`lock` (used when the
        run is cancelled): that command then reads end-of-file and returns, and :meth:`close` finishes the job."""
        process = self.process
        if process is not None:
            self.config.policy.terminate(process, session_name=self.name)
        _kill_escaped(self.id)

    # commands ----------------------------------------------------------------------------------------------------
    def execute(self, command: str) -> _Result:
        self.ensure_started()
        result = self._run(command, self.config.policy.command_timeout)
        if result.timed_out or result.exited:
            self._discard_process()  # the next command starts a fresh session
        return result

    def _run(self, command: str, timeout: float) -> _Result:
        process = self.process
        assert process is not None and process.stdin is not None and process.stdout is not None
        marker = f"__MK_SHELL_DONE_{uuid.uuid4().hex}__"
        # eval of a single-quoted copy: a syntax error, an unclosed quote or heredoc, a trailing backslash or a stray
        # '}' stays inside this one command (eval fails with status 2) instead of swallowing the marker line and
        # hanging until the timeout, or killing the session with its working directory and variables.
        quoted = "'" + command.replace("'", "'\\''") + "'"
        script = f"{{ eval {quoted}\n}} </dev/null 2>&1\nprintf '\\n{marker} %s\\n' \"$?\"\n"
        policy = self.config.policy
        capture = _Capture(policy.max_output_lines, policy.output_byte_limit + _REDACTION_SLACK)
        started = time.monotonic()
        exit_code, timed_out, exited = self._collect(process, script.encode(), marker.encode(), capture,
                                                     started + timeout)
        # NUL cannot be stored by some checkpointers (PostgreSQL text/jsonb): shown as U+FFFD like undecodable bytes.
        text = b"".join(capture.chunks).decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        text = text.rstrip("\n")  # includes the newline printed before the marker
        return _Result(
            text,
            exit_code,
            timed_out=timed_out,
            exited=exited,
            dropped_lines=capture.dropped_lines,
            dropped_bytes=capture.dropped_bytes,
            duration=time.monotonic() - started,
        )

    @staticmethod
    def _collect(
        process: subprocess.Popen[bytes], script: bytes, marker: bytes, capture: _Capture, deadline: float
    ) -> tuple[int | None, bool, bool]:
        """Write ``script`` and read the output until ``marker``, the deadline or EOF, in one select loop: the
        script is written as the shell takes it (non-blocking), so a huge command cannot deadlock against its own
        output, and the deadline covers writing too."""
        assert process.stdout is not None and process.stdin is not None
        fd = process.stdout.fileno()
        in_fd = process.stdin.fileno()
        os.set_blocking(in_fd, False)
        unsent = memoryview(script)
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            selector.register(in_fd, selectors.EVENT_WRITE)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    capture.feed(pending)
                    return None, True, False
                ready = selector.select(remaining)
                if unsent and any(key.fd == in_fd for key, _ in ready):
                    try:
                        unsent = unsent[os.write(in_fd, unsent[:_READ_CHUNK]) :]
                    except BlockingIOError:
                        pass
                    except (BrokenPipeError, OSError):
                        capture.feed(pending)
                        return process.poll(), False, True
                    if not unsent:
                        selector.unregister(in_fd)
                if not any(key.fd == fd for key, _ in ready):
                    continue
                chunk = os.read(fd, _READ_CHUNK)
                if not chunk:
                    capture.feed(pending)
                    return process.poll(), False, True
                if capture.full and marker not in pending + chunk:
                    # Fast path for floods: count and drop. The marker always starts a line and is short, so an
                    # unfinished line longer than it cannot be the marker and need not be kept.
                    data = pending + chunk
                    cut = data.rfind(b"\n") + 1
                    capture.feed(data[:cut])
                    rest = data[cut:]
                    pending = rest if len(rest) <= len(marker) + 32 else b""
                    if not pending:
                        capture.feed(rest)
                    continue
                pending += chunk
                while True:
                    newline = pending.find(b"\n")
                    if newline < 0:
                        break
                    line, pending = pending[: newline + 1], pending[newline + 1 :]
                    if line.startswith(marker):
                        code = line[len(marker) :].strip()
                        return (int(code) if code.lstrip(b"-").isdigit() else None), False, False
                    capture.feed(line)
                if len(pending) > _READ_CHUNK:  # a very long line: the marker line is short, so this is output
                    capture.feed(pending)
                    pending = b""


def _kill_escaped(session_id: str) -> None:
    """SIGKILL every process of this user still carrying ``MK_SHELL_SESSION=<session_id>`` in its environment: the
    ones that left the process group (``setsid``, ``nohup``, daemonizing double forks). A process started with a
    cleaned environment (``env -i``) is not found: only a container (DockerExecutionPolicy) contains everything."""
    proc = Path("/proc")
    if not proc.is_dir():  # pragma: no cover - not Linux: the process group kill is all there is
        return
    needle = f"{SESSION_ENV_VAR}={session_id}".encode()
    me = os.getpid()
    for _ in range(3):  # a dying parent may fork once more while we look: a few passes
        found = False
        for entry in proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue  # gone, or another user's process (never ours to kill)
            if needle in environ.split(b"\x00"):
                found = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry.name), signal.SIGKILL)
        if not found:
            return


_SESSIONS: dict[str, _Session] = {}
_SESSIONS_LOCK = threading.Lock()


def open_shell_sessions() -> tuple[str, ...]:
    """Ids of the shell sessions open in this process (every run closes its own when it ends)."""
    with _SESSIONS_LOCK:
        return tuple(_SESSIONS)


def _close_session(session_id: str | None) -> bool:
    if not session_id:
        return False
    with _SESSIONS_LOCK:
        session = _SESSIONS.pop(session_id, None)
    if session is None:
        return False
    with session.lock:
        session.close()
    return True


def _abort_session(session_id: str | None) -> None:
    """The run was cancelled while a command may be running: kill the session's processes at once (the command's
    thread cannot be interrupted otherwise) and close the session as soon as that thread lets go of it."""
    if not session_id:
        return
    with _SESSIONS_LOCK:
        session = _SESSIONS.pop(session_id, None)
    if session is None:
        return
    session.kill()

    def finish() -> None:
        with session.lock:
            session.close()

    threading.Thread(target=finish, name=f"mk-shell-close-{session_id[:8]}", daemon=True).start()


@atexit.register
def _close_all_sessions() -> None:  # pragma: no cover - runs at interpreter exit
    for session_id in open_shell_sessions():
        _close_session(session_id)


# -- the middleware ------------------------------------------------------------------------------------------------
class ShellToolState(AgentState[Any]):
    """State of :class:`ShellToolMiddleware`: the id of this run's shell session (private)."""

    shell_session_id: NotRequired[Annotated[str | None, PrivateStateAttr]]


def _commands(value: Sequence[str] | str | None, owner: str, param: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(c, str) and c.strip() for c in items):
        raise MiddlewareConfigError(
            f"{owner}: {param} must be a command string or a sequence of non-empty command strings, got {value!r}.",
            middleware=owner,
            hook=param,
        )
    return items


class ShellToolMiddleware(FrozenConfig, AgentMiddleware[ShellToolState, Any]):
    """Give the agent a persistent shell tool that runs REAL commands (see the module docstring for guarantees).

    Args:
        workspace_root: The shell's working directory (created if missing). None: a temporary directory per session,
            removed when the run ends.
        startup_commands: Run, in order, when a session starts; each must exit 0 within ``startup_timeout``.
        shutdown_commands: Run when the session closes (at the end of the run), before its processes are killed.
        execution_policy: :class:`HostExecutionPolicy` (default), :class:`DockerExecutionPolicy` or
            :class:`CodexSandboxExecutionPolicy`: timeouts, output limits and isolation.
        redaction_rules: :class:`RedactionRule`s applied to every output before the model sees it.
        tool_description: The description the model sees (default :data:`DEFAULT_TOOL_DESCRIPTION`).
        tool_name: The tool's name (default ``"shell"``).
        shell_command: The shell to launch (a path or an argv); default ``/bin/bash`` (``/bin/sh`` in Docker).
        env: The shell's environment (values converted to str). None inherits the agent's environment, secrets
            included: pass an explicit mapping to keep them out (``PATH`` is added when you leave it out).
    """

    state_schema = ShellToolState

    def __init__(
        self,
        workspace_root: str | os.PathLike[str] | None = None,
        *,
        startup_commands: tuple[str, ...] | list[str] | str | None = None,
        shutdown_commands: tuple[str, ...] | list[str] | str | None = None,
        execution_policy: BaseExecutionPolicy | None = None,
        redaction_rules: tuple[RedactionRule, ...] | list[RedactionRule] | None = None,
        tool_description: str | None = None,
        tool_name: str = SHELL_TOOL_NAME,
        shell_command: Sequence[str] | str | None = None,
        env: Mapping[str, Any] | None = None,
    ) -> None:
        owner = type(self).__name__
        if execution_policy is None:
            execution_policy = HostExecutionPolicy()
        if not isinstance(execution_policy, BaseExecutionPolicy):
            raise MiddlewareConfigError(
                f"{owner}: execution_policy must be a HostExecutionPolicy, DockerExecutionPolicy or "
                f"CodexSandboxExecutionPolicy, got {execution_policy!r}.",
                middleware=owner,
                hook="execution_policy",
            )
        if type(execution_policy).command is BaseExecutionPolicy.command:
            raise MiddlewareConfigError(
                f"{owner}: execution_policy {type(execution_policy).__name__} does not define command(); use "
                f"HostExecutionPolicy, DockerExecutionPolicy or CodexSandboxExecutionPolicy, or implement command() "
                f"in your subclass.",
                middleware=owner,
                hook="execution_policy",
            )
        rules = tuple(redaction_rules or ())
        for rule in rules:
            if not isinstance(rule, RedactionRule):
                raise MiddlewareConfigError(
                    f"{owner}: redaction_rules must hold RedactionRule instances, got {rule!r}.",
                    middleware=owner,
                    hook="redaction_rules",
                )
        if not isinstance(tool_name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", tool_name):
            raise MiddlewareConfigError(
                f"{owner}: tool_name must be 1-64 letters, digits, '_' or '-', got {tool_name!r}.",
                middleware=owner,
                hook="tool_name",
            )
        if shell_command is None:
            shell: tuple[str, ...] = tuple(execution_policy.default_shell)
        elif isinstance(shell_command, str):
            shell = (shell_command,)
        else:
            shell = tuple(shell_command)
        if not shell or not all(isinstance(part, str) and part for part in shell):
            raise MiddlewareConfigError(
                f"{owner}: shell_command must be a path or a non-empty argv, got {shell_command!r}.",
                middleware=owner,
                hook="shell_command",
            )
        if env is not None and not isinstance(env, Mapping):
            raise MiddlewareConfigError(
                f"{owner}: env must be a mapping of variable names to values, got {env!r}.",
                middleware=owner,
                hook="env",
            )
        for key, value in (env or {}).items():
            if not str(key) or "=" in str(key) or "\x00" in str(key) or "\x00" in str(value):
                raise MiddlewareConfigError(
                    f"{owner}: env entry {str(key)!r} is not a valid environment variable (names are non-empty "
                    f"without '='; names and values hold no NUL character).",
                    middleware=owner,
                    hook="env",
                )
        if workspace_root is not None and "\x00" in os.fspath(workspace_root):
            raise MiddlewareConfigError(
                f"{owner}: workspace_root must be a directory path without NUL characters, got {workspace_root!r}.",
                middleware=owner,
                hook="workspace_root",
            )
        for part in shell_command if isinstance(shell_command, (list, tuple)) else (shell_command or "",):
            if isinstance(part, str) and "\x00" in part:
                raise MiddlewareConfigError(
                    f"{owner}: shell_command must not contain NUL characters, got {shell_command!r}.",
                    middleware=owner,
                    hook="shell_command",
                )
        self.workspace_root = Path(workspace_root).expanduser().absolute() if workspace_root is not None else None
        self.startup_commands = _commands(startup_commands, owner, "startup_commands")
        self.shutdown_commands = _commands(shutdown_commands, owner, "shutdown_commands")
        self.policy = execution_policy
        self.redaction_rules = rules
        self._detectors = tuple((rule, rule.resolve(owner)) for rule in rules)
        self.tool_name = tool_name
        self.tool_description = tool_description or DEFAULT_TOOL_DESCRIPTION
        self.shell_argv = shell
        # None: the environment is inherited when a session starts (LangChain 1.5: "the session inherits the parent
        # process environment"); no copy of the host's variables (and secrets) is kept on the middleware.
        self.shell_env: Mapping[str, str] | None = None
        if env is not None:
            shell_env = {str(k): str(v) for k, v in env.items()}
            shell_env.setdefault("PATH", os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"))
            self.shell_env = MappingProxyType(shell_env)
        self.tools: tuple[BaseTool, ...] = (self._make_tool(),)

    # -- lifecycle hooks (node hooks; the engine bridges them under ainvoke) ------------------------------------
    def before_agent(self, state: ShellToolState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        # A run that crashed on this thread may have left its session open: close it now.
        _close_session(state.get("shell_session_id"))
        return {"shell_session_id": uuid.uuid4().hex}

    def after_agent(self, state: ShellToolState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        session_id = state.get("shell_session_id")
        if _close_session(session_id):
            emit(runtime, {"event": "shell_session_closed", "middleware": self.name, "session": session_id})
        return {"shell_session_id": None} if session_id else None

    # -- the tool --------------------------------------------------------------------------------------------------
    def _make_tool(self) -> BaseTool:
        def shell(runtime: ToolRuntime, command: str = "", restart: bool = False) -> ToolMessage:
            """Run a command in the persistent shell session."""
            return self.run_tool(command, restart=restart, runtime=runtime)

        async def ashell(runtime: ToolRuntime, command: str = "", restart: bool = False) -> ToolMessage:
            """Run a command in the persistent shell session."""
            return await self.arun_tool(command, restart=restart, runtime=runtime)

        return StructuredTool.from_function(
            func=shell, coroutine=ashell, name=self.tool_name, description=self.tool_description
        )

    async def arun_tool(self, command: str, *, restart: bool, runtime: ToolRuntime) -> ToolMessage:
        """:meth:`run_tool` in a worker thread. If the run is cancelled meanwhile (``ainvoke`` cancelled, a timeout
        around it), the session's processes are killed at once and the session is closed: nothing keeps running."""
        try:
            return await asyncio.to_thread(self.run_tool, command, restart=restart, runtime=runtime)
        except asyncio.CancelledError:
            state = runtime.state if isinstance(runtime.state, Mapping) else {}
            _abort_session(state.get("shell_session_id"))
            raise

    def run_tool(self, command: str, *, restart: bool, runtime: ToolRuntime) -> ToolMessage:
        """What the shell tool does for one call (a session is created for the run on first use)."""
        call_id = runtime.tool_call_id or ""
        state = runtime.state if isinstance(runtime.state, Mapping) else {}
        session_id = state.get("shell_session_id")
        if not session_id:
            return self._message(
                "Error: no shell session for this run. The shell tool works only inside an agent built with "
                f"{self.name}.",
                call_id,
                "error",
            )
        with _SESSIONS_LOCK:
            session = _SESSIONS.get(session_id)
            if session is None or session.closed:
                session = _SESSIONS[session_id] = _Session(session_id, self)
        try:
            with session.lock:
                if restart:
                    session.restart()
                    emit(runtime, {"event": "shell_restarted", "middleware": self.name, "session": session_id})
                    if not command.strip():
                        return self._message("Shell session restarted.", call_id, "success")
                if not command.strip():
                    return self._message("Error: command is empty. Pass the command to run.", call_id, "error")
                result = session.execute(command)
            return self._report(command, result, call_id, runtime, session_id)
        except Exception:
            _close_session(session_id)  # the run fails: leave nothing behind
            raise

    def _report(self, command: str, result: _Result, call_id: str, runtime: Any, session_id: str) -> ToolMessage:
        text, blocked = self._redact(result.output)
        emit(
            runtime,
            {
                "event": "shell_command",
                "middleware": self.name,
                "session": session_id,
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "truncated": bool(result.dropped_bytes or len(text.encode()) > self.policy.output_byte_limit),
                "redacted": blocked is not None or text != result.output,
                "duration": round(result.duration, 3),
            },
        )
        if blocked is not None:
            return self._message(
                f"Error: the output was withheld because it contains {blocked} (redaction strategy 'block').",
                call_id,
                "error",
            )
        text, cut = _cut(text, self.policy.output_byte_limit)
        notes = []
        if result.dropped_lines or result.dropped_bytes or cut:
            notes.append(
                f"... Output truncated: kept the first {self.policy.max_output_lines} lines / "
                f"{self.policy.output_byte_limit} bytes ({result.dropped_lines} more lines dropped)."
            )
        if result.timed_out:
            notes.append(
                f"Error: the command timed out after {self.policy.command_timeout:g}s. It was killed with all its "
                f"processes, and the shell session restarted (working directory and variables were reset)."
            )
        elif result.exited:
            notes.append("The shell session exited; the next command starts a new session.")
        elif result.exit_code not in (0, None):
            notes.append(f"Exit code: {result.exit_code}")
        content = "\n\n".join([text or "<no output>", *notes])
        failed = result.timed_out or (result.exit_code not in (0, None))
        return self._message(content, call_id, "error" if failed else "success")

    def _redact(self, text: str) -> tuple[str, str | None]:
        for rule, detect in self._detectors:
            spans = sorted(detect(text))
            if not spans:
                continue
            if rule.strategy == "block":
                return "", rule.pii_type
            parts, pos = [], 0
            for start, end in spans:
                if start < pos:
                    continue
                parts += [text[pos:start], rule.replacement(text[start:end])]
                pos = end
            text = "".join([*parts, text[pos:]])
        return text, None

    def _message(self, content: str, call_id: str, status: Literal["success", "error"]) -> ToolMessage:
        return ToolMessage(content=content, tool_call_id=call_id, name=self.tool_name, status=status)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode()
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", errors="ignore"), True
