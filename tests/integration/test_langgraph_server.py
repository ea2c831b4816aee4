"""LangGraph Server: ``langgraph.json`` serves ``deploy/agent.py``; the in-memory dev server runs an interrupt and a
resume driven through ``langgraph-sdk`` (``langgraph-cli[inmem]``, installed by the ``test`` extra; offline)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "langgraph.json"


def test_langgraph_json_serves_a_graph_without_checkpointer_with_its_context_schema() -> None:
    config = json.loads(CONFIG.read_text(encoding="utf-8"))
    assert config["graphs"] == {"agent": "./deploy/agent.py:graph"}
    assert config["dependencies"] == ["."]
    from deploy.agent import DeployContext, graph

    assert graph.checkpointer is None and graph.store is None  # the server brings its own
    assert graph.builder.context_schema is DeployContext


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cli = Path(sys.executable).with_name("langgraph")
    if not cli.exists():
        if os.environ.get("CI"):
            pytest.fail("langgraph-cli[inmem] is not installed (it is part of the 'test' extra)")
        pytest.skip("langgraph-cli[inmem] is not installed: pip install -e '.[test]'")
    port = _free_port()
    # The dev server resolves the config's paths against its cwd and writes .langgraph_api/ there: run it in a
    # scratch directory, on a copy of langgraph.json whose paths point back into the repository.
    workdir = tmp_path_factory.mktemp("langgraph-dev")
    config = json.loads(CONFIG.read_text(encoding="utf-8"))
    config["dependencies"] = [str(ROOT / d) for d in config["dependencies"]]
    config["graphs"] = {k: str(ROOT / v) for k, v in config["graphs"].items()}
    (workdir / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false", "PYTHONPATH": str(ROOT)}
    log = (workdir / "server.log").open("wb")
    proc = subprocess.Popen(
        [str(cli), "dev", "--config", str(workdir / "langgraph.json"), "--no-browser", "--no-reload",
         "--host", "127.0.0.1", "--port", str(port)],
        cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"langgraph dev did not start:\n{(workdir / 'server.log').read_text()[-3000:]}")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.timeout(150)
def test_dev_server_runs_an_interrupt_and_a_resume(server_url: str) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server_url)
    thread: Any = client.threads.create()
    tid = thread["thread_id"]
    start: Any = {"messages": [{"role": "user", "content": "weather?"}]}
    client.runs.wait(tid, "agent", input=start,
                     context={"user": "ada"})
    state: Any = client.threads.get_state(tid)
    [pending] = state["interrupts"]
    assert pending["value"]["action_requests"][0]["name"] == "get_weather"
    result: Any = client.runs.wait(tid, "agent", command={"resume": {"decisions": [{"type": "approve"}]}})
    assert result["messages"][-1]["content"] == "Weather report: sunny in Paris."
    final: Any = client.threads.get_state(tid)
    assert not final["interrupts"] and not final["next"]
    assert final["values"]["thread_model_call_count"] == 2  # middleware state is checkpointed by the server
