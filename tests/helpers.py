"""Small builders shared by tests (not fixtures: plain functions keep each test readable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from middleware_kit.testing import ScriptedChatModel, tool_call


def tool_then_answer(name: str = "add", args: dict[str, Any] | None = None, answer: str = "done") -> ScriptedChatModel:
    """A model that calls one tool, then answers (and does it again for every later run)."""
    return ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call(name, args if args is not None else {"a": 1, "b": 2})]), answer],
        cycle=True,
    )


def shared_checkpoints(kind: str, target: str) -> None:
    """Make the checkpoint database that worker processes share: ``kind`` ``"sqlite"`` (``target`` a file path: the
    saver's tables, in WAL mode so readers and a writer overlap) or ``"postgres"`` (``target`` a DSN)."""
    if kind == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(target, check_same_thread=False)
        SqliteSaver(conn).setup()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.commit()
        conn.close()
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(target) as saver:
        saver.setup()


def kinds(messages: list[BaseMessage]) -> list[str]:
    return [type(m).__name__ for m in messages]


class WorkerProcess:
    """A worker process for multi-process tests: JSON commands in on stdin, JSON answers out on stdout."""

    def __init__(self, script: Path, args: list[str], name: str) -> None:
        self.name = name
        root = Path(__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.proc = subprocess.Popen([sys.executable, str(script), *args], cwd=root, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            assert self.proc.stderr is not None
            raise AssertionError(f"worker {self.name} died ({self.proc.wait()}): {self.proc.stderr.read()[-3000:]}")
        return dict(json.loads(line))

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def ask(self, **cmd: Any) -> dict[str, Any]:
        self.send(**cmd)
        return self.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
