"""Multi-head attention (Sec. 3.2.2).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Used three ways (Sec. 3.2.3): encoder self-attention, masked decoder self-attention, and
encoder-decoder (cross) attention, where "the queries come from the previous decoder
layer, and the memory keys and values come from the output of the encoder".

The h projections W_i^Q, W_i^K, W_i^V are stored together as one (3 d_model, d_model)
matrix `in_proj`: self-attention projects Q, K and V in one matmul; cross-attention
projects Q from the decoder and K, V (one fused matmul) from the encoder output.

In the packed training pass (`aiayn.model.packing`) the inputs are (N, D) real tokens: the
projections run on them alone, and only the score matmuls see the padded (B, T) layout.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model.attention import scaled_dot_product_attention
from aiayn.model.kv_cache import AttentionCache
from aiayn.model.packing import PackedLayout


class MultiHeadAttention(nn.Module):
    """h parallel scaled dot-product attention heads with input and output projections.

    Args:
        d_model: model width; split into `num_heads` heads of d_model / num_heads.
        num_heads: h.
        dropout: dropout on the attention probabilities.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model)  # [W^Q; W^K; W^V]
        self.out_proj = nn.Linear(d_model, d_model)  # W^O

    def _split_heads(self, x: Tensor, parts: int) -> list[Tensor]:
        """(B, T, parts * D) -> `parts` tensors of (B, H, T, d_k)."""
        batch, length, _ = x.shape
        x = x.view(batch, length, parts, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return list(x.unbind(0))

    def forward(
        self,
        query: Tensor,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        cache: AttentionCache | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
        query_layout: PackedLayout | None = None,
        memory_layout: PackedLayout | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from `query` to itself (self-attention) or to `memory` (cross-attention).

        Args:
            query: (B, T, D) queries (and keys/values for self-attention).
            memory: (B, S, D) encoder output for cross-attention; None for self-attention.
            mask: bool, broadcastable to (B, H, T, S), True where attention is allowed.
            cache: incremental decoding. Self-attention appends this step's keys/values
                and attends over all cached ones; cross-attention computes the memory's
                keys/values on first use and reuses them afterwards.
            need_weights: also return per-head attention probabilities (B, H, T, S).
            is_causal: the mask is the plain subsequent mask (lets SDPA use its causal kernel).
            query_layout, memory_layout: `query` (resp. `memory`) is packed, (N, D) real
                tokens of that padded layout; the output is then packed the same way.

        Returns:
            (output (B, T, D) or packed (N, D), probabilities (B, H, T, S) or None).
        """
        expected = 2 if query_layout is not None else 3
        if query.dim() != expected or query.size(-1) != self.d_model:
            shape = "(N, " if query_layout is not None else "(B, T, "
            raise ValueError(
                f"MultiHeadAttention expects query of shape {shape}{self.d_model}), "
                f"got {tuple(query.shape)}"
            )

        def padded(x: Tensor, layout: PackedLayout | None) -> Tensor:
            return layout.unpack(x) if layout is not None else x

        if memory is None:  # self-attention: one fused Q, K, V projection
            q, k, v = self._split_heads(padded(self.in_proj(query), query_layout), 3)
            if cache is not None:
                k, v = cache.append(k, v)
        else:  # cross-attention: Q from the decoder, K and V from the encoder output
            d = self.d_model
            q_proj = F.linear(query, self.in_proj.weight[:d], self.in_proj.bias[:d])
            (q,) = self._split_heads(padded(q_proj, query_layout), 1)
            if cache is not None and cache.key is not None:
                k, v = cache.key, cache.value
            else:
                kv = F.linear(memory, self.in_proj.weight[d:], self.in_proj.bias[d:])
                k, v = self._split_heads(padded(kv, memory_layout), 2)
                if cache is not None:
                    cache.key, cache.value = k, v
        attended, weights = scaled_dot_product_attention(
            q, k, v,
            mask=mask,
            dropout=self.dropout if self.training else 0.0,
            need_weights=need_weights,
            is_causal=is_causal,
        )
        batch, _, length, _ = attended.shape
        attended = attended.transpose(1, 2).reshape(batch, length, self.d_model)  # Concat(heads)
        if query_layout is not None:
            attended = query_layout.pack(attended)
        return self.out_proj(attended), weights
