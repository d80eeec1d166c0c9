"""Label-smoothed cross-entropy (Sec. 5.4).

"During training, we employed label smoothing of value eps_ls = 0.1. This hurts perplexity,
as the model learns to be more unsure, but improves accuracy and BLEU score."

Padding positions are excluded. The loss is summed over target tokens, so that the caller
can normalise by the number of target tokens in the whole (accumulated or distributed)
batch. `F.cross_entropy(label_smoothing=...)` computes one log-softmax and never builds a
one-hot matrix.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll(logits: Tensor, labels: Tensor, smoothing: float = 0.1, pad_id: int = 0) -> Tensor:
    """Summed label-smoothed negative log-likelihood.

    Args:
        logits: (N, V) or (B, T, V) scores.
        labels: (N,) or (B, T) target ids; `pad_id` positions are ignored.
        smoothing: eps_ls; the target distribution is (1 - eps) on the label plus eps / V
            spread over the whole vocabulary.

    Returns:
        Scalar sum over non-pad tokens (computed in float32).
    """
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        labels.reshape(-1),
        ignore_index=pad_id,
        label_smoothing=smoothing,
        reduction="sum",
    )
