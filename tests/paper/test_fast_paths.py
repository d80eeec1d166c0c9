"""The engine's two fast paths of Sec. 3.2 against `aiayn.paper` one at a time: Eq. 1 through
PyTorch's fused `F.scaled_dot_product_attention` (no probabilities asked for) equals the
reference's `attention` written out, and multi-head attention with W^Q, W^K, W^V fused into one
`in_proj` equals the reference's four matrices. Each check fails on an input one step away."""

from __future__ import annotations

import pytest
import torch

from aiayn import paper
from aiayn.model import AttentionContext, MultiHeadAttention, scaled_dot_product_attention


def qkv(seed: int, queries: int = 5, keys: int = 5) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(2, 4, queries, 8), (2, 4, keys, 8), (2, 4, keys, 8)]
    return tuple(torch.randn(shape, generator=generator) for shape in shapes)


@pytest.mark.parametrize("kind", ["padding", "causal"])
def test_the_fused_kernel_is_eq_1_of_the_reference(kind: str) -> None:
    q, k, v = qkv(seed=1)
    if kind == "padding":
        real = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])  # (B, S)
        mask = real[:, None, None, :]  # (B, 1, 1, S)
        fast, probabilities = scaled_dot_product_attention(q, k, v, mask=mask)
    else:
        mask = paper.subsequent_mask(5)
        fast, probabilities = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert probabilities is None  # the fused kernel ran: nobody asked for the probabilities
    expected, _ = paper.attention(q, k, v, mask)
    torch.testing.assert_close(fast, expected, atol=1e-5, rtol=1e-5)
    unscaled, _ = paper.attention(q * 8**0.5, k, v, mask)  # Eq. 1 without its 1/sqrt(d_k)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(fast, unscaled, atol=1e-5, rtol=1e-5)


def test_the_fused_in_proj_is_the_references_four_matrices() -> None:
    torch.manual_seed(2)
    engine = MultiHeadAttention(d_model=32, num_heads=4).eval()
    reference = paper.MultiHeadAttention(d_model=32, heads=4, d_k=8).eval()
    weights = paper.paper_state_dict({f"attn.{n}": t for n, t in engine.state_dict().items()})
    reference.load_state_dict({name.removeprefix("attn."): t for name, t in weights.items()})
    x = torch.randn(2, 6, 32)
    real = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    with torch.no_grad():
        got = engine(x, AttentionContext.bidirectional(real))
        expected = reference(x, x, x, real[:, None, None, :])
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        reference.w_k.weight[0, 0] += 0.05
        with pytest.raises(AssertionError):
            torch.testing.assert_close(got, reference(x, x, x, real[:, None, None, :]), atol=1e-5, rtol=1e-5)
