"""Lexical constraints on beam search: phrases an output must contain (positive) or must avoid
(negative), as token-id sequences of the target vocabulary, one set per sentence.

Positive constraints (Post & Vilar 2018, "Fast Lexically Constrained Decoding with Dynamic
Beam Allocation"; vectorised as in Hu et al. 2019): each hypothesis carries, for every phrase
p of its sentence, whether p already occurred in it (`met`) and the length j_p of the longest
suffix of the hypothesis that is a prefix of p (`progress`; the Knuth-Morris-Pratt automaton
of p, so an occurrence is never missed: overlapping starts and phrases that share tokens are
followed exactly). A hypothesis has met `count` = sum over p of (|p| if met else j_p)
constraint tokens; the search (`aiayn.decoding.constrained_search`) keeps beams of every count
("banks") so that hypotheses that have met more are not crowded out, and lets a hypothesis
end only when all phrases are met. A phrase of several tokens counts only where its tokens
are contiguous.

Negative constraints are blocked as n-gram blocking blocks repeats
(`aiayn.decoding.controls.block_ngrams`): the last token of an excluded sequence gets
log-probability -inf in every row whose last tokens are the sequence's first ones. The caller
gives every segmentation of a phrase it wants blocked (`aiayn.inference.constraint_input`
adds the segmentations of the word in other contexts).

Shapes: B sentences, C positive phrases of at most P tokens, E negative sequences of at most
Q tokens; rows R = sentences x beams.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.core.errors import ConfigError


@dataclass(frozen=True)
class SentenceConstraints:
    """The constraints of one sentence: token-id phrases to include and to exclude."""

    include: tuple[tuple[int, ...], ...] = ()
    exclude: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        for kind, phrases in (("include", self.include), ("exclude", self.exclude)):
            if any(len(p) == 0 for p in phrases):
                raise ConfigError(f"an {kind} phrase has no tokens")

    @property
    def include_tokens(self) -> int:
        """The constraint tokens an output must contain: sum of the phrase lengths."""
        return sum(len(p) for p in self.include)

    @classmethod
    def of(
        cls, include: Sequence[Sequence[int]] = (), exclude: Sequence[Sequence[int]] = ()
    ) -> SentenceConstraints:
        """From any sequences of ids."""
        return cls(tuple(tuple(map(int, p)) for p in include), tuple(tuple(map(int, p)) for p in exclude))


NO_CONSTRAINTS = SentenceConstraints()


def any_constraints(constraints: Sequence[SentenceConstraints] | None) -> bool:
    """Whether any sentence has a constraint (else the plain search runs, unchanged)."""
    return constraints is not None and any(c.include or c.exclude for c in constraints)


def borders(phrase: Sequence[int]) -> list[list[bool]]:
    """(P + 1, P + 1) table: [j][k] is True when the phrase's first k tokens are a suffix of
    its first j tokens (k <= j; k = j included, k = 0 always)."""
    n = len(phrase)
    return [
        [k <= j and tuple(phrase[j - k : j]) == tuple(phrase[:k]) for k in range(n + 1)] for j in range(n + 1)
    ]


@dataclass
class Positive:
    """The positive phrases of b sentences as tensors.

    phrases (b, C, P) token ids, -1 past a phrase's end (a missing phrase: all -1);
    lengths (b, C), 0 for a missing phrase; border (b, C, P + 1, P) the `borders` table
    without its last column (k <= P - 1: a match can only grow from a proper prefix);
    total (b,) the constraint tokens each sentence must contain.
    """

    phrases: Tensor
    lengths: Tensor
    border: Tensor
    total: Tensor

    @classmethod
    def build(cls, constraints: Sequence[SentenceConstraints], device: torch.device) -> Positive:
        B = len(constraints)
        C = max(1, max(len(c.include) for c in constraints))
        P = max([1] + [len(p) for c in constraints for p in c.include])
        phrases = torch.full((B, C, P), -1, dtype=torch.long)
        lengths = torch.zeros(B, C, dtype=torch.long)
        border = torch.zeros(B, C, P + 1, P, dtype=torch.bool)
        for i, c in enumerate(constraints):
            for p, phrase in enumerate(c.include):
                n = len(phrase)
                phrases[i, p, :n] = torch.tensor(phrase)
                lengths[i, p] = n
                table = torch.tensor(borders(phrase))  # (n + 1, n + 1)
                border[i, p, : n + 1, :n] = table[:, :n]
        total = lengths.sum(dim=1)
        return cls(phrases.to(device), lengths.to(device), border.to(device), total.to(device))

    def select(self, index: Tensor) -> None:
        """Keep sentences `index` (b',)."""
        self.phrases, self.lengths = self.phrases[index], self.lengths[index]
        self.border, self.total = self.border[index], self.total[index]

    def wanted(self, progress: Tensor, met: Tensor) -> Tensor:
        """(b, w, C) the token that extends each unmet phrase's match (-1: none), given the
        (b, w, C) `progress` and `met` of each beam."""
        b, w, C = progress.shape
        phrases = self.phrases[:, None].expand(b, w, C, -1)  # (b, w, C, P)
        token = phrases.gather(3, progress.clamp(max=phrases.size(3) - 1)[..., None]).squeeze(3)
        return torch.where(met | (self.lengths[:, None, :] == 0), -1, token)

    def advance(self, progress: Tensor, met: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The state after each beam takes each of its candidate tokens.

        progress, met (b, w, C); tokens (b, w, M) -> new progress, met (b, w, M, C) and the
        constraint tokens met (b, w, M).
        The longest new match: the largest k with phrase[k - 1] = token among the k - 1 that
        are borders of the current match (or 0).
        """
        b, w, C = progress.shape
        border = self.border[:, None].expand(b, w, C, -1, -1)  # (b, w, C, P + 1, P)
        index = progress[..., None, None].expand(-1, -1, -1, 1, border.size(4))
        grow = border.gather(3, index).squeeze(3)  # (b, w, C, P): k - 1 is a border of the match
        equal = self.phrases[:, None, None] == tokens[..., None, None]  # (b, w, M, C, P)
        ok = equal & grow[:, :, None]  # (b, w, M, C, P)
        k = torch.arange(1, ok.size(4) + 1, device=tokens.device)
        new_progress = torch.where(ok, k, 0).amax(dim=4)  # (b, w, M, C)
        lengths = self.lengths[:, None, None, :]  # (b, 1, 1, C)
        new_met = met[:, :, None] | ((new_progress == lengths) & (lengths > 0))
        new_progress = new_progress.masked_fill(new_met, 0)
        count = torch.where(new_met, lengths, new_progress).sum(dim=3)  # (b, w, M)
        return new_progress, new_met, count


@dataclass
class Negative:
    """The excluded sequences of b sentences: context (b, E, Q - 1) the tokens before the last,
    right-aligned, -1 where any token matches (a shorter sequence); last (b, E) the last token
    (-1: no sequence)."""

    context: Tensor
    last: Tensor

    @classmethod
    def build(cls, constraints: Sequence[SentenceConstraints], device: torch.device) -> Negative | None:
        if not any(c.exclude for c in constraints):
            return None
        E = max(len(c.exclude) for c in constraints)
        Q = max(len(p) for c in constraints for p in c.exclude)
        context = torch.full((len(constraints), E, Q - 1), -1, dtype=torch.long)
        last = torch.full((len(constraints), E), -1, dtype=torch.long)
        for i, c in enumerate(constraints):
            for e, phrase in enumerate(c.exclude):
                if len(phrase) > 1:
                    context[i, e, Q - len(phrase) :] = torch.tensor(phrase[:-1])
                last[i, e] = phrase[-1]
        return cls(context.to(device), last.to(device))

    def select(self, index: Tensor) -> None:
        self.context, self.last = self.context[index], self.last[index]

    def block(self, logp: Tensor, history: Tensor, width: int) -> Tensor:
        """Set to -inf, in place, the (b * width, V) scores of tokens that would complete an
        excluded sequence after each row's (b * width, t) `history`."""
        Q1 = self.context.size(2)
        R, t = history.shape
        tail = torch.full((R, Q1), -2, dtype=torch.long, device=history.device)  # -2 matches nothing
        if Q1 and t:
            n = min(Q1, t)
            tail[:, Q1 - n :] = history[:, t - n :]
        context = self.context.repeat_interleave(width, dim=0)  # (R, E, Q - 1)
        last = self.last.repeat_interleave(width, dim=0)  # (R, E)
        match = ((context == -1) | (context == tail[:, None, :])).all(dim=2) & (last >= 0)  # (R, E)
        rows, which = match.nonzero(as_tuple=True)
        logp[rows, last[rows, which]] = float("-inf")
        return logp


def check_fits(constraints: SentenceConstraints, limit: int, line: int) -> None:
    """`ConfigError` when a sentence's constraint tokens do not fit its output length limit."""
    if constraints.include_tokens > limit:
        raise ConfigError(
            f"line {line}: the constraints have {constraints.include_tokens} tokens; the output "
            f"length limit is {limit} tokens"
        )
