"""Perplexity of a language model: exp of the mean negative log-likelihood per token.

    PPL = exp(-1/N sum_i log p(x_i | x_<i))

A long token stream is cut into consecutive windows of at most `max_len` positions; each
window predicts its tokens from the tokens before them inside the window (no overlap), and
the first token of the stream is not predicted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.core.eval_mode import eval_mode
from aiayn.model.decoder_only import DecoderOnlyLM


class Perplexity(NamedTuple):
    """`perplexity` = exp(`nll`), `nll` = mean negative log-likelihood (nats) over `tokens`."""

    perplexity: float
    nll: float
    tokens: int


def perplexity_from_nll(total_nll: float, num_tokens: int) -> Perplexity:
    """Summed negative log-likelihood (nats) over `num_tokens` tokens -> `Perplexity`."""
    if num_tokens <= 0:
        raise ValueError("perplexity needs at least one predicted token")
    mean = total_nll / num_tokens
    return Perplexity(math.exp(min(mean, 700.0)), mean, num_tokens)


def lm_perplexity(
    model: DecoderOnlyLM,
    tokens: Sequence[int] | Tensor,
    context: int | None = None,
    batch_size: int = 16,
) -> Perplexity:
    """Perplexity of `model` on one token stream.

    Args:
        model: a `DecoderOnlyLM` (put in eval mode for the call).
        tokens: (N,) token ids, N >= 2.
        context: window length in positions (default and maximum: the model's `max_len`).
        batch_size: windows per forward pass.
    """
    device = next(model.parameters()).device
    stream = torch.as_tensor(tokens, dtype=torch.long, device=device).flatten()  # (N,)
    if stream.numel() < 2:
        raise ValueError("perplexity needs at least two tokens")
    context = min(context or model.config.max_len, model.config.max_len)
    # Inputs x = stream[:-1], targets y = stream[1:], cut into (W, C) windows; the last window
    # is padded at its end (causal attention: padding there changes no earlier position).
    count = stream.numel() - 1
    pad = -count % context
    inputs = F.pad(stream[:-1], (0, pad), value=model.config.pad_id).view(-1, context)  # (W, C)
    targets = F.pad(stream[1:], (0, pad), value=-1).view(-1, context)  # (W, C), -1 = ignored
    total = 0.0
    with eval_mode(model):
        for first in range(0, inputs.size(0), batch_size):
            logits = model(inputs[first : first + batch_size])  # (b, C, V)
            total += float(
                F.cross_entropy(
                    logits.float().flatten(0, 1),
                    targets[first : first + batch_size].flatten(),
                    ignore_index=-1,
                    reduction="sum",
                )
            )
    return perplexity_from_nll(total, count)
