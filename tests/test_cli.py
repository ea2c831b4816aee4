"""``python -m middleware_kit plan MODULE:ATTR`` prints any agent's plan and graph."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "middleware_kit", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_plan_of_an_agent_and_of_a_factory(tmp_path: Path) -> None:
    (tmp_path / "my_agents.py").write_text(
        "from middleware_kit import before_model, create_agent\n"
        "from middleware_kit.testing import ScriptedChatModel\n"
        "@before_model\n"
        "def audit(state, runtime):\n"
        "    return None\n"
        "agent = create_agent(ScriptedChatModel(['hi']), middleware=[audit], name='support')\n"
        "def make():\n"
        "    return agent\n"
    )
    out = run_cli("plan", "my_agents:agent", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "middleware plan of 'support'" in out.stdout and "audit" in out.stdout
    assert "graph TD;" in out.stdout
    factory = run_cli("plan", "my_agents:make", "--no-mermaid", cwd=tmp_path)
    assert factory.returncode == 0 and "graph TD;" not in factory.stdout


def test_plan_html_writes_an_offline_page(tmp_path: Path) -> None:
    (tmp_path / "my_agents.py").write_text(
        "from middleware_kit import before_model, create_agent, wrap_model_call\n"
        "from middleware_kit.testing import ScriptedChatModel\n"
        "@before_model\n"
        "def audit(state, runtime):\n"
        "    return None\n"
        "@wrap_model_call\n"
        "def timing(request, handler):\n"
        "    return handler(request)\n"
        "agent = create_agent(ScriptedChatModel(['hi']), middleware=[audit, timing], name='support')\n"
    )
    out = run_cli("plan", "my_agents:agent", "--no-mermaid", "--html", "plan.html", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "plan.html").read_text(encoding="utf-8")
    assert "plan.html" in out.stderr and "middleware plan of 'support'" in out.stdout
    assert "audit" in page and "timing" in page and "support" in page
    assert "<script src" not in page and "http://" not in page.replace("http://www.w3.org", "")
    missing_dir = run_cli("plan", "my_agents:agent", "--html", "no/such/dir/plan.html", cwd=tmp_path)
    assert missing_dir.returncode != 0 and "cannot write" in missing_dir.stderr


def test_plan_errors_say_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "not_agents.py").write_text("value = 3\n")
    assert "expected MODULE:ATTR" in run_cli("plan", "nocolon", cwd=tmp_path).stderr
    assert "cannot import" in run_cli("plan", "missing_module:x", cwd=tmp_path).stderr
    assert "no attribute 'y'" in run_cli("plan", "not_agents:y", cwd=tmp_path).stderr
    assert "not an agent" in run_cli("plan", "not_agents:value", cwd=tmp_path).stderr


def test_demo_subcommand(tmp_path: Path) -> None:
    out = run_cli("demo", "--yes", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "checks: OK (11 events in the predicted order" in out.stdout
    assert (tmp_path / "demo-state.sqlite").is_file(), "the run is saved in ./demo-state.sqlite by default"
