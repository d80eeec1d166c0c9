"""The rules of the reference: `aiayn/paper/transformer.py` uses no fused or library attention,
imports nothing from aiayn and has at most 500 lines (`bridge.py`, the plumbing, may import
aiayn); the guard is shown catching a planted violation of each."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import aiayn.paper

PAPER_FILE = Path(aiayn.paper.__file__).parent / "transformer.py"
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


def violations(path: Path) -> list[str]:
    """Each broken rule in the reference file `path`, as 'file:line: what'."""
    found = []
    source = path.read_text()
    if (lines := len(source.splitlines())) > MAX_LINES:
        found.append(f"{path.name}: {lines} lines, more than {MAX_LINES}")
    for node in ast.walk(ast.parse(source)):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if _aiayn_import(node):
            found.append(f"{where}: imports aiayn")
        if isinstance(node, ast.Attribute) and (
            node.attr in FORBIDDEN
            or (node.attr.startswith("Transformer") and ast.unparse(node.value) in ("nn", "torch.nn"))
        ):
            found.append(f"{where}: uses {ast.unparse(node)}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            found += [f"{where}: imports {a.name}" for a in node.names if _library_attention(a.name)]
    return found


def test_the_reference_keeps_its_rules() -> None:
    assert violations(PAPER_FILE) == []


PLANTED = {
    "fused attention": ("def fast(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n",
                        "uses F.scaled_dot_product_attention"),
    "library module": ("LAYER = nn.TransformerEncoderLayer\n", "uses nn.TransformerEncoderLayer"),
    "aiayn import": ("from aiayn.model import Transformer as Engine\n", "imports aiayn"),
    "relative aiayn import": ("from .bridge import load\n", "imports aiayn"),
    "aiayn import in a function": ("def read():\n    import aiayn.model_dir\n", "imports aiayn"),
    "501st line": (None, "more than 500"),
}  # fmt: skip


@pytest.mark.parametrize("name", PLANTED)
def test_the_guard_catches_a_planted_violation(name: str, tmp_path) -> None:
    copy = tmp_path / "transformer.py"
    source = PAPER_FILE.read_text()
    code, reported = PLANTED[name]
    if code is None:  # pad the file to one line more than allowed
        code = "#\n" * (MAX_LINES + 1 - len(source.splitlines()))
    copy.write_text(source + code)
    found = violations(copy)
    assert len(found) == 1 and reported in found[0], found
