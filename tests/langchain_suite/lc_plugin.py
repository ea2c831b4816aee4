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

    def __repr__(self) -> str:  # shown when a stand-in is used as a key or an operand
        return f"<{PRIVATE_MARK} {self._where}, not provided by middleware_kit>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._fail()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # probes such as mock.patch's _is_coroutine: not there
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


# -- LangChain's recorded provider traffic (``@pytest.mark.vcr`` tests replay ``tests/cassettes/*.yaml.gz``) ----------
# LangChain reads them with langchain-tests' VCR persister; this is our own reader of the same format (gzip of YAML,
# request bodies as recorded), replay only: a request that was not recorded fails the test instead of reaching the
# network.
def cassette_config() -> dict[str, Any]:
    from vcr import VCR

    return {
        "record_mode": "none",
        "serializer": "yaml.gz",
        "match_on": ["method", "uri", "json_body"],
        "allow_playback_repeats": True,
        "decode_compressed_response": True,
        "cassette_library_dir": "tests/cassettes",
        "path_transformer": VCR.ensure_suffix(".yaml.gz"),
        "filter_headers": ["authorization", "x-api-key", "api-key"],
        "before_record_request": _as_recorded,
    }


def _as_recorded(request: Any) -> Any:
    """LangChain records requests with the address and header values redacted; a live request is matched against
    them the same way (method and JSON body decide)."""
    for key in request.headers:
        request.headers[key] = "**REDACTED**"
    request.uri = "**REDACTED**"
    return request


class _GzipYamlSerializer:
    @staticmethod
    def deserialize(data: bytes) -> dict[str, Any]:
        import gzip

        import yaml
        from vcr.request import Request

        cassette: dict[str, Any] = yaml.safe_load(gzip.decompress(data).decode("utf-8"))
        cassette["requests"] = [Request(**request) for request in cassette["requests"]]
        return cassette

    @staticmethod
    def serialize(cassette: dict[str, Any]) -> bytes:
        raise NotImplementedError("the LangChain suite replays LangChain's cassettes; it never records")


class _Persister:
    @classmethod
    def load_cassette(cls, cassette_path: Any, serializer: Any) -> tuple[list[Any], list[Any]]:
        from pathlib import Path

        from vcr.persisters.filesystem import CassetteNotFoundError

        path = Path(cassette_path)
        if not path.is_file():
            raise CassetteNotFoundError(f"Cassette file {path} does not exist.")
        cassette = serializer.deserialize(path.read_bytes())
        return cassette["requests"], cassette["responses"]

    @staticmethod
    def save_cassette(cassette_path: Any, cassette_dict: Any, serializer: Any) -> None:
        return None


def _json_body(r1: Any, r2: Any) -> None:
    import json

    def parsed(body: Any) -> Any:
        text = body.decode("utf-8") if isinstance(body, bytes) else (body or "")
        try:
            return json.loads(text)
        except ValueError:
            return text

    assert parsed(r1.body) == parsed(r2.body), "the request body differs from the one LangChain recorded"


def pytest_recording_configure(config: Any, vcr: Any) -> None:
    vcr.register_persister(_Persister())
    vcr.register_serializer("yaml.gz", _GzipYamlSerializer())
    vcr.register_matcher("json_body", _json_body)
