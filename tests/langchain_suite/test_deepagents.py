"""deepagents runs on middleware_kit: its documented flows (``deepagents_flows.py``), in a subprocess whose
``langchain.*`` imports are served by :mod:`middleware_kit.langchain_alias`. deepagents is installed at test time
without its dependencies into the cache (``suite.deepagents_site``): the real ``langchain`` is never installed."""

from __future__ import annotations

from pathlib import Path

from tests.langchain_suite import suite


def test_deepagents_flows(tmp_path: Path) -> None:
    result = suite.run_deepagents_flows(tmp_path)
    failures = "\n\n".join(f"{node}\n{text[:2000]}" for node, text in result.failed.items())
    assert not result.failed, f"deepagents flows that fail on middleware_kit:\n{failures}"
    assert len(result.passed) == 11, result.passed
