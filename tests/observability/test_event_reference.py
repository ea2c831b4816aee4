"""docs/observability.md lists every event a bundled middleware sends: checked against the code by reading it.

Every dict literal with an ``"event"`` key in the bundled middlewares (``middleware_kit/middlewares`` and
``middleware_kit/run_control``) is found. Its name is a string literal, or a local variable assigned string literals,
or a parameter of the helper that builds the dict, whose string arguments at every call site in the module are the
names. Anything else fails this test: write event names so they can be read.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from middleware_kit.events import LIFECYCLE_EVENTS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "middleware_kit" / "middlewares", ROOT / "middleware_kit" / "run_control")
DOC = ROOT / "docs" / "observability.md"


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _enclosing(node: ast.AST, functions: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> ast.FunctionDef | \
        ast.AsyncFunctionDef | None:
    line = getattr(node, "lineno", 0)
    around = [f for f in functions if f.lineno <= line <= (f.end_lineno or f.lineno)]
    return max(around, key=lambda f: f.lineno, default=None)


def _strings(node: ast.AST, where: str) -> set[str]:
    """The values an expression can take: a literal, or literals picked by ``a if cond else b``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _strings(node.body, where) | _strings(node.orelse, where)
    raise AssertionError(f"{where}: cannot read the event name from {ast.unparse(node)!r}; use string literals")


def _names_of(value: ast.expr, where: str, tree: ast.Module, functions: list[ast.FunctionDef | ast.AsyncFunctionDef],
              ) -> set[str]:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return {value.value}
    func = _enclosing(value, functions)
    if isinstance(value, ast.Name) and func is not None:
        assigned = [n for n in ast.walk(func) if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
        if assigned:
            return set().union(*(_strings(a.value, where) for a in assigned))
        params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
        if value.id in params:
            index = params.index(value.id) - (1 if params and params[0] == "self" else 0)
            found: set[str] = set()
            for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
                callee = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
                if callee != func.name:
                    continue
                arg = next((k.value for k in call.keywords if k.arg == value.id), None)
                if arg is None and len(call.args) > index:
                    arg = call.args[index]
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    raise AssertionError(f"{where}: {func.name}() is called with a non-literal event name")
                found.add(arg.value)
            if found:
                return found
    raise AssertionError(f"{where}: cannot read the event name {ast.unparse(value)!r}; use a string literal")


def events_in_code() -> dict[str, set[str]]:
    """event name -> the modules that send it."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            functions = _functions(tree)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Dict):
                    continue
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "event":
                        where = f"{path.relative_to(ROOT)}:{node.lineno}"
                        for name in _names_of(value, where, tree, functions):
                            found.setdefault(name, set()).add(path.stem)
    return found


def events_in_docs() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### Event reference"):]
    section = section[:section.index("\n## ")]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE)


def test_the_reference_table_lists_exactly_the_events_in_the_code() -> None:
    code, docs = events_in_code(), events_in_docs()
    assert len(docs) == len(set(docs)), "an event is listed twice"
    missing, stale = sorted(set(code) - set(docs)), sorted(set(docs) - set(code))
    assert not missing, f"events sent but not in docs/observability.md: {missing}"
    assert not stale, f"events in docs/observability.md that nothing sends: {stale}"
    assert len(code) >= 40  # the scanner sees the bundled middlewares (guards against an empty scan)


def test_the_scanner_reads_every_kind_of_event_name() -> None:
    code = events_in_code()
    assert "retry" in code and "retry_gave_up" in code  # dicts built before emit(runtime, event)
    assert {"awaiting_approval", "decisions_received", "approval_expired"} <= set(code)  # a helper's parameter
    assert {"run_cancelled", "run_deadline_exceeded"} <= set(code)  # a local assigned by a conditional


def test_framework_events_are_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name in LIFECYCLE_EVENTS:
        assert f"`{name}`" in text
