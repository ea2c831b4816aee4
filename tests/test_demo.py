"""The README's main-job command: the demo runs offline and checks itself."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_offline_and_both_modes_agree() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "middleware_kit.demo", "--mermaid"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "first listed = outermost" in out.stdout
    assert "same 14 hooks in the same order: yes" in out.stdout
    assert "In Paris it is 18°C, light rain." in out.stdout
    assert "graph TD;" in out.stdout
