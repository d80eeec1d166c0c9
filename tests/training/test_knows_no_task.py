"""`training/` knows no task: none of its modules holds a string equal to a task name that the task
packages declare (`aiayn.tasks.task_names`). (That it imports no task package nor `aiayn.tasks`
is pyproject.toml's layer contract, `tests/test_import_contract.py`.) Shown reporting a planted
name."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from aiayn.tasks import task_names

TRAINING = Path(__file__).resolve().parents[2] / "src" / "aiayn" / "training"


def violations(root: Path) -> list[str]:
    """`PATH:LINE: what` for each task name under `root`."""
    names = set(task_names())
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found.append(f"{where}:{node.lineno}: the task name {node.value!r}")
    return found


def test_training_names_no_task() -> None:
    assert len(list(TRAINING.glob("*.py"))) > 10  # the package was found
    assert violations(TRAINING) == []


def test_the_guard_reports_a_planted_name(tmp_path: Path) -> None:
    copy = tmp_path / "training"
    shutil.copytree(TRAINING, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "planted.py").write_text(
        '"""A module that knows a task."""\n'
        'DEFAULT = "dates"\n'
        'HELP = "dates and more"  # a longer text that mentions a task is documentation\n'
    )
    assert violations(copy) == ["planted.py:2: the task name 'dates'"]
