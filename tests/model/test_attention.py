"""Scaled dot-product attention, masks, and the two attention paths.

The explicit path (need_weights=True, written out as Eq. 1) and the fast path
(`F.scaled_dot_product_attention`) must give the same outputs; probabilities must be a
distribution over the allowed keys, with masked keys at exactly 0.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from aiayn.decoding.common import padding_mask_or_none
from aiayn.model import (
    AttentionContext,
    MultiHeadAttention,
    attention_mask,
    padding_mask,
    scaled_dot_product_attention,
    subsequent_mask,
)

from .helpers import build, pad_to_lengths, random_tokens

ATOL = 1e-5
FAST = settings(max_examples=25, deadline=None)


def qkv(batch: int, heads: int, queries: int, keys: int, dim: int = 8, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, heads, queries, dim, generator=generator),
        torch.randn(batch, heads, keys, dim, generator=generator),
        torch.randn(batch, heads, keys, dim, generator=generator),
    )


def check_probabilities(probabilities: Tensor, allowed: Tensor) -> None:
    """Rows with any allowed key sum to 1; every blocked entry is exactly 0."""
    allowed = allowed.expand_as(probabilities)
    assert torch.all(probabilities[~allowed] == 0)
    assert torch.all(probabilities >= 0)
    live = allowed.any(dim=-1)
    sums = probabilities.sum(dim=-1)
    torch.testing.assert_close(sums[live], torch.ones_like(sums[live]), atol=1e-6, rtol=0)


# ------------------------------------------------------------------------- masks
def test_mask_conventions_true_means_may_attend() -> None:
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    src_padding_mask = padding_mask(tokens, pad_id=0)
    assert src_padding_mask.dtype == torch.bool
    assert src_padding_mask.tolist() == [[True, True, False], [True, False, False]]

    causal = subsequent_mask(3)
    assert causal.tolist() == [[True, False, False], [True, True, False], [True, True, True]]

    assert attention_mask(None) is None
    assert attention_mask(src_padding_mask).shape == (2, 1, 1, 3)
    assert attention_mask(None, causal=True, query_length=4).shape == (1, 1, 4, 4)
    both = attention_mask(src_padding_mask, causal=True)
    assert both.shape == (2, 1, 3, 3)
    assert both[1, 0].tolist() == [[True, False, False], [True, False, False], [True, False, False]]
    with pytest.raises(ValueError, match="query_length"):
        attention_mask(None, causal=True)
    with pytest.raises(ValueError, match="bool"):
        attention_mask(tokens)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        padding_mask(tokens[0])


# ------------------------------------------------- explicit path == fast path
@FAST
@given(
    batch=st.integers(1, 3), heads=st.integers(1, 3), queries=st.integers(1, 6),
    keys=st.integers(1, 6), density=st.floats(0.0, 1.0), seed=st.integers(0, 2**16),
)
def test_paths_agree_under_arbitrary_masks(batch, heads, queries, keys, density, seed) -> None:
    """Any (B, H, T, S) mask, including rows with every key blocked."""
    q, k, v = qkv(batch, heads, queries, keys, seed=seed)
    generator = torch.Generator().manual_seed(seed + 1)
    mask = torch.rand(batch, heads, queries, keys, generator=generator) < density
    fast, none = scaled_dot_product_attention(q, k, v, mask)
    explicit, probabilities = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
    assert none is None
    assert probabilities.shape == (batch, heads, queries, keys)
    torch.testing.assert_close(explicit, fast, atol=ATOL, rtol=0)
    check_probabilities(probabilities, mask)
    assert torch.isfinite(explicit).all() and torch.isfinite(probabilities).all()


@pytest.mark.parametrize("kind", ["none", "causal", "is_causal", "padding", "padding_causal"])
def test_paths_agree_for_model_masks(kind: str) -> None:
    q, k, v = qkv(2, 3, 5, 5, seed=7)
    src_padding_mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    mask = {
        "none": None,
        "causal": subsequent_mask(5)[None, None],
        "is_causal": None,
        "padding": attention_mask(src_padding_mask),
        "padding_causal": attention_mask(src_padding_mask, causal=True),
    }[kind]
    is_causal = kind == "is_causal"
    fast, _ = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal)
    explicit, probabilities = scaled_dot_product_attention(
        q, k, v, mask, need_weights=True, is_causal=is_causal
    )
    torch.testing.assert_close(explicit, fast, atol=ATOL, rtol=0)
    allowed = subsequent_mask(5)[None, None] if is_causal else mask
    if allowed is None:
        allowed = torch.ones(1, 1, 5, 5, dtype=torch.bool)
    check_probabilities(probabilities, allowed)
    if kind in ("causal", "is_causal", "padding_causal"):
        assert torch.all(probabilities.triu(diagonal=1) == 0)
    if kind in ("padding", "padding_causal"):
        assert torch.all(probabilities[1, :, :, 3:] == 0)
    if kind == "none":
        assert torch.all(probabilities > 0)


def test_attention_is_softmax_of_scaled_scores() -> None:
    """Eq. 1 directly: softmax(Q K^T / sqrt(d_k)) V."""
    q, k, v = qkv(1, 2, 3, 4, dim=16, seed=3)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1)
    output, probabilities = scaled_dot_product_attention(q, k, v, need_weights=True)
    torch.testing.assert_close(probabilities, expected)
    torch.testing.assert_close(output, expected @ v)


def test_multi_head_attention_paths_agree_with_cache_and_cross() -> None:
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4).eval()
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    src_padding_mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    for mask in (attention_mask(src_padding_mask), None):
        fast = attention(x, AttentionContext(mask=mask, memory=memory))
        weights: list[torch.Tensor] = []
        explicit = attention(x, AttentionContext(mask=mask, memory=memory, attention_maps=weights))
        torch.testing.assert_close(explicit, fast, atol=ATOL, rtol=0)
        assert len(weights) == 1 and weights[0].shape == (2, 4, 5, 7)
    fast = attention(x, AttentionContext(is_causal=True))
    weights = []
    explicit = attention(x, AttentionContext(is_causal=True, attention_maps=weights))
    torch.testing.assert_close(explicit, fast, atol=ATOL, rtol=0)
    assert torch.all(weights[0].triu(diagonal=1) == 0)
    with pytest.raises(ValueError, match="query"):
        attention(torch.randn(2, 5, 8), AttentionContext())


# ------------------------------------------------------------- whole models
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("tgt_padded", [False, True], ids=["causal_only", "tgt_padded"])
def test_model_paths_agree(norm_first: bool, tgt_padded: bool) -> None:
    """The stacks give the same states when asked for attention maps (explicit path)."""
    model = build("transformer", norm_first=norm_first)
    src = pad_to_lengths(random_tokens(3, 8, seed=1), [8, 5, 2])
    tgt_in = random_tokens(3, 6, seed=2)
    if tgt_padded:
        tgt_in = pad_to_lengths(tgt_in, [6, 3, 1])
    src_padding_mask = src != 0
    encoder_maps: list[torch.Tensor] = []
    decoder_maps: list[torch.Tensor] = []
    cross_maps: list[torch.Tensor] = []
    with torch.no_grad():
        memory = model.encode(src)
        source = AttentionContext.bidirectional(src_padding_mask, attention_maps=encoder_maps)
        memory_explicit = model.encoder(model.embed_source(src, source), source)
        hidden = model.decode(tgt_in, memory, src_padding_mask, return_hidden=True)
        target = AttentionContext.causal(padding_mask_or_none(tgt_in, 0), attention_maps=decoder_maps)
        cross_mask = attention_mask(src_padding_mask)
        cross = AttentionContext(mask=cross_mask, memory=memory, attention_maps=cross_maps)
        hidden_explicit = model.decoder(model.embed_target(tgt_in, target), target, cross)
    torch.testing.assert_close(memory_explicit, memory, atol=ATOL, rtol=0)
    torch.testing.assert_close(hidden_explicit, hidden, atol=ATOL, rtol=0)
    assert len(encoder_maps) == len(decoder_maps) == len(cross_maps) == 2


def test_attention_maps_are_distributions_over_allowed_keys() -> None:
    model = build("transformer")
    src = pad_to_lengths(random_tokens(2, 6, seed=3), [6, 4])
    tgt_in = pad_to_lengths(random_tokens(2, 5, seed=4), [5, 3])
    maps = model.attention_maps(src, tgt_in)
    assert len(maps.encoder) == len(maps.decoder) == len(maps.cross) == 2
    src_keys = (src != 0)[:, None, None, :]
    for layer in range(2):
        assert maps.encoder[layer].shape == (2, 2, 6, 6)
        assert maps.decoder[layer].shape == (2, 2, 5, 5)
        assert maps.cross[layer].shape == (2, 2, 5, 6)
        check_probabilities(maps.encoder[layer], src_keys)
        check_probabilities(maps.cross[layer], src_keys)
        check_probabilities(maps.decoder[layer], attention_mask(tgt_in != 0, causal=True))
        assert torch.all(maps.decoder[layer].triu(diagonal=1) == 0)
        assert torch.all(maps.encoder[layer][1, :, :, 4:] == 0)
        assert torch.all(maps.decoder[layer][1, :, :, 3:] == 0)
