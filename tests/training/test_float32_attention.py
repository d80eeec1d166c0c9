"""The bf16-on-CPU attention rule lives with the precision (`aiayn.training.precision`), not in
the model: `float32_attention` computes Eq. 1's fused path in float32 inside a CPU bf16
autocast, is the model's own attention anywhere else, and `use_float32_attention` (what
`aiayn train` builds its model with) gives it to every attention layer."""

from __future__ import annotations

import torch

from aiayn.model import ModelConfig, MultiHeadAttention, Transformer, scaled_dot_product_attention
from aiayn.training.precision import float32_attention, use_float32_attention


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    return q, k, v, torch.rand(2, 1, 5, 7) > 0.3


def test_in_float32_it_is_the_models_own_attention() -> None:
    q, k, v, mask = inputs()
    for need_weights in (False, True):
        expected = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
        got = float32_attention(q, k, v, mask, need_weights=need_weights)
        assert torch.equal(got[0], expected[0])


def test_under_a_cpu_bf16_autocast_it_runs_in_float32() -> None:
    """The bf16 inputs attended in float32 (cast back to bf16), where the model's own call
    would run the bf16 kernel."""
    q, k, v, mask = (t.bfloat16() if t.is_floating_point() else t for t in inputs())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, _ = float32_attention(q, k, v, mask)
        own, _ = scaled_dot_product_attention(q, k, v, mask)
    expected, _ = scaled_dot_product_attention(q.float(), k.float(), v.float(), mask)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, expected.bfloat16())
    assert not torch.equal(own, got)  # the rule changes what the model alone would compute


def test_a_training_model_holds_it_in_every_attention_layer() -> None:
    model = use_float32_attention(Transformer(ModelConfig.tiny(vocab_size=20)))
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert layers and all(m.attention is float32_attention for m in layers)
    untouched = Transformer(ModelConfig.tiny(vocab_size=20))
    plain = [m for m in untouched.modules() if isinstance(m, MultiHeadAttention)]
    assert all(m.attention is scaled_dot_product_attention for m in plain)
