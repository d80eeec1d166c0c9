"""`training/` knows no task: none of its modules holds a string equal to a task name that the task
packages declare (`aiayn.tasks.task_names`), nor imports a task package or `aiayn.tasks`. Shown
reporting a planted name and planted imports."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from aiayn.tasks import task_names, task_settings

TRAINING = Path(__file__).resolve().parents[2] / "src" / "aiayn" / "training"


def task_modules() -> set[str]:
    """The task packages (each settings class's package) and the module that finds them."""
    return {cls.__module__.rsplit(".", 1)[0] for cls in task_settings()} | {"aiayn.tasks"}


def imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement of a module of `aiayn.training` names (or may name)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    parent = ["aiayn", "training"][: 2 - (node.level - 1)] if node.level else []
    base = ".".join([*parent, *([node.module] if node.module else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def violations(root: Path) -> list[str]:
    """`PATH:LINE: what` for each task name and each import of a task module under `root`."""
    names, modules = set(task_names()), task_modules()
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found.append(f"{where}:{node.lineno}: the task name {node.value!r}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                hits = [m for m in imported(node) for p in modules if m == p or m.startswith(p + ".")]
                found += [f"{where}:{node.lineno}: imports {hits[0]}"] if hits else []
    return found


def test_training_names_no_task_and_imports_no_task_package() -> None:
    assert len(list(TRAINING.glob("*.py"))) > 10  # the package was found
    assert violations(TRAINING) == []


def test_the_guard_reports_a_planted_name_and_planted_imports(tmp_path: Path) -> None:
    copy = tmp_path / "training"
    shutil.copytree(TRAINING, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "planted.py").write_text(
        '"""A module that knows a task."""\n'
        "from aiayn.lm.settings import LMSettings\n"
        "from aiayn import classify\n"
        "from ..tasks import settings_for\n"
        'DEFAULT = "dates"\n'
        'HELP = "dates and more"  # a longer text that mentions a task is documentation\n'
    )
    assert violations(copy) == [
        "planted.py:2: imports aiayn.lm.settings",
        "planted.py:3: imports aiayn.classify",
        "planted.py:4: imports aiayn.tasks",
        "planted.py:5: the task name 'dates'",
    ]
