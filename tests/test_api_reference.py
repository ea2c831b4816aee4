"""The API reference: the docs site (``docs/``, Sphinx + autodoc + MyST) builds with no warning, and documents every
public name.

Built into a temporary directory exactly as by hand (``docs/conf.py`` says how): about 20 s.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import zlib
from pathlib import Path
from types import ModuleType

import pytest

import middleware_kit
import middleware_kit.ledger
import middleware_kit.middlewares
import middleware_kit.run_control
import middleware_kit.testing

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

PUBLIC_PACKAGES: tuple[ModuleType, ...] = (
    middleware_kit,
    middleware_kit.middlewares,
    middleware_kit.run_control,
    middleware_kit.ledger,
    middleware_kit.testing,
)
"""Whose ``__all__`` the reference must cover."""


def build_site(out: Path) -> None:
    """The docs site, built as by hand; fails the test on any warning."""
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if build.returncode != 0 or build.stderr.strip():
        pytest.fail(f"the docs build failed or warned (exit {build.returncode}):\n{build.stderr}")


_ENTRY = re.compile(r"(?x)(.+?)\s+(\S+):(\S+)\s+(-?\d+)\s+(\S*)\s+(.*)")
"""A line of ``objects.inv`` (format 2): ``name domain:role priority uri display-name``."""


def documented(site: Path) -> dict[str, str]:
    """Every Python object of the site's inventory (``objects.inv``): full name -> page."""
    raw = (site / "objects.inv").read_bytes()
    header, _, rest = raw.partition(b"zlib.\n")
    assert header.startswith(b"# Sphinx inventory version 2"), header
    found = {}
    for line in zlib.decompress(rest).decode("utf-8").splitlines():
        entry = _ENTRY.fullmatch(line)
        if entry is not None and entry.group(2) == "py":
            found[entry.group(1)] = entry.group(5)
    return found


def resolve(dotted: str) -> object:
    """The object a documented name stands for (its longest importable module, then attributes)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise LookupError(dotted)


def undocumented(names: dict[str, str], package: ModuleType) -> list[str]:
    """Names of ``package.__all__`` the reference lacks: none documented under a name that resolves to the same
    object (where the reference documents it, e.g. ``middleware_kit.errors.HookReturnError`` for
    ``middleware_kit.HookReturnError``)."""
    by_last: dict[str, list[str]] = {}
    for full in names:
        by_last.setdefault(full.rsplit(".", 1)[-1], []).append(full)
    return [
        f"{package.__name__}.{name}"
        for name in package.__all__
        if not any(resolve(full) is getattr(package, name) for full in by_last.get(name, ()))
    ]


def test_the_reference_builds_without_a_warning_and_documents_every_public_name(tmp_path: Path) -> None:
    """One build (about 20 s), then what it must hold. One test, so parallel runs do not build it several times."""
    build_site(tmp_path)
    assert (tmp_path / "api" / "index.html").is_file()
    assert 'href="api/index.html"' in (tmp_path / "index.html").read_text(encoding="utf-8"), (
        "docs/index.md must link to the API reference"
    )
    names = documented(tmp_path)
    missing = [name for package in PUBLIC_PACKAGES for name in undocumented(names, package)]
    assert not missing, f"public names missing from the API reference: {missing}; add them to a page of docs/api/"
    # classes come with their methods and fields, functions with their page
    for member in ("middleware_kit.middleware.AgentMiddleware.wrap_model_call",
                   "middleware_kit.middleware.AgentMiddleware.awrap_model_call",
                   "middleware_kit.types.ModelRequest.override"):
        assert member in names, member
    assert names["middleware_kit.agent.create_agent"].startswith("api/agent.html")


# -- docs/architecture.md lists every bundled middleware ------------------------------------------------------------
def bundled_middleware_rows() -> list[str]:
    """The rows of the bundled-middleware table of ``docs/architecture.md``, computed from the code."""
    from middleware_kit.hooks import HookMode
    from middleware_kit.middleware import AgentMiddleware, class_hooks

    rows = []
    for name in middleware_kit.middlewares.__all__:
        cls = getattr(middleware_kit.middlewares, name)
        if not (isinstance(cls, type) and issubclass(cls, AgentMiddleware)):
            continue
        hooks = [
            f"`{slot.hook}`" + (" (flow)" if slot.mode is HookMode.FLOW else "")
            + (" (may interrupt)" if slot.may_interrupt else "")
            for slot in class_hooks(cls).slots or ()
        ]
        guards = ("guard_messages", "guard_resume")
        hooks += [f"`{g}`" for g in guards if getattr(cls, g) is not getattr(AgentMiddleware, g)]
        module = cls.__module__.split(".")[2]
        rows.append(f"| `{module}` | `{name}` | {', '.join(hooks) or '(tools only)'} |")
    return sorted(rows)


def test_the_architecture_page_lists_every_bundled_middleware_and_its_hooks() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if re.match(r"\| `[a-z_]+` \| `[A-Za-z]+` \| ", line)]
    expected = bundled_middleware_rows()
    assert table == expected, (
        "the bundled-middleware table of docs/architecture.md is stale; today's rows:\n" + "\n".join(expected)
    )
