"""Greedy decoding for the encoder-decoder Transformer (Sec. 3: auto-regressive decoding).

"At each step the model is auto-regressive, consuming the previously generated symbols as
additional input when generating the next." The source is encoded once; then each step
feeds the last generated token to the decoder and picks the most probable next token.

With the key/value cache a step runs the decoder on one position per row: self-attention
keys/values of earlier positions are kept, and the encoder-decoder attention keys/values
are projected from the encoder output once. This gives exactly what re-running the decoder
over the whole prefix at every step (the textbook definition) gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from aiayn.core.eval_mode import eval_mode
from aiayn.decoding.common import never_generated, output_limits, padding_mask_or_none
from aiayn.decoding.controls import (
    NO_CONTROLS,
    Controls,
    controlled_log_probs,
    draw,
    prefix_step,
    prefix_tensor,
)
from aiayn.decoding.top_k import row_top_k
from aiayn.model.transformer import Transformer
from aiayn.runtime.steps import StepRunner, as_runner


class GreedyOutput(NamedTuple):
    """Per sentence: generated tokens (no `<bos>`/`<eos>`) and their summed log-probability."""

    tokens: list[list[int]]
    scores: list[float]


def greedy_search(
    model: Transformer | StepRunner,
    src: Tensor,
    max_len_extra: int = 50,
    max_steps: int | None = None,
    bos_id: int | None = None,
    eos_id: int | None = None,
    controls: Controls = NO_CONTROLS,
    prefixes: Sequence[Sequence[int]] | None = None,
) -> GreedyOutput:
    """Decode a batch of sentences, taking the arg-max token at every step.

    Args:
        model: the Transformer (put in eval mode for the call), or a step runner computing it
            (`aiayn.runtime.steps`; the `Ensemble` of `aiayn.inference` is one).
        src: (B, S) source ids, right-padded, each row ending with `<eos>`.
        max_len_extra: each row generates at most (its source length + max_len_extra)
            tokens including `<eos>`, capped by the model's `max_len`.
        max_steps: instead, a fixed limit for every row.
        bos_id, eos_id: the start and end ids (default: the model config's).
        controls: n-gram blocking, repetition penalty, length ratio, and sampling instead of
            the arg-max (`aiayn.decoding.controls`).
        prefixes: B target prefixes (ids, may be empty), forced then continued.

    Returns:
        `GreedyOutput`: B token lists (without `<eos>`) and B summed log-probabilities of
        the generated tokens (`<eos>` included).
    """
    runner = as_runner(model)
    with eval_mode(runner.network):
        config = runner.config
        bos_id = config.bos_id if bos_id is None else bos_id
        eos_id = config.eos_id if eos_id is None else eos_id
        forbidden = never_generated(config.pad_id, bos_id, eos_id)
        batch = src.size(0)
        src_padding_mask = padding_mask_or_none(src, config.pad_id)  # (B, S) or None
        limits = output_limits(
            src, config.pad_id, max_len_extra, max_steps, config.max_len, controls.max_output_ratio
        )  # (B,)
        prefix = prefix_tensor(prefixes, batch, src.device)  # (B, P) or None
        generator = controls.generator(src.device) if controls.sample else None
        uses_history = controls.repetition_penalty != 1.0 or controls.no_repeat_ngram_size > 0
        memory = runner.encode(src, src_padding_mask)  # (B, S, D)
        cache = runner.new_cache()

        steps = int(limits.max())
        out = torch.full((batch, steps + 1), config.pad_id, dtype=torch.long, device=src.device)
        out[:, 0] = bos_id  # out[:, t] is the decoder input at step t
        scores = torch.zeros(batch, device=src.device)
        # Rows leave the batch when they finish (their outputs are final), as sentences leave
        # beam search's: `row` maps the b open rows to their sentences.
        row = torch.arange(batch, device=src.device)  # (b,)
        last = out[:, :1]  # (b, 1): the last token of each open row; the cache holds the rest
        for t in range(steps):
            logits = runner.step(last, memory, src_padding_mask, cache)  # (b, V)
            history = out[row, 1 : t + 1] if uses_history else None  # (b, t) the tokens so far
            wanted = prefix_step(prefix, t, 1)  # (b,) forced tokens, or None
            logp = controlled_log_probs(logits, forbidden, controls, history, wanted)  # (b, V)
            if generator is None:
                best_logp, best = row_top_k(logp, 1)  # (b, 1) twice: logp.max(-1)
                best_logp, best = best_logp.squeeze(1), best.squeeze(1)  # (b,), (b,)
            else:
                best = draw(logp, controls, generator)  # (b,)
                best_logp = logp.gather(1, best[:, None]).squeeze(1)
            out[row, t + 1] = best
            scores.index_add_(0, row, best_logp)
            done = (best == eos_id) | (limits <= t + 1)  # (b,)
            last = best[:, None]
            if bool(done.any()):
                keep = (~done).nonzero().flatten()  # (b',) open rows that stay
                if keep.numel() == 0:
                    break
                row, limits, last, memory = row[keep], limits[keep], last[keep], memory[keep]
                prefix = None if prefix is None else prefix[keep]
                src_padding_mask = None if src_padding_mask is None else src_padding_mask[keep]
                cache.reorder(keep)

        tokens = []
        for line in out[:, 1:].tolist():
            line = [tok for tok in line if tok != config.pad_id]
            if eos_id in line:
                line = line[: line.index(eos_id)]
            tokens.append(line)
        return GreedyOutput(tokens, scores.tolist())
