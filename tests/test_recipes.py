"""Every recipe in ``recipes/`` runs offline as a script and passes its own checks (exit code 0)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted((ROOT / "recipes").glob("*.py"))


def test_recipes_exist() -> None:
    assert len(RECIPES) >= 6, f"expected the recipes in {ROOT / 'recipes'}, found {[p.name for p in RECIPES]}"


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_runs_and_checks_itself(recipe: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(recipe)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, (
        f"{recipe.name} exited with {out.returncode}\n--- stdout ---\n{out.stdout}\n--- stderr ---\n{out.stderr}"
    )
    assert "OK:" in out.stdout, f"{recipe.name} did not print its result line\n--- stdout ---\n{out.stdout}"
