"""The docs are tested, so they cannot drift from the code.

- Each ```python block of every ``.md`` file under ``docs/`` (and of ``README.md``, if present) runs in a fresh
  namespace. A block whose first line is ``# raises: ErrorName`` must raise exactly that error (by class name); if
  the next block is a ```text block starting with ``ErrorName: ``, it must be the exact message.
- ``docs/concepts/hooks.md`` and ``docs/concepts/onion.md`` list every hook of ``HOOKS`` with its order (and
  hooks.md quotes each hook's ``doc`` and ``returns``); ``docs/errors.md`` has a section per error class.
- The Mermaid diagram and the printed plan in ``docs/architecture.md`` are what the code produces today.
- Links between pages (and to their headings) resolve.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from middleware_kit.hooks import HOOKS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

_FENCE = re.compile(r"^```(\S*)\s*$")
_RAISES = re.compile(r"^#\s*raises:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    """1-based line of the first line of code (after the opening fence)."""
    lang: str
    source: str

    @property
    def label(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def markdown_files() -> list[Path]:
    files = sorted(DOCS.rglob("*.md")) if DOCS.is_dir() else []
    if README.is_file():
        files.append(README)
    return files


def blocks_of(path: Path) -> list[Block]:
    """Fenced code blocks of one file (only top-level fences: ``` at the start of a line)."""
    found: list[Block] = []
    lang: str | None = None
    start = 0
    body: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = _FENCE.match(line)
        if lang is None:
            if match:
                lang, start, body = match.group(1), number + 1, []
        elif line.rstrip() == "```":
            found.append(Block(path, start, lang, "\n".join(body) + "\n"))
            lang = None
        else:
            body.append(line)
    assert lang is None, f"{path.relative_to(ROOT)}: a code fence opened on line {start - 1} is never closed"
    return found


def python_blocks() -> list[tuple[Block, Block | None]]:
    """Every ```python block, with the block that follows it in the same file (for ``# raises:`` messages)."""
    found = []
    for path in markdown_files():
        blocks = blocks_of(path)
        for i, block in enumerate(blocks):
            if block.lang == "python":
                found.append((block, blocks[i + 1] if i + 1 < len(blocks) else None))
    return found


PYTHON_BLOCKS = python_blocks()


@pytest.mark.parametrize(("block", "after"), PYTHON_BLOCKS, ids=[b.label for b, _ in PYTHON_BLOCKS])
def test_python_block_runs(block: Block, after: Block | None) -> None:
    """Run the block. ``# raises: Name`` as its first line: it must raise exactly ``Name``; if the next block is a
    ```text block starting with ``Name: ``, that is the exact message."""
    first = block.source.lstrip("\n").splitlines()[0] if block.source.strip() else ""
    expected = _RAISES.match(first)
    # dont_inherit: this module's ``from __future__ import annotations`` must not leak into the snippets.
    code = compile(block.source, block.label, "exec", dont_inherit=True)
    if expected is None:
        exec(code, {"__name__": "__docs__"})
        return
    name = expected.group(1)
    with pytest.raises(BaseException) as info:
        exec(code, {"__name__": "__docs__"})
    assert type(info.value).__name__ == name, (
        f"{block.label} promises '# raises: {name}' but raised {type(info.value).__name__}: {info.value}"
    )
    if after is not None and after.lang == "text" and after.source.startswith(f"{name}: "):
        assert after.source.strip() == f"{name}: {info.value}", f"the message shown at {after.label} is stale"


def test_docs_have_python_blocks() -> None:
    assert PYTHON_BLOCKS, "no ```python block found under docs/"


# -- the hook tables follow hooks.HOOKS ---------------------------------------------------------------------------
def table_rows(text: str, first_header: str) -> list[list[str]]:
    """Cells of the rows of the first Markdown table whose first header cell is ``first_header``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and cells[0] == first_header:
            rows = []
            for row in lines[i + 2 :]:
                if not row.lstrip().startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    raise AssertionError(f"no table with first header {first_header!r}")


def hook_of(cell: str) -> str:
    return cell.strip("`").split("(")[0]


HOOKS_MD = DOCS / "concepts" / "hooks.md"
ONION_MD = DOCS / "concepts" / "onion.md"


def test_hooks_page_has_a_section_per_hook_in_run_order() -> None:
    text = HOOKS_MD.read_text(encoding="utf-8")
    sections = re.findall(r"^## `([a-z_]+)`", text, flags=re.M)
    assert sections == list(HOOKS), "hooks.md needs one '## `hook`' section per hook, in the order of HOOKS"


def test_hooks_page_facts_match_the_contract() -> None:
    text = HOOKS_MD.read_text(encoding="utf-8")
    rows = table_rows(text, "hook")
    assert [hook_of(r[0]) for r in rows] == list(HOOKS)
    for row in rows:
        spec = HOOKS[hook_of(row[0])]
        assert row[1] == f"`{spec.order}`", f"order of {spec.name} in the summary table"
    for name, body in re.findall(r"^## `([a-z_]+)`\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S):
        spec = HOOKS[name]
        order = re.search(r"^- \*\*Order:\*\* `(forward|reverse)`", body, flags=re.M)
        assert order is not None and order.group(1) == spec.order, f"order line of {name}"
        assert spec.returns in body, f"the section of {name} must quote HOOKS[{name!r}].returns"
        assert spec.doc in body, f"the section of {name} must quote HOOKS[{name!r}].doc"
        jumps = re.search(r"^- \*\*May jump:\*\* (.*)$", body, flags=re.M)
        assert jumps is not None, f"'May jump' line of {name}"
        listed = set(re.findall(r"`(model|tools|end)`", jumps.group(1)))
        assert listed == set(spec.jump_targets), f"jump targets of {name}"
        assert f"def {name}(self" in body, f"the section of {name} must show its signature"
        assert f"async def a{name}(self" in body, f"the section of {name} must show the async twin a{name}"


def test_onion_table_matches_the_contract() -> None:
    rows = table_rows(ONION_MD.read_text(encoding="utf-8"), "hook")
    assert [hook_of(r[0]) for r in rows] == list(HOOKS)
    for row in rows:
        spec = HOOKS[hook_of(row[0])]
        order = row[2]
        if spec.order == "reverse":
            assert order == "C, B, A", spec.name
        elif spec.kind in ("wrap_model", "wrap_tool"):
            assert order.startswith("A( B( C("), spec.name
        else:
            assert order.startswith("A, B, C"), spec.name


def test_errors_page_has_a_section_per_error_class() -> None:
    import middleware_kit.errors as errors

    sections = re.findall(r"^## `([A-Za-z]+)`", (DOCS / "errors.md").read_text(encoding="utf-8"), flags=re.M)
    missing = sorted(set(errors.__all__) - set(sections))
    assert not missing, f"docs/errors.md has no '## `Name`' section for {missing}"


# -- the architecture page shows today's graph -------------------------------------------------------------------
def test_architecture_diagram_and_plan_are_current() -> None:
    """The ```mermaid block and the printed plan (```text block) are today's output for the page's own agent."""
    from middleware_kit import create_agent
    from middleware_kit.testing import ScriptedChatModel, TraceRecorder
    from tests.conftest import add

    blocks = blocks_of(DOCS / "architecture.md")
    plan = create_agent(ScriptedChatModel(["ok"]), [add], middleware=[TraceRecorder(n) for n in "ABC"]).middleware_plan
    diagrams = [b.source.strip() for b in blocks if b.lang == "mermaid"]
    assert diagrams == [plan.mermaid().strip()], "regenerate the diagram in docs/architecture.md (snippet above it)"
    printed = [b.source.strip() for b in blocks if b.lang == "text" and b.source.startswith("middleware plan of")]
    assert printed == [str(plan).strip()], "regenerate the printed plan in docs/architecture.md (snippet above it)"


# -- links between pages ------------------------------------------------------------------------------------------
_LINK = re.compile(r"\]\(([^)\s#]*)(?:#([^)\s]*))?\)")


def anchors_of(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, ``-1``... for repeats."""
    seen: dict[str, int] = {}
    anchors = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


@pytest.mark.parametrize("path", markdown_files(), ids=[str(p.relative_to(ROOT)) for p in markdown_files()])
def test_relative_links_resolve(path: Path) -> None:
    """Links to other pages (and to their headings) point at something that exists."""
    broken = []
    for target, anchor in _LINK.findall(path.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:") or not (target.endswith(".md") or not target):
            continue
        page = (path.parent / target).resolve() if target else path
        if not page.is_file():
            broken.append(target)
        elif anchor and anchor not in anchors_of(page):
            broken.append(f"{target}#{anchor}")
    assert not broken, f"{path.relative_to(ROOT)} links to missing pages or headings: {broken}"
