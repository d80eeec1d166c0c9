"""The model reads top to bottom like the paper: checks on the shape of the code itself.

- no file reading in the paper package (model directories: `aiayn.model_dir`);
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
from aiayn.model import ModelConfig, Transformer

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


def test_files_are_read_outside_the_paper_package() -> None:
    """Reading and checking model directories lives in `aiayn.model_dir`, not in `model/`."""
    offenders = []
    for path in model_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(n.split(".")[0] in ("json", "safetensors") or n == "aiayn.files" for n in names):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


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

        monkeypatch.setattr("aiayn.model.multi_head_attention.scaled_dot_product_attention", recording)
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
