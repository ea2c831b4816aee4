"""Sphinx configuration: the docs site (docs/*.md through MyST) and the API reference (docs/api/, autodoc).

Build by hand, warnings as errors::

    pip install -e '.[docs]'
    python -m sphinx -W --keep-going -b html docs build/docs

``tests/test_api_reference.py`` runs the same build into a temporary directory.
"""

from __future__ import annotations

project = "middleware_kit"
author = "middleware_kit contributors"
copyright = "middleware_kit contributors"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# The Markdown pages link to each other with plain links (they are read on GitHub too), not through a toctree: the
# index page's tables are the site's navigation, so a page outside every toctree is expected, not a mistake.
# Annotations name ``type`` (the builtin), which the Python domain also finds as the ``type`` field of the HITL
# decision TypedDicts: an ambiguous cross-reference in a signature, not a mistake in the docs.
suppress_warnings = ["toc.not_included", "ref.python"]

myst_heading_anchors = 4  # GitHub's heading anchors, which the pages link to ("page.md#a-heading")

autodoc_default_options = {
    "members": True,
    "undoc-members": True,
    "show-inheritance": True,
    "no-value": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_google_docstring = True  # the docstrings use Google-style "Args:" sections
napoleon_numpy_docstring = False
autodoc_inherit_docstrings = False  # a bundled middleware's hook would otherwise repeat the base class's text

html_theme = "alabaster"
html_title = "middleware_kit"


def setup(app: object) -> None:
    """Mermaid diagrams are shown as plain text (GitHub draws them; the site does not)."""
    from pygments.lexers.special import TextLexer  # type: ignore[import-untyped]
    from sphinx.highlighting import lexers

    lexers["mermaid"] = TextLexer()
