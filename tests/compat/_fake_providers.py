"""Fake provider packages for the compat tests: real packages written to a temporary directory on ``sys.path``, so
``"openai:gpt-4o"`` resolves through the same import path as with langchain-openai installed (nothing is mocked).
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

FAKE_OPENAI = '''
from middleware_kit.testing import ScriptedChatModel


class ChatOpenAI(ScriptedChatModel):
    """Stands in for langchain_openai.ChatOpenAI: answers "scripted <model>" forever."""

    model: str = "unset"

    def __init__(self, **kwargs):
        super().__init__([f"scripted {kwargs.get('model')}"], cycle=True, **kwargs)
'''


FAKE_ANTHROPIC = '''
from middleware_kit.testing import ScriptedChatModel


class ChatAnthropic(ScriptedChatModel):
    """Stands in for langchain_anthropic.ChatAnthropic: answers "scripted <model>" forever."""

    model: str = "unset"

    def __init__(self, **kwargs):
        super().__init__([f"scripted {kwargs.get('model')}"], cycle=True, **kwargs)
'''


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str) -> None:
    package = tmp_path / module
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delitem(sys.modules, module, raising=False)


@pytest.fixture
def fake_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``langchain_openai`` and ``langchain_anthropic`` packages with scripted chat models, for this test only."""
    _install(tmp_path, monkeypatch, "langchain_openai", FAKE_OPENAI)
    _install(tmp_path, monkeypatch, "langchain_anthropic", FAKE_ANTHROPIC)
    yield
    sys.modules.pop("langchain_openai", None)
    sys.modules.pop("langchain_anthropic", None)


@pytest.fixture
def fake_openai(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A ``langchain_openai`` package whose ``ChatOpenAI`` is a scripted model, importable for this test only."""
    package = tmp_path / "langchain_openai"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(FAKE_OPENAI))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delitem(sys.modules, "langchain_openai", raising=False)
    yield
    sys.modules.pop("langchain_openai", None)
