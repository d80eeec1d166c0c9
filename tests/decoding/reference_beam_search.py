"""A simple, unoptimised beam search to check `aiayn.decoding.beam_search` against.

One sentence at a time, no key/value cache (every step re-runs the decoder over the whole
prefixes), the beams as Python lists, a full log-softmax: the rules of the paper (Sec. 6.1) and
GNMT's length penalty written out plainly, as `aiayn.decoding.beam_search`'s docstring states
them:

1. every extension (k, w) scores s_k + log p(w | beam k), `<pad>`/`<bos>` excluded;
2. an `<eos>` extension among the K best extensions finishes, score (s_k + log p) / lp(t + 1);
   the N best finished are kept;
3. the K best extensions not ending in `<eos>` are the new beams;
4. at the length limit the open beams finish as they are (|Y| = limit);
5. the search ends early when no open beam can beat the N-th best finished score:
   max_k s_k / lp(limit) <= N-th best.
"""

from __future__ import annotations

import torch

from aiayn.decoding import Hypothesis, output_limits
from aiayn.decoding.common import never_generated
from aiayn.model import Transformer


def lp(length: int, alpha: float) -> float:
    """GNMT length penalty ((5 + |Y|) / 6)^alpha, in float32 as the decoder computes it."""
    return float(((5.0 + torch.tensor(float(length))) / 6.0) ** alpha)


@torch.no_grad()
def reference_beam_search(
    model: Transformer, src: torch.Tensor, beam_size: int = 4, alpha: float = 0.6,
    max_len_extra: int = 50, nbest: int = 1,
) -> list[list[Hypothesis]]:
    """Beam search of each row of (B, S) `src` on its own (same arguments as `beam_search`)."""
    model.eval()
    config = model.config
    forbidden = never_generated(config.pad_id, config.bos_id, config.eos_id)
    limits = output_limits(src, config.pad_id, max_len_extra, None, config.max_len).tolist()
    results = []
    for row, limit in zip(src, limits, strict=True):
        source = row[row != config.pad_id][None]  # (1, S): no padding
        memory = model.encode(source)  # (1, S, D)
        beams: list[tuple[list[int], float]] = [([], 0.0)]  # (tokens, log-prob sum)
        finished: list[tuple[float, list[int]]] = []
        for t in range(limit):
            prefixes = torch.tensor([[config.bos_id, *tokens] for tokens, _ in beams])  # (k, t + 1)
            logits = model.decode(prefixes, memory.expand(len(beams), -1, -1))[:, -1]  # (k, V)
            logp = torch.log_softmax(logits.float(), dim=-1)
            logp[:, list(forbidden)] = float("-inf")
            extensions = [
                (s + value, tokens, word)
                for (tokens, s), row_logp in zip(beams, logp.tolist(), strict=True)
                for word, value in enumerate(row_logp)
            ]
            extensions.sort(key=lambda e: -e[0])
            for score, tokens, word in extensions[:beam_size]:  # rule 2
                if word == config.eos_id and score > float("-inf"):
                    finished.append((score / lp(t + 1, alpha), [*tokens, word]))
            beams = [([*tokens, word], score) for score, tokens, word in extensions
                     if word != config.eos_id][:beam_size]  # rule 3
            if t + 1 == limit:  # rule 4
                finished += [(score / lp(t + 1, alpha), tokens) for tokens, score in beams
                             if score > float("-inf")]
            finished = sorted(finished, key=lambda f: -f[0])[:nbest]
            best_open = max(score for _, score in beams)
            if t + 1 == limit or (len(finished) == nbest and finished[-1][0] >= best_open / lp(limit, alpha)):
                break  # rule 5
        results.append([
            Hypothesis(tokens[:-1] if tokens and tokens[-1] == config.eos_id else tokens, score)
            for score, tokens in finished
        ])
    return results


def assert_same_search(
    new: list[list[Hypothesis]], reference: list[list[Hypothesis]], tie: float = 1e-5
) -> int:
    """The same hypotheses in the same order, except where two scores tie within `tie`;
    returns the number of sentences whose outputs differ (by such ties)."""
    differing = 0
    for i, (ours, theirs) in enumerate(zip(new, reference, strict=True)):
        assert len(ours) == len(theirs), f"sentence {i}: {len(ours)} vs {len(theirs)} hypotheses"
        for rank, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert abs(a.score - b.score) <= tie, f"sentence {i} rank {rank}: score {a.score} vs {b.score}"
        if [h.tokens for h in ours] != [h.tokens for h in theirs]:
            differing += 1
    return differing
