"""``docs/errors.md`` lists every exception class middleware_kit defines, so a user who meets one finds it there.

The classes are discovered, not listed by hand: every module of the package (private ones included: their errors
reach users too) is imported, and every public class (a name not starting with ``_``) defined in it that subclasses
``BaseException`` must appear in ``docs/errors.md`` as a heading (``## `Name` ``) or in the first cell of a table row.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import middleware_kit

ERRORS_MD = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_.]*)`")


def _raise(name: str) -> None:
    raise ImportError(f"cannot import {name} while looking for its exception classes")


def exception_classes() -> dict[str, str]:
    """``{qualified name: class name}`` of every public exception class defined in a module of the package."""
    found: dict[str, str] = {}
    for info in pkgutil.walk_packages(middleware_kit.__path__, "middleware_kit.", onerror=_raise):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__
                    and not name.startswith("_")):
                found[f"{module.__name__}.{name}"] = name
    return found


def documented_names(text: str) -> set[str]:
    """Backquoted names in headings and in the first cell of table rows (``middleware_kit.X`` counts as ``X``)."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("#"):
            where = line
        elif line.startswith("|") and not set(line) <= set("|-: "):
            where = re.split(r"(?<!\\)\|", line.strip().strip("|"))[0]
        else:
            continue
        names.update(name.rsplit(".", 1)[-1] for name in _NAME.findall(where))
    return names


def test_discovery_finds_errors_in_every_corner_of_the_package() -> None:
    found = exception_classes()
    for qualified in ("middleware_kit.errors.MiddlewareError", "middleware_kit.testing.model.ScriptExhaustedError",
                      "middleware_kit.run_control.errors.ThreadBusyError", "middleware_kit.viz.VizError",
                      "middleware_kit.middlewares._frozen.FrozenMiddlewareError",
                      "middleware_kit._engine.phases.InterruptInFusedNodeWarning"):
        assert qualified in found, f"the walk missed {qualified}"


def test_documented_names_reads_headings_and_first_cells_only() -> None:
    text = "## `AError`\n\nprose `BError`\n\n| class | x |\n|---|---|\n| `CError`, `m.DError` | `EError` |\n"
    assert documented_names(text) == {"AError", "CError", "DError"}


def test_errors_page_lists_every_exception_class() -> None:
    documented = documented_names(ERRORS_MD.read_text(encoding="utf-8"))
    missing = sorted(f"{name} ({qualified})" for qualified, name in exception_classes().items()
                     if name not in documented)
    assert not missing, (
        "docs/errors.md has no heading or table row for: " + ", ".join(missing) + ". Add each (what raises it, its "
        "message, how to fix it) as a '## `Name`' section or a row of the table of its kind."
    )
