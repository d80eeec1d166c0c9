"""The N best finished hypotheses of each open sentence, as beam search keeps them
(`aiayn.decoding.beam_search`, `aiayn.decoding.constrained_search`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.decoding.common import Hypothesis


@dataclass
class Finished:
    """The N best finished hypotheses of each open sentence (b sentences, N kept, L max tokens)."""

    scores: Tensor  # (b, N) normalised scores, -inf where empty
    tokens: Tensor  # (b, N, L) generated tokens, pad after the end
    lengths: Tensor  # (b, N) |Y|

    def merge(self, scores: Tensor, tokens: Tensor, length: int) -> None:
        """Add candidates scores (b, K), tokens (b, K, L) of length |Y| = `length`."""
        all_scores = torch.cat([self.scores, scores], dim=1)  # (b, N + K)
        all_lengths = torch.cat([self.lengths, torch.full_like(scores, length, dtype=torch.long)], 1)
        keep = all_scores.topk(self.scores.size(1), dim=1).indices  # (b, N)
        self.scores = all_scores.gather(1, keep)
        self.lengths = all_lengths.gather(1, keep)
        all_tokens = torch.cat([self.tokens, tokens], dim=1)  # (b, N + K, L)
        self.tokens = all_tokens.gather(1, keep[:, :, None].expand(-1, -1, all_tokens.size(2)))

    def select(self, index: Tensor) -> None:
        """Keep sentences `index` (b',)."""
        self.scores, self.tokens, self.lengths = self.scores[index], self.tokens[index], self.lengths[index]

    def hypotheses(self, i: int, eos_id: int) -> list[Hypothesis]:
        """Sentence i's finished hypotheses, best first, without `<eos>`."""
        result = []
        for score, tokens, length in zip(
            self.scores[i].tolist(), self.tokens[i].tolist(), self.lengths[i].tolist(), strict=True
        ):
            if score != float("-inf"):
                tokens = tokens[:length]
                result.append(Hypothesis(tokens[:-1] if tokens[-1] == eos_id else tokens, score))
        return result
