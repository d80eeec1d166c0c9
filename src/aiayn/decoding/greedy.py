"""Greedy decoding for the encoder-decoder Transformer (Sec. 3: auto-regressive decoding).

"At each step the model is auto-regressive, consuming the previously generated symbols as
additional input when generating the next." The source is encoded once; then each step
feeds the last generated token to the decoder and picks the most probable next token.

With the key/value cache (`use_cache=True`, the default) a step runs the decoder on one
position per row: self-attention keys/values of earlier positions are kept, and the
encoder-decoder attention keys/values are projected from the encoder output once.
`use_cache=False` re-runs the decoder over the whole prefix at every step: the textbook
definition, kept to prove both give the same output and to measure the cache's speed-up.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from aiayn.data.special_tokens import BOS_ID, EOS_ID
from aiayn.decoding.common import log_probs, output_limits
from aiayn.eval_mode import eval_mode
from aiayn.model.masks import padding_mask_or_none
from aiayn.model.transformer import Transformer


class GreedyOutput(NamedTuple):
    """Per sentence: generated tokens (no `<bos>`/`<eos>`) and their summed log-probability."""

    tokens: list[list[int]]
    scores: list[float]


def greedy_search(
    model: Transformer,
    src: Tensor,
    max_len_extra: int = 50,
    max_steps: int | None = None,
    use_cache: bool = True,
    stop_at_eos: bool = True,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> GreedyOutput:
    """Decode a batch of sentences, taking the arg-max token at every step.

    Args:
        model: the Transformer (put in eval mode for the call).
        src: (B, S) source ids, right-padded, each row ending with `<eos>`.
        max_len_extra: each row generates at most (its source length + max_len_extra)
            tokens including `<eos>`, capped by the model's `max_len`.
        max_steps: instead, a fixed limit for every row.
        use_cache: decode one position per step with the key/value cache (fast), or
            re-run the decoder on the whole prefix (slow, for checks and benchmarks).
        stop_at_eos: False keeps generating after `<eos>` up to the limit (benchmarks).

    Returns:
        `GreedyOutput`: B token lists (without `<eos>`) and B summed log-probabilities of
        the generated tokens (`<eos>` included).
    """
    with eval_mode(model):
        config = model.config
        batch = src.size(0)
        src_mask = padding_mask_or_none(src, config.pad_id)  # (B, S) or None
        limits = output_limits(src, config.pad_id, max_len_extra, max_steps, config.max_len)  # (B,)
        memory = model.encode(src, src_mask)  # (B, S, D)
        cache = model.new_cache() if use_cache else None

        steps = int(limits.max())
        out = torch.full((batch, steps + 1), config.pad_id, dtype=torch.long, device=src.device)
        out[:, 0] = bos_id  # out[:, : t + 1] is the decoder input at step t
        scores = torch.zeros(batch, device=src.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        for t in range(steps):
            tgt_in = out[:, t : t + 1] if use_cache else out[:, : t + 1]  # (B, 1) or (B, t+1)
            hidden = model.decode(tgt_in, memory, src_mask, cache=cache, return_hidden=True)
            logp = log_probs(model.output_projection(hidden[:, -1]))  # (B, V)
            best_logp, best = logp.max(dim=-1)  # (B,), (B,)
            active = ~finished
            out[:, t + 1] = torch.where(active, best, config.pad_id)
            scores += torch.where(active, best_logp, 0.0)
            if stop_at_eos:
                finished |= best == eos_id
            finished |= limits <= t + 1
            if bool(finished.all()):
                break

        tokens = []
        for row in out[:, 1:].tolist():
            row = [tok for tok in row if tok != config.pad_id]
            if stop_at_eos and eos_id in row:
                row = row[: row.index(eos_id)]
            tokens.append(row)
        return GreedyOutput(tokens, scores.tolist())
