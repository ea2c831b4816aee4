"""The live shell behind :class:`~middleware_kit.middlewares.shell_tool.ShellToolMiddleware`: :class:`ShellSession`
(public through ``middleware_kit.middlewares.shell_tool``, LangChain 1.5's name and constructor)."""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from middleware_kit.middlewares._shell_policies import SESSION_ENV_VAR, BaseExecutionPolicy

__all__ = ["CommandExecutionResult", "ShellSession"]

LOGGER = logging.getLogger("middleware_kit.middlewares.shell_tool")
REDACTION_SLACK = 1024
"""Bytes captured past the limit so that redaction sees a secret cut by the truncation."""
_READ_CHUNK = 65536


@dataclass(frozen=True)
class CommandExecutionResult:
    """What one command produced. ``output`` holds stdout and stderr (stderr lines prefixed ``[stderr] ``), bounded
    by the policy's limits; ``total_lines``/``total_bytes`` count everything the command printed."""

    output: str
    exit_code: int | None
    timed_out: bool
    truncated_by_lines: bool
    truncated_by_bytes: bool
    total_lines: int
    total_bytes: int
    exited: bool = False
    """The shell itself exited (``exit``): the session must be started again."""


@dataclass
class _Capture:
    """Bounded output of one command: lines are kept up to the limits, the rest is counted and dropped."""

    max_lines: int
    max_bytes: int
    parts: list[str] = field(default_factory=list)
    lines: int = 0
    size: int = 0
    total_lines: int = 0
    total_bytes: int = 0
    cut_lines: bool = False
    cut_bytes: bool = False
    open_lines: set[str] = field(default_factory=set)
    """Streams whose last piece ended mid-line (its next piece continues that line)."""

    def feed(self, data: bytes, source: str) -> None:
        """Lines of one stream, in order (a piece may end mid-line: the next one continues it)."""
        if not data:
            return
        self.total_bytes += len(data)
        started = data.count(b"\n") + (0 if data.endswith(b"\n") else 1) - (1 if source in self.open_lines else 0)
        self.total_lines += started
        if data.endswith(b"\n"):
            self.open_lines.discard(source)
        else:
            self.open_lines.add(source)
        if self.lines >= self.max_lines:
            self.cut_lines = True
            return
        for line in data.splitlines(keepends=True):
            if self.lines >= self.max_lines:
                self.cut_lines = True
                return
            room = self.max_bytes - self.size
            if room <= 0:
                self.cut_bytes = True
                return
            kept = line[:room]
            self.cut_bytes |= len(kept) < len(line)
            self.size += len(kept)
            self.lines += 1
            text = kept.decode("utf-8", errors="replace")
            self.parts.append(f"[stderr] {text}" if source == "stderr" else text)

    def text(self) -> str:
        # NUL cannot be stored by some checkpointers (PostgreSQL text/jsonb): shown as U+FFFD like undecodable bytes.
        return "".join(self.parts).rstrip("\n").replace("\x00", "\ufffd")


class _Stream:
    """One output pipe of the shell, read up to the command's end marker."""

    def __init__(self, fd: int, source: str, marker: bytes) -> None:
        self.fd, self.source, self.marker = fd, source, marker
        self.pending = b""
        self.done = False
        self.exit_code: int | None = None
        self.last_blank = False

    def take(self, chunk: bytes, capture: _Capture) -> None:
        data = self.pending + chunk
        if capture.lines >= capture.max_lines and self.marker not in data:
            self._drop(data, capture)
            return
        while not self.done:
            newline = data.find(b"\n")
            if newline < 0:
                break
            line, data = data[: newline + 1], data[newline + 1 :]
            if line.startswith(self.marker):
                code = line[len(self.marker) :].strip()
                self.exit_code = int(code) if code.lstrip(b"-").isdigit() else None
                self.done = True
                return
            if self.last_blank:
                capture.feed(b"\n", self.source)
            # The marker is printed after a newline (it must start a line): that one blank line is not output.
            self.last_blank = line == b"\n"
            if not self.last_blank:
                capture.feed(line, self.source)
        if len(data) > _READ_CHUNK:  # a very long line: the marker line is short, so this is output
            capture.feed(data, self.source)
            data = b""
        self.pending = data

    def _drop(self, data: bytes, capture: _Capture) -> None:
        """Flood fast path (the capture is full): count and drop whole lines, but hold back what may still belong to
        the end marker: a last blank line (printed before the marker) and a short unfinished tail."""
        if self.last_blank:
            data, self.last_blank = b"\n" + data, False
        end = data.rfind(b"\n") + 1
        body, tail = data[:end], data[end:]
        if len(tail) > len(self.marker) + 32:  # too long to start the marker: all of it is output
            capture.feed(data, self.source)
            self.pending = b""
            return
        held = b""
        if body == b"\n" or body.endswith(b"\n\n"):
            body, held = body[:-1], b"\n"
        capture.feed(body, self.source)
        self.pending = held + tail

    def flush(self, capture: _Capture) -> None:
        if self.pending:
            capture.feed(self.pending, self.source)
            self.pending = b""


class ShellSession:
    """A persistent shell: commands run one at a time in the same process (working directory and variables persist).

    ``environment`` None inherits the agent's environment when the shell starts (only for policies that run on this
    host). Every command runs through ``eval`` of a quoted copy, so a syntax error or an unclosed quote fails that
    command alone; a command that outlives its timeout is killed with every process of the shell's process group and
    the processes that left it (found by :data:`SESSION_ENV_VAR`), and the session must be started again.
    """

    def __init__(
        self,
        workspace: Path,
        policy: BaseExecutionPolicy,
        command: tuple[str, ...],
        environment: Mapping[str, str] | None = None,
        *,
        session_id: str | None = None,
    ) -> None:
        self.id = session_id or uuid.uuid4().hex
        self._workspace = Path(workspace)
        self._policy = policy
        self._command = tuple(command)
        self._environment = None if environment is None else dict(environment)
        self._process: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        """Held by the command that runs; parallel tool calls of one run wait for each other."""

    @property
    def workspace(self) -> Path:
        return self._workspace

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _env(self) -> dict[str, str]:
        if self._environment is not None:
            env = dict(self._environment)
        elif self._policy.inherits_host_environment:
            env = dict(os.environ)  # read when the shell starts: nothing of the host is kept on the middleware
        else:
            env = {}
        env[SESSION_ENV_VAR] = self.id
        return env

    def start(self) -> None:
        """Start the shell (nothing happens when it runs already)."""
        if self.running:
            return
        self._discard()
        self._process = self._policy.spawn(workspace=self._workspace, env=self._env(), command=self._command)

    def restart(self) -> None:
        self.stop(self._policy.termination_timeout)
        self.start()

    def stop(self, timeout: float) -> None:
        """Close the shell's input, give it ``timeout`` seconds to exit, then kill everything it started."""
        process = self._process
        if process is None:
            return
        if process.poll() is None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=min(timeout, 2.0))
        self._discard()

    def _discard(self) -> None:
        """Kill the process group (background jobs must not outlive the session) and the escaped processes."""
        process = self._process
        if process is None:
            return
        self.kill_now()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        for stream in (process.stdin, process.stdout, process.stderr):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        self._process = None

    def kill_now(self) -> None:
        """Kill the shell's processes at once, without waiting for the command that holds :attr:`lock` (used when
        the run is cancelled: that command then reads end-of-file and returns)."""
        self._kill_process()
        self._policy.terminate(self._env())
        _kill_escaped(self.id)

    def _kill_process(self) -> None:
        """SIGKILL the shell's process group when it has its own, else the shell alone (never the caller's group)."""
        process = self._process
        if process is None:
            return
        if hasattr(os, "killpg"):
            try:
                group = os.getpgid(process.pid)
                if group != os.getpgrp():
                    os.killpg(group, signal.SIGKILL)
                    return
            except ProcessLookupError:
                return
            except OSError:
                LOGGER.warning("Group kill failed; falling back to direct kill.", exc_info=True)
        try:
            process.kill()
        except ProcessLookupError:
            pass
        except OSError:
            LOGGER.warning("Direct kill failed.", exc_info=True)

    def execute(self, command: str, *, timeout: float, extra_bytes: int = 0) -> CommandExecutionResult:
        """Run one command (the shell must be running: :meth:`start`). On timeout the shell is killed and stopped.
        ``extra_bytes`` more than ``max_output_bytes`` are kept (the middleware redacts before it cuts)."""
        process = self._process
        if process is None or process.poll() is not None:
            raise RuntimeError("Shell session is not running; call start() first.")
        marker = f"__MK_SHELL_DONE_{uuid.uuid4().hex}__"
        # eval of a single-quoted copy: a syntax error, an unclosed quote or heredoc, a trailing backslash or a stray
        # '}' stays inside this one command (eval fails with status 2) instead of swallowing the marker line.
        quoted = "'" + command.replace("'", "'\\''") + "'"
        script = (
            f"{{ eval {quoted}\n}} </dev/null\n__mk_status=$?\n"
            f"printf '\\n{marker} %s\\n' \"$__mk_status\"\nprintf '\\n{marker}\\n' >&2\n"
        )
        policy = self._policy
        capture = _Capture(policy.max_output_lines, policy.output_byte_limit + extra_bytes)
        exit_code, timed_out, exited = self._collect(process, script.encode(), marker.encode(), capture,
                                                     time.monotonic() + timeout)
        if timed_out:
            LOGGER.warning("Command timed out after %.2f seconds; the shell session was killed.", timeout)
            self._discard()
        return CommandExecutionResult(
            output=capture.text(),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated_by_lines=capture.cut_lines,
            truncated_by_bytes=capture.cut_bytes or capture.total_bytes > policy.output_byte_limit,
            total_lines=capture.total_lines,
            total_bytes=capture.total_bytes,
            exited=exited,
        )

    @staticmethod
    def _collect(
        process: subprocess.Popen[bytes], script: bytes, marker: bytes, capture: _Capture, deadline: float
    ) -> tuple[int | None, bool, bool]:
        """Write ``script`` and read stdout and stderr until both markers, the deadline or EOF, in one select loop:
        the script is written as the shell takes it (non-blocking), so a huge command cannot deadlock against its
        own output, and the deadline covers writing too."""
        assert process.stdout is not None and process.stdin is not None and process.stderr is not None
        streams = {fd: _Stream(fd, src, marker) for fd, src in
                   ((process.stdout.fileno(), "stdout"), (process.stderr.fileno(), "stderr"))}
        in_fd = process.stdin.fileno()
        os.set_blocking(in_fd, False)
        unsent = memoryview(script)
        with selectors.DefaultSelector() as selector:
            for fd in streams:
                selector.register(fd, selectors.EVENT_READ)
            selector.register(in_fd, selectors.EVENT_WRITE)
            while not all(s.done for s in streams.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return ShellSession._end(streams, capture, None, timed_out=True)
                for key, _ in selector.select(remaining):
                    if key.fd == in_fd:
                        try:
                            unsent = unsent[os.write(in_fd, unsent[:_READ_CHUNK]) :]
                        except BlockingIOError:
                            continue
                        except OSError:  # the shell is gone (exit)
                            return ShellSession._end(streams, capture, process, timed_out=False)
                        if not unsent:
                            selector.unregister(in_fd)
                        continue
                    stream = streams[key.fd]
                    chunk = os.read(key.fd, _READ_CHUNK)
                    if not chunk:
                        return ShellSession._end(streams, capture, process, timed_out=False)
                    stream.take(chunk, capture)
                    if stream.done:
                        selector.unregister(key.fd)
        return streams[process.stdout.fileno()].exit_code, False, False

    @staticmethod
    def _end(
        streams: dict[int, _Stream], capture: _Capture, process: subprocess.Popen[bytes] | None, *, timed_out: bool
    ) -> tuple[int | None, bool, bool]:
        for stream in streams.values():
            stream.flush(capture)
        if process is None:
            return None, timed_out, False
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=1)
        return process.poll(), False, True


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

