"""The model is written from scratch: no module under src/aiayn uses PyTorch's Transformer."""

from __future__ import annotations

import ast
from pathlib import Path

import aiayn

FORBIDDEN = {"Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
             "TransformerDecoderLayer", "MultiheadAttention"}
PACKAGE = Path(aiayn.__file__).resolve().parent


def torch_transformer_uses(source: str) -> list[str]:
    """Code (not prose) that reaches one of PyTorch's Transformer classes.

    Catches `nn.X`, `torch.nn.X`, `torch.nn.modules.transformer.X`, `from torch.nn import X`
    and `from torch.nn.modules... import X`, where X is a forbidden name. Docstrings and
    comments may mention them (masks.py contrasts our mask convention with theirs).
    """
    uses = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN:
            base = ast.unparse(node.value)
            if base.split(".")[0] in ("nn", "torch") or base.endswith("nn"):
                uses.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            for alias in node.names:
                if alias.name in FORBIDDEN or alias.name == "*":
                    uses.append(f"line {node.lineno}: from {node.module} import {alias.name}")
    return uses


def test_scanner_catches_every_form() -> None:
    snippets = [
        "layer = nn.TransformerEncoderLayer(512, 8)",
        "m = torch.nn.MultiheadAttention(512, 8)",
        "class T(nn.Transformer): pass",
        "from torch.nn import TransformerDecoderLayer",
        "from torch.nn import MultiheadAttention as MHA",
        "from torch.nn.modules.transformer import *",
    ]
    for snippet in snippets:
        assert torch_transformer_uses(snippet), snippet
    assert not torch_transformer_uses('"""Unlike nn.MultiheadAttention, True means attend."""')
    assert not torch_transformer_uses("from aiayn.model import Transformer\nmodel = Transformer(c)")


def test_no_module_uses_pytorch_transformer_layers() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert PACKAGE / "model" / "multi_head_attention.py" in files
    offenders = {}
    for path in files:
        uses = torch_transformer_uses(path.read_text(encoding="utf-8"))
        if uses:
            offenders[str(path.relative_to(PACKAGE))] = uses
    assert not offenders, offenders
