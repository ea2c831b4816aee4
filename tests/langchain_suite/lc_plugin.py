"""pytest plugin for the LangChain suite's subprocess: serve ``langchain.*`` from middleware_kit.

Loaded with ``-p lc_plugin`` (this folder on ``PYTHONPATH``; the suite's own top package is also called ``tests``, so
this file is imported by its bare name). LangChain's private names and modules (``_chain_model_call_handlers``,
``langchain.agents.middleware._retry``) are not part of middleware_kit: they are served as stand-ins that raise
:class:`PrivateLangChainAPI` when used, so a test module that imports one still collects and only the tests that
use it fail, each with a message that says so (``suite.py`` files them as "private").
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence
from typing import Any

import middleware_kit.langchain_alias as alias

PRIVATE_MARK = "LangChain private API"


class PrivateLangChainAPI(NotImplementedError):
    pass


class _Private:
    def __init__(self, where: str) -> None:
        self._where = where

    def _fail(self) -> PrivateLangChainAPI:
        return PrivateLangChainAPI(f"{PRIVATE_MARK} {self._where} is not provided by middleware_kit")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._fail()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._fail()


def _missing(module: str, name: str) -> Any:
    if name.startswith("_"):
        return _Private(f"{module}.{name}")
    raise AttributeError(f"module {module!r} (served by middleware_kit) has no attribute {name!r}")


class _PrivateModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Private(f"{self.__name__}.{name}")


class _PrivateLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _PrivateModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _PrivateFinder(importlib.abc.MetaPathFinder):
    """``langchain.…._name`` modules (and what is below them): stand-ins."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if parts[0] != "langchain" or fullname in alias.ALIASES:
            return None
        if any(part.startswith("_") for part in parts) or fullname == "langchain.chat_models.base":
            return importlib.machinery.ModuleSpec(fullname, _PrivateLoader(), is_package=True)
        return None


# LangChain's unit-test environment has langchain-openai but not langchain-anthropic (its pyproject's test group);
# ours installs both (tests/providers). Hide the latter there, as in LangChain's run, so tests written for its absence
# mean the same (deepagents, also run through this plugin, needs it).
if os.environ.get("MIDDLEWARE_KIT_LANGCHAIN_SUITE") == "1":
    sys.modules["langchain_anthropic"] = None  # type: ignore[assignment]

alias._missing = _missing
alias.install()
sys.meta_path.insert(0, _PrivateFinder())
