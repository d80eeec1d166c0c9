"""Beam search with the GNMT length penalty (paper Sec. 6.1).

"We used beam search with a beam size of 4 and length penalty alpha = 0.6 ... We set the
maximum output length during inference to input length + 50, but terminate early when
possible."

All B sentences and their K beams decode together: the decoder runs on B*K rows per step
(B at step 0, where every beam is the same `<bos>` prefix) and the self-attention cache is
reordered to follow the beams that survive; the encoder output and its cross-attention
keys/values stay one per sentence, shared by its beams. Sentences whose search is over leave
the batch, so the rows shrink as decoding goes on. Optional controls (a forced prefix, n-gram
blocking, a repetition penalty, a length ratio) act on each step's scores
(`aiayn.decoding.controls`).

One step, for each sentence with K open beams of t tokens (running log-prob sums s_k):

1. every extension (k, w) scores s_k + log p(w | beam k); `<pad>`/`<bos>` are excluded (the
   model's ids, from its config);
2. an extension ending in `<eos>` that ranks among the K best extensions becomes a finished
   hypothesis with score (s_k + log p(<eos>)) / lp(t + 1); the N best finished are kept;
3. the K best extensions not ending in `<eos>` become the new open beams;
4. at the sentence's length limit L, the open beams are finished as they are (no `<eos>`,
   |Y| = L), and the sentence is done;
5. the sentence is done early when no open beam can beat the N-th best finished score.
   The bound: an open beam has s <= 0, log-probabilities only add terms <= 0, and lp grows
   with length, so any completion of length n <= L scores s' / lp(n) <= s / lp(n) <= s / lp(L).

Scores are log P(Y | X) / lp(Y), lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| = generated tokens
including `<eos>`. Rule 2 (finish only the `<eos>` extensions within the top K, as fairseq
does) makes beam size 1 with alpha = 0 exactly greedy search. With a beam at least as wide as
the number of extensions at every step nothing is pruned, and the result is the exact
best-scoring output (tests compare with exhaustive enumeration).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.core.eval_mode import eval_mode
from aiayn.decoding.common import (
    Hypothesis,
    length_penalty,
    never_generated,
    output_limits,
    padding_mask_or_none,
)
from aiayn.decoding.constraints import SentenceConstraints, any_constraints
from aiayn.decoding.controls import (
    NO_CONTROLS,
    Controls,
    controlled_log_probs,
    prefix_step,
    prefix_tensor,
)
from aiayn.decoding.finished import Finished
from aiayn.decoding.top_k import row_top_k
from aiayn.model.transformer import Transformer
from aiayn.runtime.steps import StepRunner, as_runner


def beam_search(
    model: Transformer | StepRunner,
    src: Tensor,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_len_extra: int = 50,
    nbest: int = 1,
    max_steps: int | None = None,
    bos_id: int | None = None,
    eos_id: int | None = None,
    controls: Controls = NO_CONTROLS,
    prefixes: Sequence[Sequence[int]] | None = None,
    constraints: Sequence[SentenceConstraints] | None = None,
) -> list[list[Hypothesis]]:
    """Beam search over a batch of sentences (see the module docstring for the algorithm).

    Args:
        model: the Transformer (put in eval mode for the call), or a step runner computing it
            (`aiayn.runtime.steps`; the `Ensemble` of `aiayn.inference` is one).
        src: (B, S) source ids, right-padded, each row ending with `<eos>`.
        beam_size: K, the open beams kept per sentence (paper: 4).
        alpha: length penalty exponent (paper: 0.6; 0 = raw log-probabilities).
        max_len_extra: outputs have at most (source length + max_len_extra) tokens
            including `<eos>` (paper: 50), capped by the model's `max_len`.
        nbest: N <= K hypotheses returned per sentence.
        max_steps: instead, a fixed length limit for every sentence.
        bos_id, eos_id: the start and end ids (default: the model config's).
        controls: n-gram blocking, repetition penalty, length ratio (`aiayn.decoding.controls`;
            `sample` is greedy search's).
        prefixes: B target prefixes (ids, may be empty), forced then continued.
        constraints: B `SentenceConstraints` (phrases to include / exclude); when any
            sentence has one, the search is `aiayn.decoding.constrained_search`'s.

    Returns:
        For each sentence, up to N `Hypothesis(tokens, score)`, best first; tokens exclude
        `<eos>`, score = log P(Y | X) / lp(Y).
    """
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"need 1 <= nbest <= beam_size, got nbest={nbest}, beam_size={beam_size}")
    runner = as_runner(model)
    bos_id = runner.config.bos_id if bos_id is None else bos_id
    eos_id = runner.config.eos_id if eos_id is None else eos_id
    with eval_mode(runner.network):
        if any_constraints(constraints):
            from aiayn.decoding.constrained_search import constrained_beam_search

            assert constraints is not None
            return constrained_beam_search(
                runner, src, constraints, beam_size, alpha, max_len_extra, nbest, max_steps, bos_id, eos_id,
                controls, prefixes,
            )
        return _beam_search(
            runner, src, beam_size, alpha, max_len_extra, nbest, max_steps, bos_id, eos_id, controls, prefixes
        )


def _beam_search(
    model: Transformer | StepRunner, src: Tensor, beam_size: int, alpha: float, max_len_extra: int, N: int,
    max_steps: int | None, bos_id: int, eos_id: int, controls: Controls,
    prefixes: Sequence[Sequence[int]] | None,
) -> list[list[Hypothesis]]:
    """`beam_search` for B sentences in (B, S) `src`: K beams, N best kept, L = longest limit.

    Open sentences are b <= B, each with w decoder rows (w = 1 at step 0, where all beams
    would be the same `<bos>` prefix, then K). The encoder output and its cross-attention
    keys/values stay one per sentence, shared by the sentence's rows. Shapes: beam_scores
    (b, w) running log-prob sums, seqs (b, K, L) tokens so far, logits (b*w, V).
    """
    runner = as_runner(model)
    config, device = runner.config, src.device
    B, V = src.size(0), config.tgt_vocab_size
    forbidden = never_generated(config.pad_id, bos_id, eos_id)
    limits = output_limits(
        src, config.pad_id, max_len_extra, max_steps, config.max_len, controls.max_output_ratio
    )  # (B,)
    prefix = prefix_tensor(prefixes, B, device)  # (B, P) or None
    L = int(limits.max())
    src_padding_mask = padding_mask_or_none(src, config.pad_id)  # (B, S), None without padding
    memory = runner.encode(src, src_padding_mask)  # (B, S, D), one per sentence for all its beams
    cache = runner.new_cache()

    sentence = torch.arange(B, device=device)  # original index of each open sentence
    beam_scores = torch.zeros(B, 1, device=device)  # step 0: one row (the <bos> prefix) per sentence
    seqs = torch.full((B, beam_size, L), config.pad_id, dtype=torch.long, device=device)
    finished = Finished(
        torch.full((B, N), float("-inf"), device=device),
        torch.full((B, N, L), config.pad_id, dtype=torch.long, device=device),
        torch.zeros(B, N, dtype=torch.long, device=device),
    )
    lp_max = length_penalty(limits, alpha).to(device)  # (B,) lp(L) of each sentence
    lp_by_length = [0.0, *length_penalty(torch.arange(1, L + 1), alpha).tolist()]  # lp(|Y|), |Y| <= L
    last = torch.full((B, 1), bos_id, dtype=torch.long, device=device)
    results: list[list[Hypothesis]] = [[] for _ in range(B)]

    for t in range(L):
        b, width = beam_scores.size()
        # 1. s_k + log p(w | beam k): the log-softmax overwrites the logits (no second
        # (b*w, V) buffer; `logsumexp` and a subtraction measured slower, RESULTS.md).
        logits = runner.step(last, memory, src_padding_mask, cache, width)  # (b*w, V)
        uses_history = controls.repetition_penalty != 1.0 or controls.no_repeat_ngram_size > 0
        history = seqs[:, :width, :t].reshape(b * width, t) if uses_history else None  # (b*w, t)
        wanted = prefix_step(prefix, t, width)  # (b*w,) forced tokens, or None
        logp = controlled_log_probs(logits, forbidden, controls, history, wanted)  # (b*w, V)
        lp_now = lp_by_length[t + 1]

        # One top-2K per sentence: at most K extensions (one per beam) end in <eos>, so the K
        # best that do not are among them. Taken in two stages, the same set: the 2K best of
        # each beam row (a row's order does not depend on its s_k, which is added to those alone),
        # then the 2K best of the sentence's w * 2K.
        per_row = min(2 * beam_size, V)
        row_scores, row_tokens = row_top_k(logp, per_row)  # (b*w, per_row)
        row_scores += beam_scores.view(-1, 1)  # s_k + log p(w | beam k)
        cand = row_scores.view(b, width * per_row)
        top_scores, pick = cand.topk(min(2 * beam_size, width * per_row), dim=1)  # (b, 2K), best first
        extended = pick // per_row  # the beam k each candidate extends
        tokens = row_tokens.view(b, width * per_row).gather(1, pick)
        top_index = extended * V + tokens  # extension (k, w) at k*V + w
        if top_scores.size(1) < 2 * beam_size:  # fewer extensions than 2K (tiny vocabulary): -inf fillers
            filler = 2 * beam_size - top_scores.size(1)
            top_scores = F.pad(top_scores, (0, filler), value=float("-inf"))
            top_index = F.pad(top_index, (0, filler), value=0)
        is_eos = top_index % V == eos_id

        # 2. <eos> extensions among the K best finish (|Y| = t + 1).
        eos_in_top = is_eos[:, :beam_size]
        if bool(eos_in_top.any()):
            ended = seqs.gather(1, (top_index[:, :beam_size] // V)[:, :, None].expand(-1, -1, L))  # (b, K, L)
            ended[:, :, t] = eos_id
            ended_scores = torch.where(eos_in_top, top_scores[:, :beam_size] / lp_now, float("-inf"))
            finished.merge(ended_scores, ended, t + 1)

        # 3. The K best other extensions are the new open beams.
        beam_scores, pick = top_scores.masked_fill(is_eos, float("-inf")).topk(beam_size, dim=1)  # (b, K)
        index = top_index.gather(1, pick)
        origin, token = index // V, index % V  # source beam and new token of each new beam
        seqs = seqs.gather(1, origin[:, :, None].expand(-1, -1, L))
        seqs[:, :, t] = token

        # 4. At the length limit, open beams finish without <eos> (|Y| = L).
        at_limit = limits <= t + 1  # (b,)
        if bool(at_limit.any()):
            cut = torch.where(at_limit[:, None], beam_scores / lp_now, float("-inf"))
            finished.merge(cut, seqs, t + 1)

        # 5. Done: at the limit, or no open beam can beat the N-th best finished hypothesis.
        bound = beam_scores.max(dim=1).values / lp_max  # (b,)
        done = at_limit | (finished.scores[:, -1] >= bound)
        if bool(done.any()):
            for i in done.nonzero().flatten().tolist():
                results[int(sentence[i])] = finished.hypotheses(i, eos_id)
            keep = (~done).nonzero().flatten()  # (b',) open sentences that stay
            if keep.numel() == 0:
                break
            sentence, limits, lp_max = sentence[keep], limits[keep], lp_max[keep]
            prefix = None if prefix is None else prefix[keep]
            beam_scores, seqs, origin, token = beam_scores[keep], seqs[keep], origin[keep], token[keep]
            finished.select(keep)
            memory = memory[keep]
            src_padding_mask = None if src_padding_mask is None else src_padding_mask[keep]
            cache.select_sentences(keep)
        else:
            keep = torch.arange(b, device=device)
        # Self-attention caches follow each new beam's source row; the cross-attention
        # keys/values are one per sentence and need no reordering.
        cache.reorder_beams((keep[:, None] * width + origin).flatten())
        last = token.reshape(-1, 1)  # (b'*K, 1)
    return results

