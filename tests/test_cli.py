"""``python -m middleware_kit plan module.path:attribute`` (or ``path/to/file.py:attribute``) prints any agent's plan
and graph; a target that cannot be loaded gives one line and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


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


def test_plan_of_a_file_path(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "helpers.py").write_text("NAME = 'from-a-file'\n")
    (app / "app.py").write_text(
        "from helpers import NAME\n"  # a neighbour of the file, imported as when the file is run as a script
        "from middleware_kit import create_agent\n"
        "from middleware_kit.testing import ScriptedChatModel\n"
        "agent = create_agent(ScriptedChatModel(['hi']), name=NAME)\n"
    )
    out = run_cli("plan", "./app/app.py:agent", "--no-mermaid", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "middleware plan of 'from-a-file'" in out.stdout
    absolute = run_cli("plan", f"{app / 'app.py'}:agent", "--no-mermaid", cwd=tmp_path)
    assert absolute.returncode == 0 and "'from-a-file'" in absolute.stdout


EXPECTED = ("expected module.path:attribute or path/to/file.py:attribute "
            "(e.g. myapp.agents:support_agent or ./app.py:agent)")


@pytest.mark.parametrize(("target", "why"), [
    ("nocolon", "it does not name an attribute after a colon"),
    ("./app.py", "it does not name an attribute after a colon"),
    ("missing_module:x", "cannot import 'missing_module': No module named 'missing_module'"),
    ("not_agents:y", "'not_agents' has no attribute 'y'"),
    ("not_agents:value", "value is of type int, not an agent built by middleware_kit.create_agent (no middleware_plan) "
                         "nor a function returning one"),
    ("not_agents:broken", "calling broken() raised RuntimeError: no model configured"),
    ("./nowhere.py:agent", "there is no file './nowhere.py'"),
    ("./not_agents.py:y", "'./not_agents.py' has no attribute 'y'"),
    ("./crashes.py:agent", "running './crashes.py' raised NameError: name 'undefined' is not defined"),
    ("crashes:agent", "importing 'crashes' raised NameError: name 'undefined' is not defined"),
])
def test_plan_errors_are_one_line_and_exit_2(tmp_path: Path, target: str, why: str) -> None:
    (tmp_path / "not_agents.py").write_text(
        "value = 3\n"
        "def broken():\n"
        "    raise RuntimeError('no model\\n  configured')\n"  # a message of two lines still gives one line
    )
    (tmp_path / "crashes.py").write_text("agent = undefined\n")
    out = run_cli("plan", target, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and len(out.stderr.splitlines()) == 1, out.stderr  # no traceback
    line = out.stderr.strip()
    assert line.startswith(f"python -m middleware_kit plan: cannot load {target!r}: {why}")
    assert line.endswith(EXPECTED)
    if "crashes" in target:  # the one line still points at the code
        assert "crashes.py:1)" in line


def test_demo_subcommand(tmp_path: Path) -> None:
    out = run_cli("demo", "--yes", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "checks: OK (11 events in the predicted order" in out.stdout
    assert (tmp_path / "demo-state.sqlite").is_file(), "the run is saved in ./demo-state.sqlite by default"
