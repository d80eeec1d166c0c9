"""Scaled dot-product attention (Sec. 3.2.1, Eq. 1).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Two paths give the same result: an explicit one written out as in the paper, which can
return the attention probabilities, and a fast one through
`torch.nn.functional.scaled_dot_product_attention` (fused kernels) used when the
probabilities are not needed. Masks follow the convention of `aiayn.model.masks` (True = may
attend). `AttentionFunction` is the signature of this function, which multi-head attention
holds as its `attention` (a runtime may give it another implementation of the same formula).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

AttentionFunction = Callable[..., tuple[Tensor, Tensor | None]]
"""(query, key, value, mask=, dropout=, need_weights=, is_causal=) -> (output, probabilities),
as `scaled_dot_product_attention`."""


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout: float = 0.0,
    need_weights: bool = False,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Attention of each query over all keys.

    Args:
        query: (B, H, T, d_k).
        key: (B, H, S, d_k).
        value: (B, H, S, d_v).
        mask: bool, broadcastable to (B, H, T, S), True where attention is allowed.
        dropout: dropout probability on the attention probabilities (0 in eval mode).
        need_weights: return the attention probabilities (forces the explicit path).
        is_causal: the mask is exactly the subsequent mask with T == S and nothing else;
            lets the fast path use its causal kernel (ignored when `mask` is given).

    Returns:
        (output (B, H, T, d_v), probabilities (B, H, T, S) or None).
    """
    if not need_weights:
        dtype = query.dtype
        on_cpu_bf16 = query.device.type == "cpu" and (
            dtype == torch.bfloat16 or torch.is_autocast_enabled("cpu")
        )
        if on_cpu_bf16:
            # On CPU, torch's bf16 flash-attention backward is far slower than its fp32 one
            # (benchmarks/RESULTS.md); attention is a small part of the FLOPs, so it runs in fp32.
            query, key, value = query.float(), key.float(), value.float()
        with torch.autocast("cpu", enabled=False) if on_cpu_bf16 else contextlib.nullcontext():
            output = F.scaled_dot_product_attention(
                query, key, value,
                attn_mask=mask,
                dropout_p=dropout,
                is_causal=is_causal and mask is None,
            )
        return output.to(dtype), None

    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, H, T, S)
    if mask is None and is_causal:
        length = scores.size(-1)
        mask = torch.ones(length, length, dtype=torch.bool, device=scores.device).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    probabilities = scores.softmax(dim=-1)
    if mask is not None:
        # A query whose keys are all blocked gets all-zero weights (and a zero output), as in
        # the fast path, instead of softmax's NaNs, which would spread to every later layer.
        probabilities = probabilities.masked_fill(~mask, 0.0)
    attended = F.dropout(probabilities, p=dropout) if dropout > 0 else probabilities
    return attended @ value, probabilities
