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
