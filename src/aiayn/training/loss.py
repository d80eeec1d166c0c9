"""Label-smoothed cross-entropy (Sec. 5.4).

"During training, we employed label smoothing of value eps_ls = 0.1. This hurts perplexity,
as the model learns to be more unsure, but improves accuracy and BLEU score."

Padding positions are excluded. The loss is summed over target tokens, so that the caller
can normalise by the number of target tokens in the whole (accumulated or distributed)
batch. `F.cross_entropy(label_smoothing=...)` computes one log-softmax and never builds a
one-hot matrix.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.data.batching import Batch, BatchedDataset
from aiayn.data.special_tokens import PAD_ID
from aiayn.eval_mode import eval_mode
from aiayn.training.device import autocast
from aiayn.training.task import BatchT, LossFn


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


def translation_loss(model: nn.Module, batch: Batch, smoothing: float) -> tuple[torch.Tensor, int]:
    """Summed label-smoothed loss of a translation batch; logits only at non-pad targets."""
    keep = batch.labels != PAD_ID
    logits = model(batch.src, batch.tgt_in, output_mask=keep)  # (N, V)
    return label_smoothed_nll(logits, batch.labels[keep], smoothing), batch.num_tgt_tokens


def validation_loss(
    model: nn.Module,
    dataset: BatchedDataset[BatchT],
    batch_tokens: int,
    device: torch.device,
    precision: str,
    loss_fn: LossFn[BatchT],
) -> float:
    """Mean negative log-likelihood per prediction (no label smoothing) over `dataset`."""
    total, tokens = 0.0, 0
    with eval_mode(model):
        for batch in dataset.batches(batch_tokens, shuffle=False):
            with autocast(precision, device):
                loss, num_tokens = loss_fn(model, batch.to(device), 0.0)
            total += float(loss)
            tokens += num_tokens
    return total / max(tokens, 1)
