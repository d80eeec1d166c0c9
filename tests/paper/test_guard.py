"""The rules of `aiayn.paper` (issue 36): no fused or library attention, no `aiayn` import
outside `load`, at most 500 lines; the guard is shown catching a planted violation of each."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import aiayn.paper

PAPER_DIR = Path(aiayn.paper.__file__).parent
MAX_LINES = 500
FORBIDDEN = ("scaled_dot_product_attention", "MultiheadAttention")


def _library_attention(name: str) -> bool:
    return name in FORBIDDEN or name.startswith("Transformer")


def _aiayn_import(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == "aiayn" or a.name.startswith("aiayn.") for a in node.names)
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return node.level > 0 or module == "aiayn" or module.startswith("aiayn.")
    return False


def violations(package: Path) -> list[str]:
    """Each broken rule in the `.py` files under `package`, as 'file:line: what'."""
    found = []
    files = sorted(package.rglob("*.py"))
    total = sum(len(path.read_text().splitlines()) for path in files)
    if total > MAX_LINES:
        found.append(f"{package}: {total} lines, more than {MAX_LINES}")
    for path in files:
        tree = ast.parse(path.read_text())
        loads = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "load"]
        inside_load = {id(node) for function in loads for node in ast.walk(function)}
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if _aiayn_import(node) and id(node) not in inside_load:
                found.append(f"{where}: imports aiayn outside load()")
            if isinstance(node, ast.Attribute) and (
                node.attr in FORBIDDEN
                or (node.attr.startswith("Transformer") and ast.unparse(node.value) in ("nn", "torch.nn"))
            ):
                found.append(f"{where}: uses {ast.unparse(node)}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
                found += [f"{where}: imports {a.name}" for a in node.names if _library_attention(a.name)]
    return found


def test_the_paper_package_keeps_its_rules() -> None:
    assert violations(PAPER_DIR) == []
    assert len(loads := [n for n in ast.parse((PAPER_DIR / "__init__.py").read_text()).body
                         if isinstance(n, ast.FunctionDef) and n.name == "load"]) == 1
    assert any(_aiayn_import(node) for node in ast.walk(loads[0]))  # it does reuse the engine's reader


PLANTED = {
    "fused attention": ("def fast(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n",
                        "uses F.scaled_dot_product_attention"),
    "library module": ("LAYER = nn.TransformerEncoderLayer\n", "uses nn.TransformerEncoderLayer"),
    "aiayn import": ("from aiayn.model import Transformer as Engine\n", "imports aiayn outside load()"),
    "501st line": (None, "more than 500"),
}  # fmt: skip


@pytest.mark.parametrize("name", PLANTED)
def test_the_guard_catches_a_planted_violation(name: str, tmp_path) -> None:
    copy = tmp_path / "paper"
    shutil.copytree(PAPER_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    module = copy / "__init__.py"
    code, reported = PLANTED[name]
    if code is None:  # pad the package to one line more than allowed
        lines = sum(len(p.read_text().splitlines()) for p in copy.rglob("*.py"))
        code = "#\n" * (MAX_LINES + 1 - lines)
    module.write_text(module.read_text() + code)
    found = violations(copy)
    assert len(found) == 1 and reported in found[0], found
