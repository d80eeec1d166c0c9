"""The model reads top to bottom like the paper: checks on the shape of the code itself.

- the paper package is only the paper (`model_purity_violations`, the one guard over `model/`):
  no compiler, kernel-registration or OS code, no file reading, no attribute set by name (what
  `model/` may import is pyproject.toml's import contract, `tests/test_import_contract.py`);
- no `nonlocal` (no state smuggled out of closures);
- no `forward` with more than 6 parameters besides `self`, none taking *args / **kwargs
  (per-call state travels in one `AttentionContext`);
- from `Transformer.forward` to the function computing softmax(QK^T / sqrt(d_k)) V, at
  most 6 of aiayn's own functions on the call stack (`nn.Module.__call__` not counted).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import aiayn
from aiayn.model import ModelConfig, MultiHeadAttention, Transformer

from .helpers import pad_to_lengths, random_tokens

PACKAGE_ROOT = Path(aiayn.__file__).parent
MODEL_DIR = PACKAGE_ROOT / "model"


def model_sources() -> list[Path]:
    return sorted(MODEL_DIR.rglob("*.py"))


def test_no_nonlocal_in_the_model() -> None:
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in model_sources()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Nonlocal)
    ]
    assert offenders == []


FORBIDDEN_TEXT = ("torch.compiler", "torch.library", "/proc", "setattr(", "open(", "read_text")
"""What no file of `model/` mentions: compiler branches, operator registration, the OS, writing
attributes by name, reading files."""


def model_purity_violations(root: Path) -> list[str]:
    """'file:line: what' for every breach of the rules above in the .py files under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        for number, line in enumerate(text.splitlines(), 1):
            found += [f"{path.name}:{number}: mentions {word}" for word in FORBIDDEN_TEXT if word in line]
    return found


def test_the_model_package_is_only_the_paper() -> None:
    assert model_purity_violations(MODEL_DIR) == []


PLANTED = {
    "torch.compiler": "if torch.compiler.is_compiling():\n    pass\n",
    "torch.library": "LIBRARY = torch.library.Library('aiayn', 'FRAGMENT')\n",
    "/proc": "FLAGS = Path('/proc/cpuinfo')\n",
    "setattr(": "setattr(torch, 'x', 1)\n",
    "open(": "HANDLE = open('weights.bin')\n",
    "read_text": "TEXT = Path('config.json').read_text()\n",
}


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_the_model_guard_reports_a_planted_violation(tmp_path: Path, kind: str) -> None:
    """A copy of `model/` with one violation planted in attention.py: the guard names it."""
    copy = tmp_path / "model"
    for path in MODEL_DIR.rglob("*.py"):
        (copy / path.relative_to(MODEL_DIR)).parent.mkdir(parents=True, exist_ok=True)
        (copy / path.relative_to(MODEL_DIR)).write_text(path.read_text())
    planted = copy / "attention.py"
    line = len(planted.read_text().splitlines()) + 1
    planted.write_text(planted.read_text() + PLANTED[kind])
    found = model_purity_violations(copy)
    assert found and all(entry.startswith(f"attention.py:{line}: ") for entry in found), found


def test_forward_signatures_are_short() -> None:
    offenders = []
    for path in model_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "forward":
                args = node.args
                count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) - 1  # minus self
                if count > 6 or args.vararg or args.kwarg:
                    offenders.append(f"{path.name}:{node.lineno} ({count} parameters)")
    assert offenders == []


def own_frames_to_attention(stack: list[inspect.FrameInfo]) -> list[str]:
    """aiayn's own frames from `Transformer.forward` down to the innermost aiayn frame."""
    names = [
        f"{Path(frame.filename).stem}.{frame.function}"
        for frame in reversed(stack)  # outermost first
        if Path(frame.filename).resolve().is_relative_to(PACKAGE_ROOT.resolve())
    ]
    return names[names.index("transformer.forward"):]


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "explicit"])
def test_call_stack_from_forward_to_attention_is_short(monkeypatch, packed: bool, need_weights: bool) -> None:
    model = Transformer(ModelConfig.tiny(vocab_size=30)).eval()
    src = pad_to_lengths(random_tokens(2, 6, seed=1), [6, 3])
    tgt_in = pad_to_lengths(random_tokens(2, 5, seed=2), [5, 2])
    stacks: list[list[str]] = []

    if need_weights:  # the explicit path computes the softmax itself: record from its matmul
        from aiayn.model import attention as attention_module

        original = attention_module.scaled_dot_product_attention

        def recording(*args, **kwargs):
            callers = own_frames_to_attention(inspect.stack()[1:])
            stacks.append([*callers, "attention.scaled_dot_product_attention"])
            return original(*args, **kwargs)

        for module in model.modules():
            if isinstance(module, MultiHeadAttention):
                monkeypatch.setattr(module, "attention", recording)
        monkeypatch.setattr("aiayn.model.context.AttentionContext.wants_weights", property(lambda self: True))
    else:
        original_sdpa = F.scaled_dot_product_attention

        def recording_sdpa(*args, **kwargs):
            stacks.append(own_frames_to_attention(inspect.stack()))
            return original_sdpa(*args, **kwargs)

        monkeypatch.setattr(F, "scaled_dot_product_attention", recording_sdpa)
    with torch.no_grad():
        model(src, tgt_in, output_mask=(tgt_in != 0) if packed else None)

    assert len(stacks) == 3 * 2  # 2 encoder self-, 2 decoder self-, 2 cross-attention calls
    deepest = max(stacks, key=len)
    assert deepest[0] == "transformer.forward"
    assert deepest[-1] == "attention.scaled_dot_product_attention"
    assert len(deepest) <= 6, deepest
