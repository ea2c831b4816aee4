"""The engine's modules import each other without cycles (lazy imports inside functions count too)."""

from __future__ import annotations

import ast
import pathlib

import middleware_kit

ROOT = pathlib.Path(middleware_kit.__file__).parent
ENGINE = [
    "_compat", "agent", "bridge", "chain", "decorators", "drive", "errors", "flow", "graph", "guards", "hooks",
    "layout", "middleware", "model_call", "pairing", "phases", "pipeline", "plan", "routing", "schema",
    "structured_output", "tool_node", "types", "testing.harness", "testing.model", "testing.recorder",
    "testing.tracebacks",
]


def imports_of(module: str) -> set[str]:
    path = ROOT / (module.replace(".", "/") + ".py")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("middleware_kit."):
            found.add(node.module.removeprefix("middleware_kit."))
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("middleware_kit.")]
            found.update(name.removeprefix("middleware_kit.") for name in names)
    return {m for m in found if m in ENGINE}


def test_no_cycles_between_engine_modules() -> None:
    graph = {m: imports_of(m) for m in ENGINE}
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        for dep in graph[module]:
            if dep in path:
                cycles.append([*path[path.index(dep) :], dep])
            elif len(path) < len(ENGINE):
                visit(dep, [*path, dep])

    for module in ENGINE:
        visit(module, [module])
    assert cycles == []


def test_the_base_class_does_not_reach_back_into_the_engine() -> None:
    assert imports_of("middleware") <= {"_compat", "flow", "hooks", "types", "drive", "errors", "bridge"}


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
        "from middleware_kit import flow\n"
        "def f():\n    import middleware_kit\n    from middleware_kit import create_agent\n",
        encoding="utf-8",
    )
    assert root_imports(module) == ["3: import middleware_kit", "4: from middleware_kit import create_agent"]


def test_every_public_name_is_served_by_the_middleware_module() -> None:
    import middleware_kit.middleware as mw_module

    assert [n for n in middleware_kit.__all__ if getattr(mw_module, n, None) is not getattr(middleware_kit, n)] == []
