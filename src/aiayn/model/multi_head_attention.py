"""Multi-head attention (Sec. 3.2.2).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Used three ways (Sec. 3.2.3): encoder self-attention, masked decoder self-attention, and
encoder-decoder (cross) attention, where "the queries come from the previous decoder
layer, and the memory keys and values come from the output of the encoder". Which one a
call is, and how it is masked, is said by its `AttentionContext` (`aiayn.model.context`).

The h projections W_i^Q, W_i^K, W_i^V (each d_model x d_k) are stored together as one
(3 h d_k, d_model) matrix `in_proj`, and W^O (h d_v x d_model) as `out_proj`: self-attention
projects Q, K and V in one matmul; cross-attention projects Q from the decoder and K, V (one
fused matmul) from the encoder output. The paper takes d_k = d_v = d_model / h (Sec. 3.2.2),
so that h d_k = d_model; Table 3 row (B) varies d_k at fixed d_model and h.

Two things sit around the formula without changing it: the key/value cache of incremental
decoding (`aiayn.model.kv_cache`) supplies earlier keys and values, and in the packed
training pass (`aiayn.model.packing`) the projections run on the real tokens alone, padded
to (B, T) only for the score matmuls.

Against the reference: `aiayn.paper.MultiHeadAttention` keeps W^Q, W^K, W^V as three matrices
and makes three products; `FusedProjection` stacks them as the rows of `in_proj`, so its one
product holds the three side by side: the same numbers
(`tests/paper/test_fast_paths.py::test_the_fused_in_proj_is_the_references_four_matrices`; whole
models: `tests/paper/test_equality.py::test_log_probs_equal_on_random_configs`).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model.attention import AttentionFunction, scaled_dot_product_attention
from aiayn.model.context import AttentionContext
from aiayn.model.kv_cache import AttentionCache
from aiayn.model.packing import padded


class FusedProjection(nn.Linear):
    """Several projections stored as one `nn.Linear` ([W^Q; W^K; W^V]): computed together by
    `forward`, or a part of the output features alone by `project_features`.

    A runtime's copy of the model (`aiayn.runtime.network`) holds each linear layer in a
    layer of its own computing both another way; the model's layers stay as they are.
    """

    def project_features(self, x: Tensor, start: int, stop: int) -> Tensor:
        """(..., in) -> (..., stop - start): x W[start:stop]^T + b[start:stop]."""
        bias = None if self.bias is None else self.bias[start:stop]
        return F.linear(x, self.weight[start:stop], bias)


class MultiHeadAttention(nn.Module):
    """h parallel scaled dot-product attention heads with input and output projections.

    Args:
        d_model: model width of the input and output.
        num_heads: h.
        dropout: dropout on the attention probabilities.
        head_dim: d_k = d_v of each head; None: d_model / h (Sec. 3.2.2).

    `attention` is Eq. 1 as this module computes it (`scaled_dot_product_attention`); a
    runtime's copy of the model may hold another implementation of it there.
    """

    def __init__(
        self, d_model: int, num_heads: int, dropout: float = 0.0, head_dim: int | None = None
    ) -> None:
        super().__init__()
        if head_dim is None and d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads if head_dim is None else head_dim
        self.inner_dim = num_heads * self.head_dim  # h d_k: the width of Concat(head_1..head_h)
        self.dropout = dropout
        self.in_proj = FusedProjection(d_model, 3 * self.inner_dim)  # [W^Q; W^K; W^V]
        self.out_proj = nn.Linear(self.inner_dim, d_model)  # W^O
        self.attention: AttentionFunction = scaled_dot_product_attention

    def forward(
        self, query: Tensor, context: AttentionContext, cache: AttentionCache | None = None
    ) -> Tensor:
        """Attend from `query` to itself (self-attention) or to `context.memory` (cross-attention).

        Args:
            query: (B, T, D) states, or packed (N, D) when `context.query_layout` is set.
            context: the mask, causality, memory and layouts of this pass.
            cache: this layer's keys/values during incremental decoding, filled in place.

        In encoder-decoder attention the query batch may be g = `context.groups` times the
        memory's (B = g*b, rows i*g .. i*g+g-1 belonging to memory row i, as the beams of a beam
        search): each memory row's keys and values are then projected once and shared by its g
        rows. Any other B is a `ValueError` naming the shapes.

        Returns:
            (B, T, D) (or packed (N, D)), like `query`. With `context.attention_maps` set, the
            (B, H, T, S) attention probabilities are appended to it.
        """
        self._check_query(query, context)
        rows = query.size(0)
        q, k, v = self.project_heads(query, context, cache)  # (B, H, T, d_k), (B, H, S, d_k) twice
        heads, probabilities = self.attention(
            q, k, v,
            mask=context.mask,
            dropout=self.dropout if self.training else 0.0,
            need_weights=context.wants_weights,
            is_causal=context.is_causal,
        )  # (B, H, T, d_k)
        context.record(probabilities)
        B, H, T, d_k = heads.size()
        concat = heads.transpose(1, 2).reshape(B, T, H * d_k)  # Concat(head_1..head_h): (B, T, H d_k)
        if context.groups != 1:  # beams sharing a memory: (b, g*T, .) -> (B, T, .)
            concat = concat.view(rows, T * B // rows, H * d_k)
        if context.query_layout is not None:
            concat = context.query_layout.pack(concat)  # (B, T, H d_k) -> (N, H d_k)
        return self.out_proj(concat)  # W^O: (B, T, D) (or (N, D))

    def project_heads(
        self, query: Tensor, context: AttentionContext, cache: AttentionCache | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Q W^Q, K W^K, V W^V split into heads: (B, H, T, d_k) queries, (B, H, S, d_k) keys, values.

        Self-attention projects all three from `query` and adds this step's keys and values to
        the cache; cross-attention projects the memory's keys and values once per cache.
        """
        d = self.inner_dim  # h d_k (= D in the paper)
        if context.memory is None:  # self-attention: Q, K and V in one fused matmul
            qkv = padded(self.in_proj(query), context.query_layout)  # (B, T, 3 h d_k)
            q, k, v = self.split_heads(qkv, 3)
            if cache is not None:
                k, v = cache.append(k, v)  # (B, H, S_cached + T, d_k)
            return q, k, v
        q_proj = padded(self.in_proj.project_features(query, 0, d), context.query_layout)  # Q W^Q
        if context.groups != 1:
            # Beam search: the g consecutive rows of each sentence share its memory, so their
            # queries become one sentence's g*T queries over keys/values computed once.
            q_proj = q_proj.reshape(context.memory.size(0), -1, d)  # (B, T, h d_k) -> (b, g*T, h d_k)
        (q,) = self.split_heads(q_proj, 1)  # (B, T, h d_k) -> (B, H, T, d_k)
        if cache is not None and cache.key is not None:
            return q, cache.key, cache.value
        kv = self.in_proj.project_features(context.memory, d, 3 * d)  # K W^K, V W^V
        k, v = self.split_heads(padded(kv, context.memory_layout), 2)  # (B, S, 2 h d_k) -> 2 x (B, H, S, d_k)
        if cache is not None:
            cache.store(k, v)
        return q, k, v

    def split_heads(self, x: Tensor, parts: int) -> list[Tensor]:
        """(B, T, parts * h d_k) -> `parts` tensors of (B, H, T, d_k)."""
        B, T, _ = x.size()
        x = x.view(B, T, parts, self.num_heads, self.head_dim)  # (B, T, parts, H, d_k)
        return list(x.permute(2, 0, 3, 1, 4).unbind(0))  # parts x (B, H, T, d_k)

    def _check_query(self, query: Tensor, context: AttentionContext) -> None:
        packed = context.query_layout is not None
        if query.dim() != (2 if packed else 3) or query.size(-1) != self.d_model:
            shape = "(N, " if packed else "(B, T, "
            raise ValueError(
                f"MultiHeadAttention expects query of shape {shape}{self.d_model}), "
                f"got {tuple(query.shape)}"
            )
        memory, groups = context.memory, context.groups
        if memory is None or packed or context.memory_layout is not None:
            return
        if query.size(0) != groups * memory.size(0):  # g beams per memory row, or one row each
            raise ValueError(
                f"MultiHeadAttention: query {tuple(query.shape)} over memory {tuple(memory.shape)} "
                f"in groups of {groups}: needs B == groups * b, got {query.size(0)} != "
                f"{groups} * {memory.size(0)}"
            )
