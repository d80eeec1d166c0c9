"""Pieces shared by the decoders: output length limits, the length penalty, log-probabilities.

Conventions of every decoder in `aiayn.decoding`:

- the special ids are the model's: `config.pad_id`, `config.bos_id`, `config.eos_id` (stored
  in its `config.json`, set by its tokenizer);
- the source is (B, S) token ids, right-padded with `config.pad_id`, each row ending with
  `<eos>` (see `aiayn.data.batching`); the decoder starts from `<bos>`;
- a *hypothesis* is the list of generated tokens without `<bos>` and without the final
  `<eos>`; its length |Y| counts the generated tokens *including* `<eos>` (a hypothesis
  cut off at the length limit has no `<eos>`, and |Y| is the limit);
- `<pad>` and `<bos>` are never generated (their log-probability is set to -inf; a `<bos>`
  that is also `<eos>`, as GPT-2's `<|endoftext|>`, stays allowed), but their probability
  mass is not redistributed: scores are log-probabilities under the model's full softmax.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.model.masks import padding_mask


class Hypothesis(NamedTuple):
    """One decoded output: token ids (no `<bos>`/`<eos>`) and its score; `constraints_met`
    is False only for an output of a constrained search that reached its length limit before
    containing every phrase it had to (`aiayn.decoding.constrained_search`)."""

    tokens: list[int]
    score: float
    constraints_met: bool = True


def output_length_limit(
    source_length: int,
    max_len_extra: int = 50,
    max_steps: int | None = None,
    model_max_len: int | None = None,
    max_output_ratio: float | None = None,
) -> int:
    """The output-length rule: the most tokens (including `<eos>`) a sentence may generate.

    Args:
        source_length: its source tokens + `<eos>`.
        max_len_extra: tokens allowed beyond the source length (paper Sec. 6.1: "input
            length + 50").
        max_steps: if given, the limit instead of source length + `max_len_extra`.
        model_max_len: the positional table size: decoder input positions 0 .. limit-1
            must exist, so no limit exceeds it.
        max_output_ratio: if given, also at most ceil(ratio x source length) (`Controls`).

    Returns:
        the limit, >= 1.
    """
    limit = max_steps if max_steps is not None else source_length + max_len_extra
    if model_max_len is not None:
        limit = min(limit, model_max_len)
    limit = max(limit, 1)
    if max_output_ratio is not None:
        limit = min(limit, max(1, math.ceil(max_output_ratio * source_length)))
    return limit


def output_limits(
    src: Tensor,
    pad_id: int,
    max_len_extra: int = 50,
    max_steps: int | None = None,
    model_max_len: int | None = None,
    max_output_ratio: float | None = None,
) -> Tensor:
    """`output_length_limit` of each row of `src` (B, S), whose non-pad positions (source
    tokens + `<eos>`) count as its source length: a (B,) LongTensor, each >= 1."""
    lengths = (src != pad_id).sum(dim=1).tolist()
    limits = [
        output_length_limit(n, max_len_extra, max_steps, model_max_len, max_output_ratio) for n in lengths
    ]
    return torch.tensor(limits, dtype=torch.long, device=src.device)


def length_penalty(length: Tensor | int | float, alpha: float) -> Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016; paper Sec. 6.1).

    A hypothesis' score is log P(Y | X) / lp(Y); alpha = 0 gives raw log-probabilities.
    `length` is |Y|, the number of generated tokens including `<eos>`.
    """
    length = torch.as_tensor(length, dtype=torch.float32)
    return ((5.0 + length) / 6.0) ** alpha


def never_generated(pad_id: int, bos_id: int, eos_id: int) -> tuple[int, ...]:
    """The ids a decoder never emits: pad, and bos unless it is also eos (GPT-2's
    `<|endoftext|>`)."""
    return tuple(sorted({pad_id, bos_id} - {eos_id}))


def log_probs(logits: Tensor, forbidden: tuple[int, ...], overwrite: bool = False) -> Tensor:
    """(N, V) next-token logits -> (N, V) log-probabilities, -inf at `forbidden` ids
    (see `never_generated`).

    Half-precision logits are promoted to float32 before the softmax. `overwrite`: float32
    logits the caller no longer needs are overwritten (no second (N, V) buffer; same values).
    """
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    if overwrite and logits.dtype == torch.float32 and logits.is_contiguous():
        logp = torch._log_softmax(logits, -1, False, out=logits)
    else:
        logp = F.log_softmax(logits, dim=-1)
    for token in forbidden:  # a column view each: cheaper than one fancy-indexed write
        logp[:, token] = float("-inf")
    return logp


def padding_mask_or_none(tokens: Tensor, pad_id: int) -> Tensor | None:
    """`padding_mask(tokens)`, or None when the batch holds no padding at all.

    Returning None lets attention take its unmasked (or pure causal) fast path. Deciding that
    reads the mask on the host (a device synchronisation), so the searches call it once per
    batch; the model's own passes derive `padding_mask(tokens)` when given no mask and never
    synchronise.
    """
    mask = padding_mask(tokens, pad_id)
    return None if bool(mask.all()) else mask
