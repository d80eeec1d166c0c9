"""Scaled dot-product attention (Sec. 3.2.1, Eq. 1).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Two paths give the same result: an explicit one written out as in the paper, which can
return the attention probabilities, and a fast one through
`torch.nn.functional.scaled_dot_product_attention` (fused kernels) used when the
probabilities are not needed. Masks follow the convention of `aiayn.model.masks` (True = may
attend). `AttentionFunction` is the signature of this function, which multi-head attention
holds as its `attention`: the engine may give it another implementation of the same formula
(the runtime's compiled step, `aiayn.runtime.compiled`; bf16 training on CPU,
`aiayn.training.precision.float32_attention`).

Against the reference: the fast path computes Eq. 1 inside PyTorch's fused kernel without
materialising the (T, S) probabilities; it is the formula of `aiayn.paper.attention`, its
output equal up to float rounding
(`tests/paper/test_fast_paths.py::test_the_fused_kernel_is_eq_1_of_the_reference`; the two
paths here under arbitrary masks:
`tests/model/test_attention.py::test_paths_agree_under_arbitrary_masks`).
"""

from __future__ import annotations

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
        output = F.scaled_dot_product_attention(
            query, key, value,
            attn_mask=mask,
            dropout_p=dropout,
            is_causal=is_causal and mask is None,
        )
        return output, None

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
