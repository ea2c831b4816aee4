"""Fetch LangChain's agent/middleware unit tests and run them on middleware_kit, unchanged.

The langchain sdist is downloaded with pip at test time into a cache outside the repository
(``$MIDDLEWARE_KIT_CACHE`` or ``~/.cache/middleware_kit``; never vendored, never edited), ``tests/unit_tests/agents/``
is extracted, and each test file runs in a subprocess whose ``langchain.*`` imports are served by
:mod:`middleware_kit.langchain_alias` (``lc_plugin.py``). langchain-core and LangGraph stay real.

Every test we do not pass is listed in ``deviations.toml`` with its category:

- ``private``: uses a LangChain private name (``_chain_model_call_handlers``), which middleware_kit does not have;
- ``snapshot``: compares against LangChain's stored drawings of its own graph (syrupy ``.ambr`` files);
- ``difference``: a deliberate difference, explained in ``docs/migration.md`` (``doc`` names the entry).

Run by hand: ``python -m tests.langchain_suite [FILE ...]`` prints the per-file table and the failures that are
not listed.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tarfile
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

VERSION = "1.5.2"
HERE = Path(__file__).resolve().parent
SUITE_PREFIX = "tests/unit_tests/agents/"
CATEGORIES = ("private", "snapshot", "difference")
MIN_PASS_RATE = 0.97


def cache_dir() -> Path:
    root = os.environ.get("MIDDLEWARE_KIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "middleware_kit")
    return Path(root)


def suite_root() -> Path:
    """The extracted suite (``<root>/tests/unit_tests/agents``), fetched once per machine; safe under xdist."""
    root = cache_dir() / f"langchain-{VERSION}-suite"
    if (root / ".complete").exists():
        return root
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f"langchain-{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / ".complete").exists():
            _fetch(root)
    return root


def _fetch(root: Path) -> None:
    download = cache_dir() / "sdist"
    sdist = download / f"langchain-{VERSION}.tar.gz"
    if not sdist.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"langchain=={VERSION}", "-d", str(download)],
            check=True, capture_output=True, timeout=300,
        )
    prefix = f"langchain-{VERSION}/{SUITE_PREFIX}"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and (m.isfile() or m.isdir())]
        for member in members:
            member.name = SUITE_PREFIX + member.name[len(prefix):]
        tar.extractall(root, members=members, filter="data")
    for package in ("tests", "tests/unit_tests"):
        (root / package / "__init__.py").touch()
    (root / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    (root / ".complete").touch()


def test_files(root: Path) -> list[str]:
    """The suite's test files, relative to the agents folder."""
    agents = root / SUITE_PREFIX
    return sorted(str(p.relative_to(agents)) for p in agents.rglob("test_*.py"))


@dataclass
class FileResult:
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def run_file(relpath: str, deselect: list[str] = (), root: Path | None = None) -> FileResult:  # type: ignore[assignment]
    """Run one suite file in a subprocess; its tests by node id (``path::name[param]``, path relative to agents/)."""
    root = root or suite_root()
    report = root / f".report-{os.getpid()}-{relpath.replace('/', '_')}.xml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(root)]), "LANGGRAPH_TEST_FAST": "true"}
    env.pop("PYTEST_XDIST_WORKER", None)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "lc_plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-p", "no:randomly", f"--junitxml={report}", "-o", "junit_family=xunit1", "--timeout=120",
            SUITE_PREFIX + relpath]
    for node in deselect:
        args += ["--deselect", SUITE_PREFIX + node]
    proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False)
    if not report.exists():
        raise RuntimeError(f"the LangChain suite file {relpath} did not run:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    try:
        return _parse(report, relpath)
    finally:
        report.unlink()


def _parse(report: Path, relpath: str) -> FileResult:
    result = FileResult()
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        classname = case.get("classname", "")
        cls = classname.rsplit(".", 1)[-1]
        node = f"{relpath}::{cls}::{name}" if cls.startswith("Test") else f"{relpath}::{name}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            text = (problem.get("message") or "") + "\n" + (problem.text or "")
            if node in result.failed:  # a teardown error of a test that also failed
                continue
            if node in result.passed:
                result.passed.remove(node)
            result.failed[node] = text
        elif case.find("skipped") is not None:
            result.skipped.append(node)
        else:
            result.passed.append(node)
    return result


def deviations() -> dict[str, dict[str, str]]:
    """``deviations.toml``: node id -> ``{category, why, doc?}``."""
    with open(HERE / "deviations.toml", "rb") as f:
        table = tomllib.load(f)
    return {node: entry for node, entry in table.get("tests", {}).items()}


def counts() -> dict[str, int]:
    """``deviations.toml``'s ``[counts]``: how many tests (passed or failed, not skipped) each file has."""
    with open(HERE / "deviations.toml", "rb") as f:
        return dict(tomllib.load(f).get("counts", {}))


def main(argv: list[str]) -> int:
    root = suite_root()
    files = argv or test_files(root)
    known = deviations()
    total_pass = total_fail = 0
    unexpected: dict[str, str] = {}
    for relpath in files:
        result = run_file(relpath, root=root)
        total_pass += len(result.passed)
        total_fail += len(result.failed)
        n = len(result.passed) + len(result.failed)
        print(f"{relpath:70s} {len(result.passed):4d}/{n:<4d} skipped {len(result.skipped)}", flush=True)
        for node, text in result.failed.items():
            if node not in known:
                unexpected[node] = text
    print(f"total: {total_pass}/{total_pass + total_fail} passed")
    for node, text in unexpected.items():
        first = next((line for line in text.splitlines() if line.strip()), "")
        print(f"NOT LISTED: {node}\n    {first[:300]}")
    return 0
