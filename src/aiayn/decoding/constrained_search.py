"""Beam search under lexical constraints: dynamic beam allocation (Post & Vilar 2018),
vectorised over the batch and the beams (Hu et al. 2019), as `beam_search` runs it when a
sentence has constraints (`aiayn.decoding.constraints`).

It is `aiayn.decoding.beam_search`'s search (same rules 1-5, same scores, same cache
handling) with these changes, for each sentence with constraint phrases of T tokens in all:

- candidates: besides the 2K best extensions of each beam, each beam proposes the token that
  extends the match of each of its unmet phrases (the first token of a phrase not begun);
  a candidate proposed twice counts once;
- `<eos>` (and the open beams' cut at the length limit) finishes only a hypothesis that has
  met every phrase; `<eos>` is never a candidate of one that has not;
- allocation: each candidate lies in the bank of the constraint tokens it has met (0 .. T).
  Candidates are ranked within their bank by score and taken in stripes, the best of every
  bank first (fullest bank first), then the second of every bank, and so on: the first K
  taken decide which `<eos>` extensions finish (rule 2), and the first K not ending in `<eos>`
  are the new beams (rule 3). With no positive phrase (T = 0) there is one bank and this is
  rule 2 and 3 of the plain search;
- the length limit is the plain one + T (capped by the model's max_len), unless `max_steps`
  fixes it;
- at the limit, a sentence with no finished hypothesis returns the best of its open beams
  that met the most constraint tokens, flagged `constraints_met=False`.

Negative sequences are blocked in every step's scores after the other controls.
With a beam at least as wide as the candidates at every step nothing is pruned, and the
result is the best-scoring output that contains every phrase (tests compare with exhaustive
enumeration).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.decoding.common import (
    Hypothesis,
    length_penalty,
    never_generated,
    output_limits,
    padding_mask_or_none,
)
from aiayn.decoding.constraints import Negative, Positive, SentenceConstraints
from aiayn.decoding.controls import Controls, controlled_log_probs, prefix_step, prefix_tensor
from aiayn.decoding.finished import Finished
from aiayn.decoding.top_k import row_top_k
from aiayn.model.transformer import Transformer
from aiayn.runtime.steps import StepRunner, as_runner


def allocation_order(scores: Tensor, count: Tensor, total: Tensor) -> Tensor:
    """(b, W) candidates' positions in taking order: by stripe (rank within the bank of its
    `count`), then fullest bank first; -inf scores last. scores, count (b, W); total (b,)."""
    W = scores.size(1)
    banks = int(total.max()) + 1
    order = scores.argsort(dim=1, descending=True, stable=True)  # (b, W) best first
    sorted_count = count.gather(1, order)
    one_hot = torch.nn.functional.one_hot(sorted_count, banks)  # (b, W, banks)
    rank = (one_hot.cumsum(dim=1) * one_hot).sum(dim=2) - 1  # (b, W) rank within its bank
    key = rank * banks + (total[:, None] - sorted_count)
    key = key.masked_fill(scores.gather(1, order) == float("-inf"), banks * (W + 1))
    return order.gather(1, key.argsort(dim=1, stable=True))


def constrained_beam_search(
    model: Transformer | StepRunner, src: Tensor, constraints: Sequence[SentenceConstraints], beam_size: int,
    alpha: float, max_len_extra: int, N: int, max_steps: int | None, bos_id: int, eos_id: int,
    controls: Controls, prefixes: Sequence[Sequence[int]] | None,
) -> list[list[Hypothesis]]:
    """`beam_search` for B sentences in (B, S) `src` with one `SentenceConstraints` each (the
    runner's network already in eval mode; see the module docstring).

    State of the (b, w) open beams: beam_scores (b, w), seqs (b, K, L), progress / met
    (b, w, C) per positive phrase, count (b, w) constraint tokens met.
    """
    runner = as_runner(model)
    config, device = runner.config, src.device
    B, V = src.size(0), config.tgt_vocab_size
    if len(constraints) != B:
        raise ValueError(f"{len(constraints)} constraint sets for {B} sentences")
    forbidden = never_generated(config.pad_id, bos_id, eos_id)
    positive = Positive.build(constraints, device)
    negative = Negative.build(constraints, device)
    limits = output_limits(
        src, config.pad_id, max_len_extra, max_steps, config.max_len, controls.max_output_ratio
    )
    if max_steps is None:
        limits = (limits + positive.total).clamp(max=config.max_len)  # (B,)
    prefix = prefix_tensor(prefixes, B, device)
    L = int(limits.max())
    C = positive.phrases.size(1)
    src_padding_mask = padding_mask_or_none(src, config.pad_id)
    memory = runner.encode(src, src_padding_mask)  # (B, S, D)
    cache = runner.new_cache()

    sentence = torch.arange(B, device=device)
    beam_scores = torch.zeros(B, 1, device=device)
    progress = torch.zeros(B, 1, C, dtype=torch.long, device=device)
    met = torch.zeros(B, 1, C, dtype=torch.bool, device=device)
    seqs = torch.full((B, beam_size, L), config.pad_id, dtype=torch.long, device=device)

    def holder() -> Finished:
        return Finished(
            torch.full((B, N), float("-inf"), device=device),
            torch.full((B, N, L), config.pad_id, dtype=torch.long, device=device),
            torch.zeros(B, N, dtype=torch.long, device=device),
        )

    finished, fallback = holder(), holder()  # fallback: the open beams at the limit, unmet
    lp_max = length_penalty(limits, alpha).to(device)
    lp_by_length = [0.0, *length_penalty(torch.arange(1, L + 1), alpha).tolist()]
    last = torch.full((B, 1), bos_id, dtype=torch.long, device=device)
    results: list[list[Hypothesis]] = [[] for _ in range(B)]
    uses_history = controls.repetition_penalty != 1.0 or controls.no_repeat_ngram_size > 0

    for t in range(L):
        b, width = beam_scores.size()
        logits = runner.step(last, memory, src_padding_mask, cache, width)  # (b*w, V)
        needs_history = uses_history or negative is not None
        history = seqs[:, :width, :t].reshape(b * width, t) if needs_history else None  # (b*w, t)
        wanted = prefix_step(prefix, t, width)
        logp = controlled_log_probs(logits, forbidden, controls, history if uses_history else None, wanted)
        if negative is not None and history is not None:
            negative.block(logp, history, width)
        lp_now = lp_by_length[t + 1]

        # Candidates: the 2K best tokens of each beam, and each unmet phrase's next token.
        per_row = min(2 * beam_size, V)
        top_logp, top_tokens = row_top_k(logp, per_row)  # (b*w, per_row)
        extra = positive.wanted(progress, met).view(b * width, C)  # (b*w, C), -1: none
        extra_logp = logp.gather(1, extra.clamp(min=0))
        seen = (extra[:, :, None] == top_tokens[:, None, :]).any(dim=2)  # among the top already
        earlier = (extra[:, :, None] == extra[:, None, :]).tril(diagonal=-1).any(dim=2)
        extra_logp = extra_logp.masked_fill(seen | earlier | (extra < 0), float("-inf"))
        tokens = torch.cat([top_tokens, extra.clamp(min=0)], dim=1).view(b, width, -1)  # (b, w, M)
        scores = torch.cat([top_logp, extra_logp], dim=1).view(b, width, -1) + beam_scores[:, :, None]
        new_progress, new_met, count = positive.advance(progress, met, tokens)  # (b, w, M, C), (b, w, M)
        is_eos = tokens == eos_id
        all_met = count == positive.total[:, None, None]
        scores = scores.masked_fill(is_eos & ~all_met, float("-inf"))

        M = tokens.size(2)
        flat_scores, flat_count = scores.view(b, width * M), count.view(b, width * M)
        flat_eos = is_eos.view(b, width * M)
        order = allocation_order(flat_scores, flat_count, positive.total)  # (b, W)
        ordered_eos = flat_eos.gather(1, order)
        ordered_scores = flat_scores.gather(1, order)

        # 2. <eos> extensions among the first K taken finish (|Y| = t + 1).
        first = order[:, :beam_size]
        eos_in_top = ordered_eos[:, :beam_size] & (ordered_scores[:, :beam_size] > float("-inf"))
        if bool(eos_in_top.any()):
            ended = seqs.gather(1, (first // M)[:, :, None].expand(-1, -1, L))
            ended[:, :, t] = eos_id
            ended_scores = torch.where(eos_in_top, ordered_scores[:, :beam_size] / lp_now, float("-inf"))
            finished.merge(ended_scores, ended, t + 1)

        # 3. The first K taken that do not end in <eos> are the new beams.
        W = order.size(1)
        rank = torch.arange(W, device=device).expand(b, -1).masked_fill(ordered_eos, W)
        pick = rank.topk(min(beam_size, W), dim=1, largest=False).values
        if beam_size > W:  # fewer candidates than beams (tiny vocabulary): -inf fillers
            pick = torch.nn.functional.pad(pick, (0, beam_size - W), value=W)
        chosen = order.gather(1, pick.clamp(max=W - 1))  # (b, K) flat candidate index
        beam_scores = flat_scores.gather(1, chosen).masked_fill(pick >= W, float("-inf"))
        origin = chosen // M
        token = tokens.view(b, -1).gather(1, chosen)
        state_index = chosen[:, :, None].expand(-1, -1, C)
        progress = new_progress.view(b, width * M, C).gather(1, state_index)
        met = new_met.view(b, width * M, C).gather(1, state_index)
        beam_count = flat_count.gather(1, chosen)  # (b, K)
        seqs = seqs.gather(1, origin[:, :, None].expand(-1, -1, L))
        seqs[:, :, t] = token

        # 4. At the length limit, the open beams that met every phrase finish as they are; the
        # others are kept aside, in case no hypothesis of their sentence meets them all.
        at_limit = limits <= t + 1
        if bool(at_limit.any()):
            done_met = beam_count == positive.total[:, None]
            cut = torch.where(at_limit[:, None] & done_met, beam_scores / lp_now, float("-inf"))
            finished.merge(cut, seqs, t + 1)
            most = beam_count.masked_fill(beam_scores == float("-inf"), -1).amax(dim=1, keepdim=True)
            best_unmet = at_limit[:, None] & ~done_met & (beam_count == most)
            fallback.merge(torch.where(best_unmet, beam_scores / lp_now, float("-inf")), seqs, t + 1)

        # 5. Done: at the limit, or no open beam can beat the N-th best finished hypothesis.
        bound = beam_scores.max(dim=1).values / lp_max
        done = at_limit | (finished.scores[:, -1] >= bound)
        if bool(done.any()):
            for i in done.nonzero().flatten().tolist():
                hyps = finished.hypotheses(i, eos_id)
                if not hyps:
                    hyps = [h._replace(constraints_met=False) for h in fallback.hypotheses(i, eos_id)][:1]
                results[int(sentence[i])] = hyps
            keep = (~done).nonzero().flatten()
            if keep.numel() == 0:
                break
            sentence, limits, lp_max = sentence[keep], limits[keep], lp_max[keep]
            prefix = None if prefix is None else prefix[keep]
            beam_scores, seqs, origin, token = beam_scores[keep], seqs[keep], origin[keep], token[keep]
            progress, met = progress[keep], met[keep]
            finished.select(keep)
            fallback.select(keep)
            positive.select(keep)
            if negative is not None:
                negative.select(keep)
            memory = memory[keep]
            src_padding_mask = None if src_padding_mask is None else src_padding_mask[keep]
            cache.select_sentences(keep)
        else:
            keep = torch.arange(b, device=device)
        cache.reorder_beams((keep[:, None] * width + origin).flatten())
        last = token.reshape(-1, 1)
    return results
