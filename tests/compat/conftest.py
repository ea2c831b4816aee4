"""Fixtures of the LangChain 1.5 compatibility tests."""

from tests.compat._fake_providers import fake_openai, fake_providers

__all__ = ["fake_openai", "fake_providers"]
