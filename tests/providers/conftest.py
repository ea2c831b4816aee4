"""The provider double (``double.py``) and the real provider clients pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI

from tests.providers.double import ProviderDouble


@pytest.fixture(scope="session")
def _server() -> Iterator[ProviderDouble]:
    double = ProviderDouble().start()
    yield double
    double.stop()


@pytest.fixture
def provider(_server: ProviderDouble) -> ProviderDouble:
    _server.script()
    return _server


def openai_model(provider: ProviderDouble, **kwargs: Any) -> ChatOpenAI:
    """The real ``ChatOpenAI`` against the double; the client's own retries off, so middleware decides."""
    options: dict[str, Any] = {"model": "gpt-4.1-mini", "api_key": "sk-test", "base_url": provider.url + "/v1",
                               "max_retries": 0, "stream_usage": True}
    return ChatOpenAI(**{**options, **kwargs})


def anthropic_model(provider: ProviderDouble, **kwargs: Any) -> ChatAnthropic:
    """The real ``ChatAnthropic`` against the double; the client's own retries off, so middleware decides."""
    options: dict[str, Any] = {"model": "claude-sonnet-4-6", "api_key": "sk-ant-test", "base_url": provider.url,
                               "max_retries": 0}
    return ChatAnthropic(**{**options, **kwargs})
