"""Execution policies of :class:`~middleware_kit.middlewares.shell_tool.ShellToolMiddleware`: how the shell process is
started and bounded. Public through ``middleware_kit.middlewares.shell_tool`` (LangChain 1.5's names and constructor
parameters; ``spawn(*, workspace, env, command)`` as in LangChain)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from middleware_kit.errors import MiddlewareConfigError

try:  # POSIX only: resource limits of the host policy
    import resource

    _HAS_RESOURCE = True
except ImportError:  # pragma: no cover - not POSIX
    _HAS_RESOURCE = False

__all__ = [
    "SESSION_ENV_VAR",
    "SHELL_TEMP_PREFIX",
    "BaseExecutionPolicy",
    "CodexSandboxExecutionPolicy",
    "DockerExecutionPolicy",
    "HostExecutionPolicy",
    "UnsupportedPolicyOptionError",
]

HARD_OUTPUT_CAP = 1024 * 1024
"""Bytes kept per command when ``max_output_bytes`` is None."""
SHELL_TEMP_PREFIX = "mk_shell_"
"""Name prefix of the temporary workspaces; Docker never bind-mounts a workspace whose name starts with it."""
SESSION_ENV_VAR = "MK_SHELL_SESSION"
"""Set in every shell's environment to its session id: processes that left the process group (``setsid``,
``nohup``, double forks) still carry it, and are found by it and killed when the session ends (Linux ``/proc``)."""


class UnsupportedPolicyOptionError(MiddlewareConfigError, RuntimeError):
    """An execution policy option this platform or policy cannot honour (a ``RuntimeError``, as in LangChain)."""


def _config_error(owner: str, param: str, message: str) -> MiddlewareConfigError:
    return MiddlewareConfigError(f"{owner}: {message}", middleware=owner, hook=param)


def _positive_or_none(owner: str, param: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise _config_error(owner, param, f"{param} must be positive if provided (an int, or None), got {value!r}.")


@dataclass(frozen=True)
class BaseExecutionPolicy:
    """How the shell process is launched and bounded. Subclasses decide the command line (:meth:`command_line`).

    Args:
        command_timeout: Seconds a command may run before it is killed with its process group.
        startup_timeout: Seconds each startup command may run.
        termination_timeout: Seconds to wait for the shell to exit after its input is closed, before killing it.
        max_output_lines: Lines of output (stdout and stderr together) kept per command.
        max_output_bytes: Bytes of output kept per command (None: a hard ceiling of 1 MiB).
    """

    command_timeout: float = 30.0
    startup_timeout: float = 30.0
    termination_timeout: float = 10.0
    max_output_lines: int = 100
    max_output_bytes: int | None = None

    inherits_host_environment: ClassVar[bool] = True
    """With ``env=None`` the shell inherits the agent's environment (False for Docker: the container gets only the
    variables given explicitly)."""
    default_shell: ClassVar[tuple[str, ...]] = ("/bin/bash",)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name in ("command_timeout", "startup_timeout", "termination_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise _config_error(owner, name, f"{name} must be a positive number of seconds, got {value!r}.")
        lines = self.max_output_lines
        if isinstance(lines, bool) or not isinstance(lines, int) or lines < 1:
            message = f"max_output_lines must be positive (an int), got {lines!r}."
            raise _config_error(owner, "max_output_lines", message)
        _positive_or_none(owner, "max_output_bytes", self.max_output_bytes)

    @property
    def output_byte_limit(self) -> int:
        return self.max_output_bytes if self.max_output_bytes is not None else HARD_OUTPUT_CAP

    @property
    def own_process_group(self) -> bool:
        return True

    def command_line(self, *, workspace: Path, env: Mapping[str, str], command: Sequence[str]) -> list[str]:
        """The argv that starts the shell ``command`` (unit-testable: nothing is run)."""
        return list(command)

    def spawn(self, *, workspace: Path, env: Mapping[str, str], command: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start the persistent shell (stdin, stdout and stderr are pipes)."""
        return _launch(
            self.command_line(workspace=workspace, env=env, command=command),
            env=env,
            cwd=workspace,
            preexec_fn=None,
            start_new_session=self.own_process_group,
        )

    def terminate(self, env: Mapping[str, str]) -> None:
        """Extra clean-up when a session ends (Docker kills its container); the process group is killed anyway."""


def _launch(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    preexec_fn: Callable[[], None] | None,
    start_new_session: bool,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(cwd),
        env=dict(env),
        preexec_fn=preexec_fn,
        start_new_session=start_new_session,
    )


@dataclass(frozen=True)
class HostExecutionPolicy(BaseExecutionPolicy):
    """Run the shell on this host, in its own process group, with optional resource limits. Full host access: use it
    only where the agent already runs in a sandbox (container, VM).

    Args:
        cpu_time_seconds: ``RLIMIT_CPU`` of the shell and its children (None: unlimited).
        memory_bytes: ``RLIMIT_AS`` (``RLIMIT_DATA`` where there is none) of the shell and its children.
        create_process_group: True (default) starts the shell in a new process group that timeouts kill as a whole.
            False leaves it in the agent's group: a timeout then kills the shell only, and its children survive.
    """

    cpu_time_seconds: int | None = None
    memory_bytes: int | None = None
    create_process_group: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive_or_none("HostExecutionPolicy", "cpu_time_seconds", self.cpu_time_seconds)
        _positive_or_none("HostExecutionPolicy", "memory_bytes", self.memory_bytes)
        if self._rlimits_requested() and not _HAS_RESOURCE:
            raise UnsupportedPolicyOptionError(
                "HostExecutionPolicy: cpu_time_seconds and memory_bytes need the 'resource' module (POSIX). Remove "
                "the limits, or run on a POSIX platform.",
                middleware="HostExecutionPolicy",
                hook="cpu_time_seconds" if self.cpu_time_seconds is not None else "memory_bytes",
            )

    @property
    def own_process_group(self) -> bool:
        return self.create_process_group

    def _rlimits_requested(self) -> bool:
        return self.cpu_time_seconds is not None or self.memory_bytes is not None

    def _rlimits(self) -> list[tuple[int, int]]:
        """``(resource.RLIMIT_*, value)`` pairs applied to the shell (and inherited by its children)."""
        limits = []
        if self.cpu_time_seconds is not None:
            limits.append((resource.RLIMIT_CPU, self.cpu_time_seconds))
        if self.memory_bytes is not None:
            which = getattr(resource, "RLIMIT_AS", None)
            limits.append((which if which is not None else resource.RLIMIT_DATA, self.memory_bytes))
        return limits

    def spawn(self, *, workspace: Path, env: Mapping[str, str], command: Sequence[str]) -> subprocess.Popen[bytes]:
        limits = self._rlimits() if self._rlimits_requested() else []
        # prlimit after the start (Linux) avoids preexec_fn, which is unsafe in threaded programs; the limits are in
        # place before the first command is written (the shell only waits for input until then).
        use_prlimit = bool(limits) and hasattr(resource, "prlimit") and sys.platform.startswith("linux")
        process = _launch(
            self.command_line(workspace=workspace, env=env, command=command),
            env=env,
            cwd=workspace,
            preexec_fn=_set_limits(limits) if limits and not use_prlimit else None,
            start_new_session=self.create_process_group,
        )
        if use_prlimit:
            try:
                for which, value in limits:
                    resource.prlimit(process.pid, which, (value, value))
            except OSError:
                with contextlib.suppress(OSError):
                    process.kill()
                raise
        return process


def _set_limits(limits: list[tuple[int, int]]) -> Callable[[], None]:
    def apply() -> None:  # runs in the child between fork and exec (platforms without prlimit)
        for which, value in limits:
            resource.setrlimit(which, (value, value))

    return apply


@dataclass(frozen=True)
class DockerExecutionPolicy(BaseExecutionPolicy):
    """Run the shell in a fresh Docker container per session (no network unless ``network_enabled``).

    The workspace is bind-mounted only when it is a directory you gave (``workspace_root``); a temporary workspace is
    not mounted. Variables of ``env`` reach the container by name (``-e NAME``; values travel through the docker
    client's environment, never on its command line, where ``ps`` would show them). Ending a session kills the
    container (``docker kill``) as well as the client process.
    """

    binary: str = "docker"
    image: str = "python:3.12-alpine3.19"
    remove_container_on_exit: bool = True
    network_enabled: bool = False
    extra_run_args: Sequence[str] | None = None
    memory_bytes: int | None = None
    cpu_time_seconds: Any | None = None
    cpus: str | None = None
    read_only_rootfs: bool = False
    user: str | None = None

    inherits_host_environment: ClassVar[bool] = False
    default_shell: ClassVar[tuple[str, ...]] = ("/bin/sh",)

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = "DockerExecutionPolicy"
        _positive_or_none(owner, "memory_bytes", self.memory_bytes)
        if self.cpu_time_seconds is not None:
            raise UnsupportedPolicyOptionError(
                f"{owner}: cpu_time_seconds is not supported; limit CPU with Docker run options: cpus='1.5', or "
                f"extra_run_args=('--ulimit', 'cpu=<seconds>').",
                middleware=owner,
                hook="cpu_time_seconds",
            )
        for param in ("cpus", "user"):
            value = getattr(self, param)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise _config_error(owner, param, f"{param} must be a non-empty string when provided, got {value!r}.")
        if not self.binary or not self.image:
            raise _config_error(owner, "image" if self.binary else "binary", "binary and image must be non-empty.")
        object.__setattr__(self, "extra_run_args", tuple(str(a) for a in self.extra_run_args or ()))

    def _resolve_binary(self) -> str:
        found = shutil.which(self.binary)
        if found is None:
            raise UnsupportedPolicyOptionError(
                f"DockerExecutionPolicy: the {self.binary!r} CLI is not installed or not on PATH. Install Docker or "
                f"pass binary= (its path).",
                middleware="DockerExecutionPolicy",
                hook="binary",
            )
        return found

    @staticmethod
    def container_name(env: Mapping[str, str]) -> str | None:
        session = env.get(SESSION_ENV_VAR)
        return f"mk-shell-{session}" if session else None

    def command_line(self, *, workspace: Path, env: Mapping[str, str], command: Sequence[str]) -> list[str]:
        argv = [self.binary, "run", "-i"]
        if self.remove_container_on_exit:
            argv.append("--rm")
        name = self.container_name(env)
        if name:
            argv += ["--name", name]
        if not self.network_enabled:
            argv += ["--network", "none"]
        if self.memory_bytes is not None:
            argv += ["--memory", str(self.memory_bytes)]
        if workspace.name.startswith(SHELL_TEMP_PREFIX):
            argv += ["-w", "/"]
        else:
            argv += ["-v", f"{workspace}:{workspace}", "-w", str(workspace)]
        if self.read_only_rootfs:
            argv.append("--read-only")
        for key in env:
            argv += ["-e", key]
        if self.cpus is not None:
            argv += ["--cpus", self.cpus]
        if self.user is not None:
            argv += ["--user", self.user]
        argv += list(self.extra_run_args or ())
        return [*argv, self.image, *command]

    def _build_command(self, workspace: Path, env: Mapping[str, str], command: Sequence[str]) -> list[str]:
        """:meth:`command_line` with the docker binary resolved on PATH (a clear error when it is missing)."""
        argv = self.command_line(workspace=workspace, env=env, command=command)
        return [self._resolve_binary(), *argv[1:]]

    def spawn(self, *, workspace: Path, env: Mapping[str, str], command: Sequence[str]) -> subprocess.Popen[bytes]:
        argv = self._build_command(workspace, env, command)
        # The docker client runs with the host environment (PATH, DOCKER_HOST, ...) plus the shell's variables,
        # which `-e NAME` forwards into the container.
        return _launch(argv, env={**os.environ, **env}, cwd=workspace, preexec_fn=None, start_new_session=True)

    def terminate(self, env: Mapping[str, str]) -> None:
        name = self.container_name(env)
        if name is None:
            return
        with contextlib.suppress(OSError, subprocess.SubprocessError, MiddlewareConfigError):
            subprocess.run(
                [self._resolve_binary(), "kill", name],
                capture_output=True,
                timeout=self.termination_timeout,
                check=False,
            )


@dataclass(frozen=True)
class CodexSandboxExecutionPolicy(BaseExecutionPolicy):
    """Run the shell under the Codex CLI sandbox (``codex sandbox <platform> -c key=value ... -- <shell>``).

    Args:
        binary: The Codex CLI executable (looked up on PATH when the session starts).
        platform: ``"auto"`` (from ``sys.platform``), ``"linux"`` or ``"macos"``.
        config_overrides: ``-c key=value`` options passed to the sandbox (values JSON-encoded), sorted by key.
    """

    binary: str = "codex"
    platform: Literal["auto", "linux", "macos"] = "auto"
    config_overrides: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.platform not in ("auto", "linux", "macos"):
            raise _config_error(
                "CodexSandboxExecutionPolicy",
                "platform",
                f"platform must be 'auto', 'linux' or 'macos', got {self.platform!r}.",
            )
        object.__setattr__(self, "config_overrides", MappingProxyType(dict(self.config_overrides or {})))

    def _resolve_binary(self) -> str:
        found = shutil.which(self.binary)
        if found is None:
            raise UnsupportedPolicyOptionError(
                f"CodexSandboxExecutionPolicy: the {self.binary!r} CLI is not installed or not on PATH. Install the "
                f"Codex CLI or pass binary= (its path).",
                middleware="CodexSandboxExecutionPolicy",
                hook="binary",
            )
        return found

    def _determine_platform(self) -> str:
        if self.platform != "auto":
            return self.platform
        if sys.platform.startswith("linux"):
            return "linux"
        if sys.platform == "darwin":
            return "macos"
        raise UnsupportedPolicyOptionError(
            f"CodexSandboxExecutionPolicy: cannot tell the sandbox platform of {sys.platform!r}; pass "
            f"platform='linux' or 'macos'.",
            middleware="CodexSandboxExecutionPolicy",
            hook="platform",
        )

    @staticmethod
    def _format_override(value: Any) -> str:
        try:
            return json.dumps(value)
        except TypeError:
            return str(value)

    def command_line(self, *, workspace: Path, env: Mapping[str, str], command: Sequence[str]) -> list[str]:
        argv = [self.binary, "sandbox", self._determine_platform()]
        for key, value in sorted(self.config_overrides.items()):
            argv += ["-c", f"{key}={self._format_override(value)}"]
        return [*argv, "--", *command]

    def _build_command(self, command: Sequence[str]) -> list[str]:
        """:meth:`command_line` with the codex binary resolved on PATH (a clear error when it is missing)."""
        argv = self.command_line(workspace=Path("."), env={}, command=command)
        return [self._resolve_binary(), *argv[1:]]

    def spawn(self, *, workspace: Path, env: Mapping[str, str], command: Sequence[str]) -> subprocess.Popen[bytes]:
        return _launch(self._build_command(command), env=env, cwd=workspace, preexec_fn=None, start_new_session=True)
