"""The package's modules import each other without cycles (lazy imports inside functions count too), and the engine
(``middleware_kit._engine``) sits below the public modules. Every module is discovered on disk: a new module is checked
the day it is added."""

from __future__ import annotations

import ast
import pathlib

import middleware_kit

ROOT = pathlib.Path(middleware_kit.__file__).parent


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(ROOT.rglob("*.py")) if path != ROOT / "__init__.py"}
"""Every module of the package but its root (``middleware_kit/__init__.py`` only re-exports; see below)."""

ENGINE = sorted(m for m in MODULES if m == "_engine" or m.startswith("_engine."))

FOUNDATION = {
    "errors": "every error class, raised at every layer",
    "types": "the frozen value types hooks receive and return",
    "events": "the lifecycle event names and payloads the engine emits",
    "trace_policy": "what a trace may record, read when the engine records",
    "agent_defaults": "the defaults an agent is built with, read by the node runner",
    "middleware": "the base class whose hooks the pipeline collects",
    "middlewares._frozen": "the check that a middleware instance is not mutated per call",
    "hooks": "the hook contract (one spec per hook, the handler types) the pipeline compiles",
    "flow": "the flow-hook protocol (``yield request``, ``Sleep``) the chain drives",
    "structured_output": "the response-format strategies the model node and the router apply",
    "ledger.call": "the exactly-once wrapper the tool node puts innermost",
    "ledger.policy": "the ledger's configuration value",
}
"""The public modules the engine may import, each with the reason. Everything else public is built on the engine and
must not be imported by it."""


def imports_of(module: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("middleware_kit."):
            base = node.module.removeprefix("middleware_kit.")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("middleware_kit.")]
            found.update(name.removeprefix("middleware_kit.") for name in names)
    return {m for m in found if m in MODULES and m != module}


def test_the_modules_are_discovered() -> None:
    assert {"_engine.chain", "_engine.graph", "agent", "ledger.store", "middlewares.pii"} <= MODULES.keys()
    assert len(ENGINE) >= 20


def test_no_import_cycles_in_the_package() -> None:
    graph = {m: imports_of(m) for m in MODULES}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[module] = 2

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_engine_imports_only_the_foundation_of_the_public_modules() -> None:
    offenders = {
        module: sorted(outside)
        for module in ENGINE
        if (outside := {m for m in imports_of(module) if not m.startswith("_engine") and m not in FOUNDATION})
    }
    assert offenders == {}


def test_the_base_class_does_not_reach_back_into_the_engine() -> None:
    allowed = {
        "_engine",
        "_engine.compat",
        "flow",
        "hooks",
        "types",
        "_engine.drive",
        "errors",
        "trace_policy",
        "_engine.bridge",
    }
    assert imports_of("middleware") <= allowed


USER_LEVEL = {"demo.py": "the demo app imports the public API the way a user's app does"}
"""Modules written as users of the package; the package imports them only on demand (never the engine)."""


def root_imports(path: pathlib.Path) -> list[str]:
    """The lines of ``path`` that import the package root itself (``import middleware_kit``, or
    ``from middleware_kit import name`` for a name that is not a submodule)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name == "middleware_kit"]
        elif isinstance(node, ast.ImportFrom) and node.module == "middleware_kit" and node.level == 0:
            found += [
                f"{node.lineno}: from middleware_kit import {a.name}"
                for a in node.names
                if not (ROOT / a.name).is_dir() and not (ROOT / f"{a.name}.py").is_file()
            ]
    return found


def test_no_module_imports_the_package_root() -> None:
    """The root re-exports; it is never a dependency (not even lazily, inside a function): no cycle through it."""
    offenders = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(ROOT.rglob("*.py"))
        if path != ROOT / "__init__.py"
        and str(path.relative_to(ROOT)) not in USER_LEVEL
        and (lines := root_imports(path))
    }
    assert offenders == {}


def test_the_check_finds_a_root_import(tmp_path: pathlib.Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from middleware_kit import agent\n"
        "def f():\n    import middleware_kit\n    from middleware_kit import create_agent\n",
        encoding="utf-8",
    )
    assert root_imports(module) == ["3: import middleware_kit", "4: from middleware_kit import create_agent"]


def test_every_public_name_is_served_by_the_middleware_module() -> None:
    import middleware_kit.middleware as mw_module

    assert [n for n in middleware_kit.__all__ if getattr(mw_module, n, None) is not getattr(middleware_kit, n)] == []
