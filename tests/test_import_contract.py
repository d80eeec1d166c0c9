"""The layer rules are one contract, `[tool.importlinter]` in pyproject.toml, checked by
`lint-imports` (run by `make test`): it keeps the source tree, and it breaks on a copy of the
tree with a planted import of the runtime in `model/` or of the training in `data/`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(src: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the package under `src`, with the contract of pyproject.toml in `cwd`."""
    env = os.environ | {"PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def planted_copy(tmp_path: Path, module: str, text: str) -> Path:
    """A copy of src/aiayn and pyproject.toml under `tmp_path` with `module` (a path under
    aiayn/) written as `text`; returns the copy's root."""
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "src" / "aiayn", tmp_path / "src" / "aiayn", ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "src" / "aiayn" / module).write_text(text)
    return tmp_path


def test_the_source_tree_keeps_the_contract() -> None:
    result = lint_imports(ROOT / "src", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "text", "broken"),
    [
        ("model/planted.py", "import aiayn.runtime\n", "The model knows no data"),
        ("data/planted.py", "def later():\n    import aiayn.training\n", "The data knows no model"),
    ],
)
def test_a_planted_upward_import_breaks_the_contract(
    tmp_path: Path, module: str, text: str, broken: str
) -> None:
    root = planted_copy(tmp_path, module, text)
    result = lint_imports(root / "src", root)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{broken}" in result.stdout and "BROKEN" in result.stdout
    assert f"aiayn.{module[:-3].replace('/', '.')} -> aiayn." in result.stdout  # names the planted import
