"""Every LangGraph private API the engine uses is in middleware_kit._engine.compat, and the installed LangGraph is in
the
range it supports."""

from __future__ import annotations

import ast
import pathlib
from importlib.metadata import version

from packaging.specifiers import SpecifierSet

import middleware_kit
import middleware_kit._engine.compat as compat

PACKAGE = pathlib.Path(middleware_kit.__file__).parent


def test_installed_langgraph_is_in_the_supported_range() -> None:
    assert version("langgraph") in SpecifierSet(",".join(compat.SUPPORTED_LANGGRAPH))


def test_every_compat_name_resolves() -> None:
    for name in compat.__all__:
        assert getattr(compat, name) is not None, name


def _private_module(module: str | None) -> bool:
    """A private module of LangGraph or langchain-core (``langgraph._internal...``, ``langchain_core.tracers._x``)."""
    parts = (module or "").split(".")
    return parts[0] in ("langgraph", "langchain_core") and any(part.startswith("_") for part in parts[1:])


def test_no_engine_module_but_compat_imports_langgraph_internals() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "_engine" / "compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and _private_module(node.module):
                offenders.append(f"{path.relative_to(PACKAGE)}: from {node.module}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("__pregel_"):
                offenders.append(f"{path.relative_to(PACKAGE)}: {node.value!r}")  # a LangGraph-internal config key
            if isinstance(node, ast.Attribute) and node.attr == "_update_as_tuples":
                offenders.append(f"{path.relative_to(PACKAGE)}: ._update_as_tuples")
    assert offenders == []
