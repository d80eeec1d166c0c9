"""Label-smoothed cross-entropy (Sec. 5.4).

"During training, we employed label smoothing of value eps_ls = 0.1. This hurts perplexity,
as the model learns to be more unsure, but improves accuracy and BLEU score."

Padding positions are excluded. The loss is summed over target tokens, so that the caller
can normalise by the number of target tokens in the whole (accumulated or distributed)
batch. `F.cross_entropy(label_smoothing=...)` computes one log-softmax and never builds a
one-hot matrix.

Translation training projects the decoder states to the vocabulary inside the loss,
`projected_label_smoothed_nll`, a slice of rows at a time, with the gradient worked out in the
same pass: the (N, V) logits, their log-softmax and their gradient, the largest tensors of a
step, never exist whole. That keeps a step's memory small, and the same size from batch to
batch (`aiayn.training.memory` says why that matters on a CPU).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.core.eval_mode import eval_mode
from aiayn.data.batching import Batch, BatchedDataset
from aiayn.training.device import autocast
from aiayn.training.task import BatchT, LossFn


def label_smoothed_nll(logits: Tensor, labels: Tensor, smoothing: float, pad_id: int) -> Tensor:
    """Summed label-smoothed negative log-likelihood.

    Args:
        logits: (N, V) or (B, T, V) scores.
        labels: (N,) or (B, T) target ids; `pad_id` positions are ignored.
        smoothing: eps_ls; the target distribution is (1 - eps) on the label plus eps / V
            spread over the whole vocabulary.
        pad_id: the tokenizer's padding id (batches carry it as `batch.pad_id`).

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


LOGITS_PER_SLICE = 1 << 22  # (rows x vocabulary) logits at a time: 16 MiB in float32


class _ProjectedLabelSmoothedNLL(torch.autograd.Function):
    """`label_smoothed_nll(hidden @ weight.T, labels)`, slice by slice; backward scales the
    gradients the forward pass worked out (the loss ends the graph: they are all it needs)."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: Tensor,
        weight: Tensor,
        labels: Tensor,
        smoothing: float,
        compute_dtype: torch.dtype,
        with_grad: bool,
    ) -> Tensor:
        vocab = weight.size(0)
        rows = max(1, LOGITS_PER_SLICE // vocab)
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_hidden = torch.empty_like(hidden) if with_grad else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if with_grad else None
        with torch.autocast(hidden.device.type, enabled=False):  # the dtypes are set here
            weight_c, hidden_c = weight.to(compute_dtype), hidden.to(compute_dtype)
            for start in range(0, hidden.size(0), rows):
                states, targets = hidden_c[start : start + rows], labels[start : start + rows, None]
                log_probs = torch.log_softmax((states @ weight_c.t()).float(), dim=-1)  # (n, V)
                picked = log_probs.gather(1, targets)
                total -= (1.0 - smoothing) * picked.sum() + smoothing / vocab * log_probs.sum()
                if with_grad:  # d loss / d logits = softmax - (1 - eps) * one_hot - eps / V
                    grad = log_probs.exp_().sub_(smoothing / vocab)
                    grad.scatter_add_(1, targets, torch.full_like(picked, smoothing - 1.0))
                    grad = grad.to(compute_dtype)
                    grad_hidden[start : start + rows] = grad @ weight_c
                    grad_weight += (grad.t() @ states).float()
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.weight_dtype = weight.dtype
        return total

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor) -> tuple[Tensor | None, ...]:
        grad_hidden, grad_weight = ctx.saved_tensors
        if grad_hidden is None:
            raise RuntimeError("projected_label_smoothed_nll was computed without gradients")
        return grad_hidden * grad_loss, (grad_weight * grad_loss).to(ctx.weight_dtype), None, None, None, None


# Under `torch.compile` (`aiayn.training.compiled_step`) this runs as written, outside the graphs:
# its loop over slices would fix the number of rows N in a graph, one graph per batch; it is matmuls
# and a log-softmax already, with its gradient worked out in the same pass.
@torch.compiler.disable
def projected_label_smoothed_nll(
    hidden: Tensor, weight: Tensor, labels: Tensor, smoothing: float = 0.1
) -> Tensor:
    """`label_smoothed_nll(hidden @ weight.T, labels, smoothing)` without the whole logits.

    Args:
        hidden: (N, D) states of the N positions to predict (no padding).
        weight: (V, D) output projection (no bias).
        labels: (N,) target ids.

    Returns:
        Scalar sum over the N positions (float32). Under autocast the matmuls run in the
        autocast dtype and the softmax in float32, as `label_smoothed_nll` of autocast logits.
    """
    device_type = hidden.device.type
    autocasting = torch.is_autocast_enabled(device_type)
    compute_dtype = torch.get_autocast_dtype(device_type) if autocasting else weight.dtype
    with_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    return _ProjectedLabelSmoothedNLL.apply(hidden, weight, labels, smoothing, compute_dtype, with_grad)


def translation_loss(model: nn.Module, batch: Batch, smoothing: float) -> tuple[torch.Tensor, int]:
    """Summed label-smoothed loss of a translation batch, at the non-pad targets only."""
    output_mask = batch.labels != batch.pad_id  # (B, T): the positions to predict
    hidden = model(batch.src, batch.tgt_in, output_mask=output_mask, return_hidden=True)  # (N, D)
    projection = getattr(model, "module", model).output_projection  # the model inside DDP's wrapper
    # A variable of its own, not an argument: where `torch.compile` breaks its graph (a mask's
    # selection has a data-dependent size), what follows then takes that size as a dynamic one.
    labels = batch.labels[output_mask]  # (N,)
    if projection.bias is not None:  # an imported Marian model's logits bias: the plain projection
        logits = projection(hidden)  # (N, V)
        return label_smoothed_nll(logits, labels, smoothing, batch.pad_id), batch.num_targets
    return projected_label_smoothed_nll(hidden, projection.weight, labels, smoothing), batch.num_targets


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
