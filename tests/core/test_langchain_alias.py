"""``middleware_kit.langchain_alias``: ``langchain.agents*`` imports served by middleware_kit, and undone."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest

import middleware_kit
from middleware_kit import langchain_alias
from middleware_kit._engine import internal_calls
from middleware_kit.middlewares import summarization


@pytest.fixture
def undo() -> Iterator[Callable[[], None]]:
    if langchain_alias.installed():  # pragma: no cover - another test left it installed
        pytest.skip("langchain_alias is already installed in this process")
    undo = langchain_alias.install()
    try:
        yield undo
    finally:
        undo()


def test_served_names_are_middleware_kits_and_undo_restores_the_import_system(undo: Callable[[], None]) -> None:
    agents = importlib.import_module("langchain.agents")
    mw_module = importlib.import_module("langchain.agents.middleware")
    assert agents.create_agent is middleware_kit.create_agent
    assert mw_module.AgentMiddleware is middleware_kit.AgentMiddleware
    assert langchain_alias.installed() and langchain_alias.install()() is None  # a second install is a no-op
    assert langchain_alias.installed()
    undo()
    assert not langchain_alias.installed()
    assert not [name for name in sys.modules if name.split(".")[0] == "langchain"]


def test_the_internal_call_module_is_served(undo: Callable[[], None]) -> None:
    module: Any = importlib.import_module("langchain.agents.middleware.internal_call_transformer")
    assert module.InternalCallTransformer is internal_calls.InternalCallTransformer
    assert module.internal_call_metadata() == internal_calls.internal_call_metadata()
    assert module.INTERNAL_CALL_METADATA_KEY == "lc_internal_call"


def test_patching_through_an_alias_patches_our_module(undo: Callable[[], None]) -> None:
    original = summarization.count_tokens_approximately
    fake = mock.Mock(return_value=1)
    with mock.patch("langchain.agents.middleware.summarization.count_tokens_approximately", fake):
        assert summarization.count_tokens_approximately is fake
    assert summarization.count_tokens_approximately is original


def test_an_unserved_name_is_a_clear_module_not_found_error(undo: Callable[[], None]) -> None:
    with pytest.raises(ModuleNotFoundError, match=r"'langchain\.agents\.nowhere' is not served") as info:
        importlib.import_module("langchain.agents.nowhere")
    assert info.value.name == "langchain.agents.nowhere"
    assert "middleware_kit.langchain_alias.ALIASES" in str(info.value)
