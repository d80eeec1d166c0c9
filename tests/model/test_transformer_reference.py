"""Weight transplant: our Transformer against PyTorch's reference layers.

Our random weights are copied into a reference built from `nn.TransformerEncoderLayer` /
`nn.TransformerDecoderLayer` (and `nn.MultiheadAttention` for the attention module alone);
every output must agree to 1e-5 in fp32. Mask conventions differ: ours is True = may
attend, PyTorch's `key_padding_mask` / bool `attn_mask` are True = blocked.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn

from aiayn.model import (
    AttentionContext,
    ModelConfig,
    MultiHeadAttention,
    Transformer,
    attention_mask,
    sinusoidal_table,
)

from .helpers import pad_to_lengths, perturb_, random_tokens

ATOL = 1e-5


def blocked_future(length: int) -> Tensor:
    """PyTorch-convention causal mask, built independently of aiayn: True above the diagonal."""
    return torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)


class ReferenceTransformer(nn.Module):
    """The same architecture from PyTorch's own Transformer layers."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = config
        self.d_model = c.d_model

        def final_norm() -> nn.Module | None:
            # nn.Transformer puts a final LayerNorm on both stacks; our post-LN stacks have
            # none, our pre-LN stacks have one.
            return nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.norm_first else None

        common = dict(
            d_model=c.d_model, nhead=c.num_heads, dim_feedforward=c.d_ff, dropout=0.0,
            activation="relu", layer_norm_eps=c.layer_norm_eps, batch_first=True,
            norm_first=c.norm_first,
        )
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(**common), c.num_encoder_layers, norm=final_norm(),
            enable_nested_tensor=False,
        )
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(**common), c.num_decoder_layers, norm=final_norm()
        )
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embedding = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.output = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self.register_buffer("table", sinusoidal_table(c.max_len, c.d_model))

    def embed(self, embedding: nn.Embedding, tokens: Tensor) -> Tensor:
        return embedding(tokens) * math.sqrt(self.d_model) + self.table[: tokens.size(1)]

    def encode(self, src: Tensor, src_real: Tensor | None) -> Tensor:
        ignore = None if src_real is None else ~src_real
        return self.encoder(self.embed(self.src_embedding, src), src_key_padding_mask=ignore)

    def decode(
        self, tgt_in: Tensor, memory: Tensor, src_real: Tensor | None, tgt_real: Tensor | None
    ) -> Tensor:
        return self.decoder(
            self.embed(self.tgt_embedding, tgt_in), memory,
            tgt_mask=blocked_future(tgt_in.size(1)),
            tgt_key_padding_mask=None if tgt_real is None else ~tgt_real,
            memory_key_padding_mask=None if src_real is None else ~src_real,
        )

    def forward(self, src, tgt_in, src_real, tgt_real):
        memory = self.encode(src, src_real)
        hidden = self.decode(tgt_in, memory, src_real, tgt_real)
        return memory, hidden, self.output(hidden)


@torch.no_grad()
def copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    theirs.in_proj_weight.copy_(ours.in_proj.weight)  # [W^Q; W^K; W^V], (3D, D)
    theirs.in_proj_bias.copy_(ours.in_proj.bias)
    theirs.out_proj.weight.copy_(ours.out_proj.weight)
    theirs.out_proj.bias.copy_(ours.out_proj.bias)


@torch.no_grad()
def copy_module(ours: nn.Module, theirs: nn.Module) -> None:
    """Copy a Linear or LayerNorm (weight and bias)."""
    theirs.weight.copy_(ours.weight)
    if getattr(ours, "bias", None) is not None:
        theirs.bias.copy_(ours.bias)


def transplant(model: Transformer) -> ReferenceTransformer:
    reference = ReferenceTransformer(model.config)
    for ours, theirs in zip(model.encoder.layers, reference.encoder.layers, strict=True):
        copy_attention(ours.self_attention, theirs.self_attn)
        copy_module(ours.feed_forward.linear1, theirs.linear1)
        copy_module(ours.feed_forward.linear2, theirs.linear2)
        copy_module(ours.attention_sublayer.norm, theirs.norm1)
        copy_module(ours.feed_forward_sublayer.norm, theirs.norm2)
    for ours, theirs in zip(model.decoder.layers, reference.decoder.layers, strict=True):
        copy_attention(ours.self_attention, theirs.self_attn)
        copy_attention(ours.cross_attention, theirs.multihead_attn)
        copy_module(ours.feed_forward.linear1, theirs.linear1)
        copy_module(ours.feed_forward.linear2, theirs.linear2)
        copy_module(ours.self_attention_sublayer.norm, theirs.norm1)
        copy_module(ours.cross_attention_sublayer.norm, theirs.norm2)
        copy_module(ours.feed_forward_sublayer.norm, theirs.norm3)
    if model.config.norm_first:
        copy_module(model.encoder.final_norm, reference.encoder.norm)
        copy_module(model.decoder.final_norm, reference.decoder.norm)
    else:
        assert model.encoder.final_norm is None and model.decoder.final_norm is None
    copy_module(model.src_embedding.embedding, reference.src_embedding)
    copy_module(model.tgt_embedding.embedding, reference.tgt_embedding)
    copy_module(model.output_projection, reference.output)
    return reference.eval()


def make_model(norm_first: bool, shared: bool) -> Transformer:
    torch.manual_seed(1)
    if shared:
        config = ModelConfig.tiny(vocab_size=29, max_len=32, norm_first=norm_first)
    else:
        config = ModelConfig.tiny(
            src_vocab_size=19, tgt_vocab_size=29, tie_output=False, max_len=32, norm_first=norm_first
        )
    return perturb_(Transformer(config), seed=1).eval()


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "separate"])
@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
def test_transformer_matches_pytorch_reference(norm_first: bool, shared: bool, padded: bool) -> None:
    model = make_model(norm_first, shared)
    reference = transplant(model)
    config = model.config
    src = random_tokens(3, 9, seed=2, vocab=config.src_vocab_size)
    tgt_in = random_tokens(3, 7, seed=3, vocab=config.tgt_vocab_size)
    if padded:
        src = pad_to_lengths(src, [9, 6, 2])
        tgt_in = pad_to_lengths(tgt_in, [4, 7, 1])
        src_real, tgt_real = src != 0, tgt_in != 0
        assert not src_real.all() and not tgt_real.all()
    else:
        src_real = tgt_real = None

    with torch.no_grad():
        memory = model.encode(src)
        hidden = model.decode(tgt_in, memory, src_real, return_hidden=True)
        logits = model(src, tgt_in)
        ref_memory, ref_hidden, ref_logits = reference(src, tgt_in, src_real, tgt_real)

    assert logits.shape == (3, 7, config.tgt_vocab_size)
    assert (memory - ref_memory).abs().max() <= ATOL
    assert (hidden - ref_hidden).abs().max() <= ATOL
    assert (logits - ref_logits).abs().max() <= ATOL
    # The comparison is not vacuous: outputs are far from constant.
    assert logits.std() > 0.1 and memory.std() > 0.1


def test_reference_comparison_detects_a_wrong_norm_mapping() -> None:
    """Sanity check of the harness: swapping two LayerNorms must break the agreement."""
    model = make_model(norm_first=False, shared=True)
    reference = transplant(model)
    layer = reference.decoder.layers[0]
    with torch.no_grad():
        weight = layer.norm1.weight.clone()
        layer.norm1.weight.copy_(layer.norm2.weight)
        layer.norm2.weight.copy_(weight)
        src, tgt_in = random_tokens(2, 5, seed=4, vocab=29), random_tokens(2, 4, seed=5, vocab=29)
        diff = (model(src, tgt_in) - reference(src, tgt_in, None, None)[2]).abs().max()
    assert diff > 1e-3


# --------------------------------------------------------- multi-head attention alone
def make_attention_pair(seed: int = 0) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    torch.manual_seed(seed)
    ours = perturb_(MultiHeadAttention(16, 4), seed=seed).eval()
    theirs = nn.MultiheadAttention(16, 4, dropout=0.0, batch_first=True).eval()
    copy_attention(ours, theirs)
    return ours, theirs


@pytest.mark.parametrize("kind", ["self", "cross", "causal_self"])
def test_multi_head_attention_matches_nn_multihead_attention(kind: str) -> None:
    ours, theirs = make_attention_pair()
    generator = torch.Generator().manual_seed(6)
    query = torch.randn(3, 5, 16, generator=generator)
    memory = query if kind != "cross" else torch.randn(3, 7, 16, generator=generator)
    real = torch.ones(memory.shape[:2], dtype=torch.bool)
    real[1, 3:] = False
    real[2, 1:] = False

    our_mask = attention_mask(real, causal=kind == "causal_self")
    their_mask = blocked_future(5) if kind == "causal_self" else None
    our_memory = memory if kind == "cross" else None
    collected: list[torch.Tensor] = []
    with torch.no_grad():
        fast = ours(query, AttentionContext(mask=our_mask, memory=our_memory))
        explicit = ours(query, AttentionContext(mask=our_mask, memory=our_memory, attention_maps=collected))
        expected, per_head = theirs(
            query, memory, memory, key_padding_mask=~real, attn_mask=their_mask,
            need_weights=True, average_attn_weights=False,
        )
        _, averaged = theirs(query, memory, memory, key_padding_mask=~real, attn_mask=their_mask)

    (weights,) = collected
    assert weights.shape == per_head.shape == (3, 4, 5, memory.size(1))
    assert (fast - expected).abs().max() <= ATOL
    assert (explicit - expected).abs().max() <= ATOL
    assert (weights - per_head).abs().max() <= ATOL
    assert (weights.mean(dim=1) - averaged).abs().max() <= ATOL
    assert averaged.shape == (3, 5, memory.size(1))


def test_output_mask_projects_only_selected_positions() -> None:
    """`output_mask` gives the full pass's logits at the selected positions, row-major."""
    model = make_model(norm_first=False, shared=True)
    src = pad_to_lengths(random_tokens(2, 6, seed=8, vocab=29), [6, 3])
    tgt_in = pad_to_lengths(random_tokens(2, 5, seed=9, vocab=29), [5, 2])
    selected = tgt_in != 0
    with torch.no_grad():
        full = model(src, tgt_in)
        picked = model(src, tgt_in, output_mask=selected)
    assert picked.shape == (7, 29)
    torch.testing.assert_close(picked, full[selected], atol=ATOL, rtol=0)
