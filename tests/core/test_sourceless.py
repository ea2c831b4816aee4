"""A sourceless install (``.pyc`` files only, as in a slim image or a zipapp) imports middleware_kit and runs the demo.

Nothing in middleware_kit may need its own ``.py`` files at run time: no code generated at import from source
(``inspect.getsource`` + ``compile``), no reading of the package's source text.
"""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import middleware_kit
from middleware_kit import demo

PACKAGE = Path(middleware_kit.__file__).parent


@pytest.fixture(scope="module")
def sourceless(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package with every ``.py`` compiled next to itself (``-b``: ``x.pyc``, not
    ``__pycache__/x.cpython-3N.pyc``) and then deleted."""
    root = tmp_path_factory.mktemp("sourceless")
    target = root / "middleware_kit"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    assert compileall.compile_dir(str(target), quiet=1, legacy=True), "the package does not compile"
    for source in target.rglob("*.py"):
        source.unlink()
    assert not list(target.rglob("*.py")) and (target / "__init__.pyc").exists()
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", demo.PII_KEY_ENV)}
    env["PYTHONPATH"] = str(root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [sys.executable, "-B", *args],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, env=env, cwd=root,
    )


def test_the_package_imports_from_pyc_files_only(sourceless: Path) -> None:
    code = "import middleware_kit, middleware_kit._engine.chain as c; print(middleware_kit.__file__, c.__file__)"
    out = _run(sourceless, "-c", code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(sourceless / "middleware_kit" / "__init__.pyc"),
                                  str(sourceless / "middleware_kit" / "_engine" / "chain.pyc")]


def test_the_demo_runs_from_pyc_files_only(sourceless: Path) -> None:
    out = _run(sourceless, "-m", "middleware_kit.demo", "--yes", "--db", str(sourceless / "state.sqlite"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "checks: OK" in out.stdout
