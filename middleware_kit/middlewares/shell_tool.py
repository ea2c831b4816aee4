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
  exhaust memory. Standard error is kept too, each line prefixed ``[stderr]`` and a space.
- **Redaction** (:class:`RedactionRule`) runs on the output before the model sees it (with a margin past the
  truncation point, so a secret cut in half at the limit is still found).
- **Sessions belong to a run.** ``before_agent`` starts the run's session (and its startup commands); a private
  state key holds its id, so the session survives human-approval pauses; ``after_agent`` runs the shutdown commands,
  kills the process group and removes a temporary workspace. The middleware instance holds configuration only;
  concurrent runs and threads never share a shell.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import logging
import os
import re
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools.base import ToolException
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime

from middleware_kit.errors import MiddlewareConfigError, MiddlewareError
from middleware_kit.middleware import AgentMiddleware
from middleware_kit.middlewares._config import Config, config_error, instance_of, rule
from middleware_kit.middlewares._frozen import FrozenConfig
from middleware_kit.middlewares._pii_detectors import BUILTIN_DETECTORS
from middleware_kit.middlewares._shell_policies import (
    SESSION_ENV_VAR,
    SHELL_TEMP_PREFIX,
    BaseExecutionPolicy,
    CodexSandboxExecutionPolicy,
    DockerExecutionPolicy,
    HostExecutionPolicy,
    UnsupportedPolicyOptionError,
)
from middleware_kit.middlewares._shell_session import REDACTION_SLACK, CommandExecutionResult, ShellSession
from middleware_kit.middlewares._stream import emit
from middleware_kit.types import AgentState, PrivateStateAttr

__all__ = [
    "DEFAULT_TOOL_DESCRIPTION",
    "SESSION_ENV_VAR",
    "SHELL_TEMP_PREFIX",
    "SHELL_TOOL_NAME",
    "BaseExecutionPolicy",
    "CodexSandboxExecutionPolicy",
    "CommandExecutionResult",
    "DockerExecutionPolicy",
    "HostExecutionPolicy",
    "RedactionRule",
    "ShellEnvironmentError",
    "ShellSession",
    "ShellSessionError",
    "ShellToolMiddleware",
    "ShellToolState",
    "UnsupportedPolicyOptionError",
    "open_shell_sessions",
]

LOGGER = logging.getLogger(__name__)
SHELL_TOOL_NAME = "shell"
DEFAULT_TOOL_DESCRIPTION = (
    "Run a command in a persistent shell session (a real shell: commands have real effects). The working directory, "
    "variables and functions persist between calls. Chain steps with '&&' or ';'. Output is truncated when large, "
    "and a command that runs past the time limit is killed (the session then restarts). Pass restart=true (without "
    "a command) to start a fresh session."
)


class ShellSessionError(MiddlewareError, RuntimeError):
    """The shell session could not start (its process failed to launch, or a startup command failed)."""


class ShellEnvironmentError(MiddlewareConfigError, TypeError):
    """``env`` holds a variable name that is not a string (a ``TypeError``, as in LangChain)."""


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


# -- the sessions of runs ------------------------------------------------------------------------------------------
def _cleanup(session: ShellSession, tempdir: tempfile.TemporaryDirectory[str] | None, timeout: float) -> None:
    key = getattr(session, "id", None)
    with _SESSIONS_LOCK:
        if key is not None and key in _SESSIONS and _SESSIONS[key].session is session:
            del _SESSIONS[key]
    with contextlib.suppress(Exception):
        session.stop(timeout)
    if tempdir is not None:
        with contextlib.suppress(Exception):
            tempdir.cleanup()


@dataclass(eq=False)
class _SessionResources:
    """One run's shell: the session, its temporary workspace (None for ``workspace_root``) and the policy. Calling
    (or garbage-collecting) :attr:`finalizer` stops the session, kills its processes and removes the workspace."""

    session: ShellSession
    tempdir: tempfile.TemporaryDirectory[str] | None
    policy: BaseExecutionPolicy
    finalizer: weakref.finalize[Any, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.finalizer = weakref.finalize(
            self, _cleanup, self.session, self.tempdir, self.policy.termination_timeout
        )


_SESSIONS: dict[str, _SessionResources] = {}
_SESSIONS_LOCK = threading.Lock()
_CREATE_LOCK = threading.Lock()


def open_shell_sessions() -> tuple[str, ...]:
    """Ids of the shell sessions open in this process (every run closes its own when it ends)."""
    with _SESSIONS_LOCK:
        return tuple(_SESSIONS)


def _registered(session_id: object) -> _SessionResources | None:
    if not isinstance(session_id, str):
        return None
    with _SESSIONS_LOCK:
        return _SESSIONS.get(session_id)


def _close_session(session_id: object, shutdown: Callable[[ShellSession], None] | None = None) -> bool:
    """Close a registered session (shutdown commands first, when given). False when there was none."""
    resources = _registered(session_id)
    if resources is None:
        return False
    return _close(resources, shutdown)


def _close(resources: _SessionResources, shutdown: Callable[[ShellSession], None] | None) -> bool:
    with _SESSIONS_LOCK:
        if _SESSIONS.get(resources.session.id) is resources:
            del _SESSIONS[resources.session.id]
    if not resources.finalizer.alive:
        return False
    with resources.session.lock:
        if shutdown is not None:
            shutdown(resources.session)
        resources.finalizer()
    return True


def _abort_session(session_id: object) -> None:
    """The run was cancelled while a command may be running: kill the session's processes at once (the command's
    thread cannot be interrupted otherwise) and close the session as soon as that thread lets go of it."""
    resources = _registered(session_id)
    if resources is None:
        return
    with _SESSIONS_LOCK:
        _SESSIONS.pop(resources.session.id, None)
    resources.session.kill_now()
    threading.Thread(target=lambda: _close(resources, None), name="mk-shell-close", daemon=True).start()


@atexit.register
def _close_all_sessions() -> None:  # pragma: no cover - runs at interpreter exit
    for session_id in open_shell_sessions():
        _close_session(session_id)


# -- the middleware ------------------------------------------------------------------------------------------------
class ShellToolState(AgentState[Any]):
    """State of :class:`ShellToolMiddleware`: the id of this run's shell session (private; checkpointed, so a run
    paused for human approval finds its session again when it resumes)."""

    shell_session_id: NotRequired[Annotated[str | None, PrivateStateAttr]]


def _commands(value: Sequence[str] | str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


_COMMANDS = rule(
    lambda v: all(isinstance(c, str) and c.strip() for c in _commands(v)),
    "a command string or a sequence of non-empty command strings",
)


_POLICIES = "a HostExecutionPolicy, DockerExecutionPolicy or CodexSandboxExecutionPolicy"


def _concrete_policy(owner: str, args: Mapping[str, Any]) -> None:
    if type(args["execution_policy"]) is BaseExecutionPolicy:
        raise config_error(
            owner,
            "execution_policy",
            f"{owner}: execution_policy BaseExecutionPolicy is the base class; use HostExecutionPolicy, "
            f"DockerExecutionPolicy or CodexSandboxExecutionPolicy, or a subclass that implements spawn().",
        )


def _redaction_rules(owner: str, args: Mapping[str, Any]) -> None:
    for item in args["redaction_rules"] or ():
        if not isinstance(item, RedactionRule):
            raise config_error(owner, "redaction_rules",
                               f"{owner}: redaction_rules must hold RedactionRule instances, got {item!r}.")


def _shell_argv(shell_command: Sequence[str] | str | None, default: tuple[str, ...], owner: str) -> tuple[str, ...]:
    if shell_command is None:
        return default
    shell = (shell_command,) if isinstance(shell_command, str) else tuple(shell_command)
    if not shell:
        raise MiddlewareConfigError(
            f"{owner}: shell_command must contain at least one argument (a path or an argv), got {shell_command!r}.",
            middleware=owner,
            hook="shell_command",
        )
    if not all(isinstance(part, str) and part and "\x00" not in part for part in shell):
        raise MiddlewareConfigError(
            f"{owner}: shell_command parts must be non-empty strings without NUL characters, got {shell_command!r}.",
            middleware=owner,
            hook="shell_command",
        )
    return shell


def _shell_env(env: Mapping[str, Any] | None, owner: str, *, add_path: bool) -> Mapping[str, str] | None:
    """None: the environment is inherited when a session starts (LangChain 1.5: "the session inherits the parent
    process environment"); no copy of the host's variables (and secrets) is kept on the middleware."""
    if env is None:
        return None
    if not isinstance(env, Mapping):
        raise MiddlewareConfigError(
            f"{owner}: env must be a mapping of variable names to values, got {env!r}.", middleware=owner, hook="env"
        )
    shell_env: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str):
            raise ShellEnvironmentError(
                f"{owner}: environment variable names must be strings, got {key!r}. Fix the keys of env.",
                middleware=owner,
                hook="env",
            )
        if not key or "=" in key or "\x00" in key or "\x00" in str(value):
            raise MiddlewareConfigError(
                f"{owner}: env entry {key!r} is not a valid environment variable (names are non-empty without '='; "
                f"names and values hold no NUL character).",
                middleware=owner,
                hook="env",
            )
        shell_env[key] = str(value)
    if add_path:  # a shell on this host: commands are found as in the agent's own environment
        shell_env.setdefault("PATH", os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"))
    return MappingProxyType(shell_env)


class ShellToolMiddleware(FrozenConfig, AgentMiddleware[ShellToolState, Any]):
    """Give the agent a persistent shell tool that runs REAL commands (see the module docstring for guarantees).

    Args:
        workspace_root: The shell's working directory (created if missing). None: a temporary directory per session,
            removed when the run ends.
        startup_commands: Run, in order, when a session starts (in ``before_agent``, and again whenever the session
            restarts); each must exit 0 within ``startup_timeout``.
        shutdown_commands: Run when the session closes (at the end of the run), before its processes are killed;
            failures are logged.
        execution_policy: :class:`HostExecutionPolicy` (default), :class:`DockerExecutionPolicy` or
            :class:`CodexSandboxExecutionPolicy`: timeouts, output limits and isolation.
        redaction_rules: the :class:`RedactionRule` instances applied to every output before the model sees it.
        tool_description: The description the model sees (default :data:`DEFAULT_TOOL_DESCRIPTION`).
        tool_name: The tool's name (default ``"shell"``).
        shell_command: The shell to launch (a path or an argv); default ``/bin/bash`` (``/bin/sh`` in Docker).
        env: The shell's environment (values converted to str). None inherits the agent's environment, secrets
            included: pass an explicit mapping to keep them out (``PATH`` is added when you leave it out).
    """

    state_schema = ShellToolState
    __config__ = Config(
        execution_policy=instance_of(BaseExecutionPolicy, expected=_POLICIES).or_none(_POLICIES),
        tool_name=rule(
            lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", v) is not None,
            "1-64 letters, digits, '_' or '-'",
        ),
        workspace_root=rule(
            lambda v: v is None or "\x00" not in os.fspath(v), "a directory path without NUL characters"
        ),
        startup_commands=_COMMANDS,
        shutdown_commands=_COMMANDS,
        relations=(_concrete_policy, _redaction_rules),
    )

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
        policy = HostExecutionPolicy() if execution_policy is None else execution_policy
        rules = tuple(redaction_rules or ())
        self.workspace_root = Path(workspace_root).expanduser().absolute() if workspace_root else None
        self.startup_commands = _commands(startup_commands)
        self.shutdown_commands = _commands(shutdown_commands)
        self.policy = policy
        self.redaction_rules = rules
        self._detectors = tuple((rule, rule.resolve(owner)) for rule in rules)
        self.tool_name = tool_name
        self.tool_description = tool_description or DEFAULT_TOOL_DESCRIPTION
        self.shell_argv = _shell_argv(shell_command, policy.default_shell, owner)
        self.shell_env = _shell_env(env, owner, add_path=policy.inherits_host_environment)
        self.tools: tuple[BaseTool, ...] = (self._make_tool(),)

    @property
    def _startup_commands(self) -> tuple[str, ...]:
        """LangChain's name of :attr:`startup_commands`."""
        return self.startup_commands

    # -- lifecycle (node hooks; the engine bridges them under ainvoke) ------------------------------------------
    def before_agent(self, state: ShellToolState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Start this run's session and run the startup commands (a failing one raises :class:`ShellSessionError`).
        Called again with a state that still holds a live session (resuming), it keeps that session."""
        resources = state.get("shell_session_resources")  # set by _get_or_create_resources
        if isinstance(resources, _SessionResources) and resources.finalizer.alive:
            return {"shell_session_id": resources.session.id}
        # A run that crashed on this thread may have left its session open: close it now.
        _close_session(state.get("shell_session_id"), self._run_shutdown_commands)
        return {"shell_session_id": self._create_resources().session.id}

    async def abefore_agent(self, state: ShellToolState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """:meth:`before_agent` in a worker thread (starting a shell blocks)."""
        return await asyncio.to_thread(self.before_agent, state, runtime)

    def after_agent(self, state: ShellToolState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Run the shutdown commands, kill the session's processes and remove a temporary workspace."""
        session_id = state.get("shell_session_id")
        resources = state.get("shell_session_resources")
        if not isinstance(resources, _SessionResources):
            resources = _registered(session_id)
        if resources is not None and _close(resources, self._run_shutdown_commands):
            emit(runtime, {"event": "shell_session_closed", "middleware": self.name, "session": resources.session.id})
        return {"shell_session_id": None} if session_id else None

    async def aafter_agent(self, state: ShellToolState, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """:meth:`after_agent` in a worker thread (shutdown commands block)."""
        return await asyncio.to_thread(self.after_agent, state, runtime)

    # -- sessions --------------------------------------------------------------------------------------------------
    def _get_or_create_resources(self, state: Mapping[str, Any]) -> _SessionResources:
        """The run's session resources (LangChain's method): the live ones ``state`` holds, else the session its
        ``shell_session_id`` names, else a new session; stored in ``state["shell_session_resources"]``."""
        resources = state.get("shell_session_resources")
        if not (isinstance(resources, _SessionResources) and resources.finalizer.alive):
            resources = _registered(state.get("shell_session_id")) or self._create_resources()
        if isinstance(state, dict):
            state["shell_session_resources"] = resources
        return resources

    def _create_resources(self, session_id: str | None = None) -> _SessionResources:
        tempdir: tempfile.TemporaryDirectory[str] | None = None
        if self.workspace_root is None:
            tempdir = tempfile.TemporaryDirectory(prefix=SHELL_TEMP_PREFIX)
            workspace = Path(tempdir.name)
        else:
            workspace = self.workspace_root
            workspace.mkdir(parents=True, exist_ok=True)
        session = ShellSession(workspace, self.policy, self.shell_argv, self.shell_env, session_id=session_id)
        try:
            self._start(session)
        except BaseException:
            session.stop(self.policy.termination_timeout)
            if tempdir is not None:
                tempdir.cleanup()
            raise
        resources = _SessionResources(session=session, tempdir=tempdir, policy=self.policy)
        with _SESSIONS_LOCK:
            _SESSIONS[session.id] = resources
        return resources

    def _start(self, session: ShellSession) -> None:
        """Start the shell and run the startup commands (:class:`ShellSessionError` naming what failed)."""
        try:
            session.start()
        except (OSError, RuntimeError) as exc:
            raise ShellSessionError(
                f"{self.name}: could not start the shell {list(self.shell_argv)} with {type(self.policy).__name__}: "
                f"{exc}. Check shell_command and the execution policy.",
                middleware=self.name,
                hook="execution_policy",
            ) from exc
        for command in self.startup_commands:
            result = session.execute(command, timeout=self.policy.startup_timeout)
            if result.timed_out or result.exited or result.exit_code != 0:
                session.stop(self.policy.termination_timeout)
                how = "timed out" if result.timed_out else f"exited with {result.exit_code}"
                raise ShellSessionError(
                    f"{self.name}: Startup command {command!r} failed ({how}); output: {result.output[-500:]!r}. "
                    f"Fix startup_commands (each must succeed within startup_timeout).",
                    middleware=self.name,
                    hook="startup_commands",
                )

    def _run_shutdown_commands(self, session: ShellSession) -> None:
        for command in self.shutdown_commands:
            if not session.running:
                return
            try:
                result = session.execute(command, timeout=self.policy.command_timeout)
            except (RuntimeError, OSError) as exc:
                LOGGER.warning("Shutdown command %r failed: %s", command, exc)
                return
            if result.timed_out:
                LOGGER.warning("Shutdown command %r timed out.", command)
            elif result.exit_code != 0:
                LOGGER.warning("Shutdown command %r exited with %s.", command, result.exit_code)

    # -- the tool --------------------------------------------------------------------------------------------------
    def _make_tool(self) -> BaseTool:
        def shell(runtime: ToolRuntime, command: str | None = None, restart: bool = False) -> ToolMessage:
            """Run a command in the persistent shell session."""
            return self.run_tool(command, restart=restart, runtime=runtime)

        async def ashell(runtime: ToolRuntime, command: str | None = None, restart: bool = False) -> ToolMessage:
            """Run a command in the persistent shell session."""
            return await self.arun_tool(command, restart=restart, runtime=runtime)

        return StructuredTool.from_function(
            func=shell, coroutine=ashell, name=self.tool_name, description=self.tool_description
        )

    async def arun_tool(self, command: str | None, *, restart: bool, runtime: ToolRuntime) -> ToolMessage:
        """:meth:`run_tool` in a worker thread. If the run is cancelled meanwhile (``ainvoke`` cancelled, a timeout
        around it), the session's processes are killed at once and the session is closed: nothing keeps running."""
        try:
            return await asyncio.to_thread(self.run_tool, command, restart=restart, runtime=runtime)
        except asyncio.CancelledError:
            state = runtime.state if isinstance(runtime.state, Mapping) else {}
            _abort_session(state.get("shell_session_id"))
            raise

    def run_tool(self, command: str | None, *, restart: bool, runtime: ToolRuntime) -> ToolMessage:
        """What the shell tool does for one call, in the session of the run (``runtime.state``)."""
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
        has_command = isinstance(command, str) and bool(command.strip())
        if restart and has_command:
            return self._message("Error: Specify only one of 'command' or 'restart'.", call_id, "error")
        resources = _registered(session_id)
        if resources is None:  # resumed in another process, or after the session was lost: a new one, same id
            with _CREATE_LOCK:  # parallel calls of the run must not start two
                resources = _registered(session_id) or self._create_resources(session_id)
        try:
            answer = self._run_shell_tool(
                resources, {"command": command, "restart": restart}, tool_call_id=call_id, runtime=runtime
            )
            assert isinstance(answer, ToolMessage)  # a tool call id was given
            return answer
        except ToolException as exc:
            return self._message(f"Error: {exc}", call_id, "error")
        except Exception:
            _close_session(session_id)  # the run fails: leave nothing behind
            raise

    def _run_shell_tool(
        self,
        resources: _SessionResources,
        payload: Mapping[str, Any],
        *,
        tool_call_id: str | None,
        runtime: Any = None,
    ) -> ToolMessage | str:
        """Run one tool call in ``resources``' session (LangChain's method). Returns the ``ToolMessage``, or its
        content when ``tool_call_id`` is None; raises ``ToolException`` for a call without a command."""
        session = resources.session
        with session.lock:
            if payload.get("restart"):
                try:
                    session.stop(self.policy.termination_timeout)
                    self._start(session)
                except (ShellSessionError, OSError, RuntimeError) as exc:
                    raise ToolException(f"Failed to restart shell session: {exc}") from exc
                emit(runtime, {"event": "shell_restarted", "middleware": self.name, "session": session.id})
                return self._result("Shell session restarted.", tool_call_id, "success")
            command = payload.get("command")
            if not isinstance(command, str) or not command.strip():
                raise ToolException("Shell tool expects a 'command' string when restart is not requested.")
            if not session.running:  # after `exit` or a timeout: a fresh shell, startup commands included
                self._start(session)
            result = session.execute(command, timeout=self.policy.command_timeout, extra_bytes=REDACTION_SLACK)
        return self._report(result, tool_call_id, runtime, session.id)

    def _report(
        self, result: CommandExecutionResult, call_id: str | None, runtime: Any, session_id: str
    ) -> ToolMessage | str:
        text, blocked, matches = self._redact(result.output)
        text, cut = _cut(text, self.policy.output_byte_limit)
        by_bytes = result.truncated_by_bytes or cut
        emit(runtime, {
            "event": "shell_command", "middleware": self.name, "session": session_id, "exit_code": result.exit_code,
            "timed_out": result.timed_out, "truncated": result.truncated_by_lines or by_bytes,
            "redacted": blocked is not None or bool(matches),
        })
        artifact: dict[str, Any] = {
            "timed_out": result.timed_out, "exit_code": result.exit_code,
            "truncated_by_lines": result.truncated_by_lines, "truncated_by_bytes": by_bytes,
            "total_lines": result.total_lines, "total_bytes": result.total_bytes, "redaction_matches": matches,
        }
        if blocked is not None:
            content = f"Output blocked: detected {blocked} (redaction strategy 'block'); the output was withheld."
            return self._result(content, call_id, "error", artifact)
        notes = []
        if result.truncated_by_lines:
            notes.append(
                f"... Output truncated at {self.policy.max_output_lines} lines (observed {result.total_lines})."
            )
        if by_bytes:
            notes.append(
                f"... Output truncated at {self.policy.output_byte_limit} bytes (observed {result.total_bytes})."
            )
        if result.timed_out:
            notes.append(
                f"Error: Command timed out after {self.policy.command_timeout:.1f} seconds. It was killed with all "
                f"its processes; the shell session restarts for the next command (working directory and variables "
                f"are reset)."
            )
        elif result.exited:
            notes.append("The shell session exited; the next command starts a new session.")
        if not result.timed_out and result.exit_code not in (0, None):
            notes.append(f"Exit code: {result.exit_code}")
        content = "\n\n".join([text.rstrip() or "<no output>", *notes])
        failed = result.timed_out or result.exit_code not in (0, None)
        return self._result(content, call_id, "error" if failed else "success", artifact)

    def _redact(self, text: str) -> tuple[str, str | None, dict[str, int]]:
        """The text with every rule applied, the type of a ``block`` rule that matched, and match counts per type
        (counts only: the matched values never leave this function)."""
        counts: dict[str, int] = {}
        for redaction, detect in self._detectors:
            spans = sorted(detect(text))
            if not spans:
                continue
            if redaction.strategy == "block":
                return "", redaction.pii_type, {**counts, redaction.pii_type: len(spans)}
            counts[redaction.pii_type] = counts.get(redaction.pii_type, 0) + len(spans)
            parts, pos = [], 0
            for start, end in spans:
                if start < pos:
                    continue
                parts += [text[pos:start], redaction.replacement(text[start:end])]
                pos = end
            text = "".join([*parts, text[pos:]])
        return text, None, counts

    def _message(
        self, content: str, call_id: str, status: Literal["success", "error"], artifact: dict[str, Any] | None = None
    ) -> ToolMessage:
        return ToolMessage(content=content, tool_call_id=call_id, name=self.tool_name, status=status,
                           artifact=artifact or {})

    def _result(
        self,
        content: str,
        call_id: str | None,
        status: Literal["success", "error"],
        artifact: dict[str, Any] | None = None,
    ) -> ToolMessage | str:
        """The ``ToolMessage``; only its content when there is no tool call (LangChain's direct calls)."""
        return content if call_id is None else self._message(content, call_id, status, artifact)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode()
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", errors="ignore"), True
