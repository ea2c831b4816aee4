"""No function of the package is over 60 lines, docstrings aside (issue 25): long functions are where rules get
stated twice."""

from __future__ import annotations

import ast
import pathlib

import middleware_kit

ROOT = pathlib.Path(middleware_kit.__file__).parent
LIMIT = 60


def _length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    assert node.end_lineno is not None
    first = node.body[0]
    is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    is_doc = is_doc and isinstance(first.value.value, str)  # type: ignore[attr-defined]
    start = first.end_lineno + 1 if is_doc and first.end_lineno is not None and len(node.body) > 1 else node.lineno
    return node.end_lineno - start + 1


def long_functions(root: pathlib.Path) -> dict[str, int]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (n := _length(node)) > LIMIT:
                found[f"{path.relative_to(root)}:{node.lineno} {node.name}"] = n
    return found


def test_no_function_is_over_60_lines() -> None:
    assert long_functions(ROOT) == {}


def test_the_check_counts_a_long_function(tmp_path: pathlib.Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT + 1))
    (tmp_path / "m.py").write_text(f'def f():\n    """Doc."""\n{body}\n\ndef g():\n    return 1\n', encoding="utf-8")
    assert long_functions(tmp_path) == {"m.py:1 f": LIMIT + 1}
