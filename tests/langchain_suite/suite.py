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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

VERSION = "1.5.2"
HERE = Path(__file__).resolve().parent
SUITE_PREFIX = "tests/unit_tests/agents/"
CATEGORIES = ("private", "snapshot", "difference")
MIN_PASS_RATE = 0.97
LAYOUT = 2
"""Bumped when what ``_fetch`` extracts changes (a new cache folder)."""


def cache_dir() -> Path:
    root = os.environ.get("MIDDLEWARE_KIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "middleware_kit")
    return Path(root)


def _cached(folder: Path, build: Callable[[Path], None]) -> Path:
    """``folder`` in the cache, built once per machine by ``build`` (under a file lock: safe under xdist)."""
    if (folder / ".complete").exists():
        return folder
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".complete").exists():
            build(folder)
            (folder / ".complete").touch()
    return folder


def suite_root() -> Path:
    """The extracted suite (``<root>/tests/unit_tests/agents``), fetched once per machine."""
    return _cached(cache_dir() / f"langchain-{VERSION}-suite-{LAYOUT}", _fetch)


def _fetch(root: Path) -> None:
    download = cache_dir() / "sdist"
    sdist = download / f"langchain-{VERSION}.tar.gz"
    if not sdist.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"langchain=={VERSION}", "-d", str(download)],
            check=True, capture_output=True, timeout=300,
        )
    top = f"langchain-{VERSION}/"
    wanted = (top + SUITE_PREFIX, top + "tests/cassettes/")  # the tests, and the provider traffic some replay
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(wanted) and (m.isfile() or m.isdir())]
        for member in members:
            member.name = member.name[len(top):]
        tar.extractall(root, members=members, filter="data")
    for package in ("tests", "tests/unit_tests"):
        (root / package / "__init__.py").touch()
    (root / "conftest.py").write_text(_CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")


_CONFTEST = """\
# Written by middleware_kit's harness (tests/langchain_suite/suite.py). The replay fixtures live in a conftest so that
# they take precedence over pytest-recording's defaults.
import pytest

import lc_plugin


@pytest.fixture(scope="session")
def vcr_config():
    return lc_plugin.cassette_config()


@pytest.fixture(scope="module")
def vcr_cassette_dir():
    return "tests/cassettes"
"""


def test_files(root: Path) -> list[str]:
    """The suite's test files, relative to the agents folder."""
    agents = root / SUITE_PREFIX
    return sorted(str(p.relative_to(agents)) for p in agents.rglob("test_*.py"))


@dataclass
class FileResult:
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def run_files(relpaths: list[str], root: Path | None = None) -> FileResult:
    """Run suite files in one subprocess; their tests by node id (``path::name[param]``, path relative to agents/)."""
    root = root or suite_root()
    report = root / f".report-{os.getpid()}-{abs(hash(tuple(relpaths)))}.xml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(root)]), "LANGGRAPH_TEST_FAST": "true",
           "MIDDLEWARE_KIT_LANGCHAIN_SUITE": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "lc_plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-p", "no:randomly", f"--junitxml={report}", "-o", "junit_family=xunit1", "--timeout=120",
            "--continue-on-collection-errors", *(SUITE_PREFIX + relpath for relpath in relpaths)]
    proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False)
    if not report.exists():
        output = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        raise RuntimeError(f"the LangChain suite files {relpaths} did not run:\n{output}")
    try:
        return _parse(report)
    finally:
        report.unlink()


def _parse(report: Path, relpath: str | None = None) -> FileResult:
    """A junit report as node ids: ``file::[Class::]name[param]`` with ``file`` relative to the agents folder (or
    ``relpath`` for a single file outside the suite)."""
    result = FileResult()
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        if not case.get("classname"):  # a file that failed to collect: its module path is the name
            case.set("classname", name)
            name = "<collection>"
        parts = case.get("classname", "").split(".")
        classes = [p for p in parts if p[:1].isupper()]
        modules = [p for p in parts if not p[:1].isupper()]
        path = relpath or "/".join(modules[3:]) + ".py"  # tests.unit_tests.agents.<path>
        node = "::".join([path, *classes, name])
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
    return dict(table.get("tests", {}))


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
    result = run_files(files, root=root)
    for relpath in files:
        passed = [n for n in result.passed if n.startswith(relpath + "::")]
        failed = [n for n in result.failed if n.startswith(relpath + "::")]
        skipped = [n for n in result.skipped if n.startswith(relpath + "::")]
        total_pass += len(passed)
        total_fail += len(failed)
        print(f"{relpath:70s} {len(passed):4d}/{len(passed) + len(failed):<4d} skipped {len(skipped)}", flush=True)
    for node, text in result.failed.items():
        if node not in known:
            unexpected[node] = text
    print(f"total: {total_pass}/{total_pass + total_fail} passed")
    for node, text in unexpected.items():
        first = next((line for line in text.splitlines() if line.strip()), "")
        print(f"NOT LISTED: {node}\n    {first[:300]}")
    return 0


DEEPAGENTS_VERSION = "0.7.32"


def deepagents_site() -> Path:
    """deepagents (and its two small pure-Python dependencies that our test extra lacks), installed without its
    dependencies into the cache: its ``langchain`` dependency is never installed, the redirect serves it."""

    def install(site: Path) -> None:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
             f"deepagents=={DEEPAGENTS_VERSION}", "wcmatch>=10", "bracex>=2"],
            check=True, capture_output=True, timeout=300,
        )

    return _cached(cache_dir() / f"deepagents-{DEEPAGENTS_VERSION}-site", install)


def run_deepagents_flows(tmp: Path) -> FileResult:
    """``deepagents_flows.py`` (create_deep_agent's documented flows) in a subprocess, on middleware_kit."""
    site = deepagents_site()
    report = tmp / "deepagents.xml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(site)])}
    env.pop("PYTEST_XDIST_WORKER", None)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "lc_plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
            f"--junitxml={report}", "-o", "junit_family=xunit1", "--timeout=120", "--rootdir", str(HERE),
            "-o", "asyncio_mode=auto", str(HERE / "deepagents_flows.py")]
    proc = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True, timeout=900, check=False)
    if not report.exists():
        raise RuntimeError(f"deepagents_flows.py did not run:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return _parse(report, "deepagents_flows.py")
