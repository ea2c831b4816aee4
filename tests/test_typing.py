"""User code written against the public API type-checks under ``mypy --strict``."""

from __future__ import annotations

import pathlib
import subprocess
import sys

SAMPLES = pathlib.Path(__file__).parent / "typing_samples"


def test_user_middleware_type_checks_strictly() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(SAMPLES)],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
