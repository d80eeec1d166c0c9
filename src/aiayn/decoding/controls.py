"""Decoding controls shared by beam and greedy search: a forced target prefix, n-gram blocking,
a repetition penalty, an output length limit relative to the source, and sampling.

With none of them set (`Controls()`), the searches are exactly the paper's (Sec. 6.1). The
controls act on one step's next-token scores, given each row's generated tokens so far:

- `repetition_penalty` p (Keskar et al. 2019, as CTranslate2): the logit of a token already
  generated in the row is divided by p when positive, multiplied by p when negative, before
  the softmax (the result kept within +-`PENALISED_LOGIT_LIMIT`, so no p makes a score NaN or
  infinite);
- `no_repeat_ngram_size` n: a token that would complete an n-gram already in the row is never
  generated (its log-probability is -inf after the softmax, as `<pad>`/`<bos>`);
- `prefix`: while a row's prefix lasts, its next token is the prefix's (log-probability as the
  model gives it), and the search continues freely after it;
- `max_output_ratio` r: a sentence of n source tokens (`<eos>` included) generates at most
  ceil(r * n) tokens, `<eos>` included (with the other length limits, the smallest wins);
- `sample` (greedy only): the next token is drawn from softmax(logits / temperature) cut to
  the top-k / nucleus top-p (`aiayn.decoding.sampling.filter_logits`), from a generator seeded
  with `seed`: the same seed gives the same outputs.

The range of every numeric control is declared once, in `aiayn.core.decoding_choices` (where each
bound is derived), and checked here with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from aiayn.core.decoding_choices import (
    FLOAT32_MAX,
    MAX_OUTPUT_RATIO,
    NO_REPEAT_NGRAM_SIZE,
    REPETITION_PENALTY,
    SEED,
)
from aiayn.core.errors import ConfigError, DecodingError
from aiayn.decoding.common import Hypothesis, log_probs
from aiayn.decoding.sampling import Sampling, filter_logits

MAX_STEPS = 2**20
"""More output steps than any model's positions allow (the sum rule of `PENALISED_LOGIT_LIMIT`)."""

PENALISED_LOGIT_LIMIT = FLOAT32_MAX / (4 * MAX_STEPS)
"""The largest size of a penalised logit. With every penalised logit within +-C, a step's
log-probability of a token whose logit is not larger than C is at least -2C - ln V, so a
sentence of up to MAX_STEPS steps sums to at least -MAX_STEPS x (2C + ln V) > -FLOAT32_MAX:
finite. (A positive logit divided by a tiny p would otherwise overflow to inf, and the softmax
of inf is NaN.)"""


@dataclass(frozen=True)
class Controls:
    """The decoding controls of one call (checked when made; see the module docstring)."""

    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    max_output_ratio: float | None = None
    sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        NO_REPEAT_NGRAM_SIZE.check("no_repeat_ngram_size", self.no_repeat_ngram_size)
        REPETITION_PENALTY.check("repetition_penalty", self.repetition_penalty)
        if self.max_output_ratio is not None:
            MAX_OUTPUT_RATIO.check("max_output_ratio", self.max_output_ratio)
        if self.seed is not None:
            SEED.check("seed", self.seed)
        Sampling(self.temperature, self.top_k, self.top_p)  # checks them

    def changed(self) -> dict[str, object]:
        """The controls set to something other than their default, by name (for messages)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}

    @property
    def sampling(self) -> Sampling:
        return Sampling(self.temperature, self.top_k, self.top_p)

    def generator(self, device: torch.device) -> torch.Generator:
        """A private generator seeded with `seed` (a random seed when None)."""
        generator = torch.Generator(device=device)
        if self.seed is None:
            generator.seed()
        else:
            generator.manual_seed(self.seed)
        return generator


NO_CONTROLS = Controls()
"""The plain searches of the paper."""


def prefix_tensor(
    prefixes: Sequence[Sequence[int]] | None, batch: int, device: torch.device
) -> Tensor | None:
    """(B, P) prefix ids, right-padded with -1 (None when no sentence has a prefix)."""
    if not prefixes or not any(prefixes):
        return None
    if len(prefixes) != batch:
        raise ConfigError(f"{len(prefixes)} prefixes for {batch} sentences")
    width = max(len(p) for p in prefixes)
    table = torch.full((batch, width), -1, dtype=torch.long, device=device)
    for i, prefix in enumerate(prefixes):
        if prefix:
            table[i, : len(prefix)] = torch.tensor(list(prefix), dtype=torch.long, device=device)
    return table


def penalize_repetitions(logits: Tensor, history: Tensor, penalty: float) -> Tensor:
    """Apply the repetition penalty in place to (R, V) logits, given (R, t) earlier tokens."""
    if penalty == 1.0 or history.size(1) == 0:
        return logits
    seen = logits.gather(1, history)  # (R, t)
    penalised = torch.where(seen > 0, seen / penalty, seen * penalty)
    return logits.scatter_(1, history, penalised.clamp_(-PENALISED_LOGIT_LIMIT, PENALISED_LOGIT_LIMIT))


def block_ngrams(logp: Tensor, history: Tensor, size: int) -> Tensor:
    """Set to -inf, in place, the (R, V) scores of tokens that would repeat an n-gram of
    `size` tokens of (R, t) `history`."""
    if size == 0 or history.size(1) < size:
        return logp
    windows = history.unfold(1, size, 1)  # (R, t - n + 1, n)
    suffix = history[:, history.size(1) - size + 1 :]  # (R, n - 1): the n-gram's first n - 1
    match = (windows[:, :, : size - 1] == suffix[:, None, :]).all(dim=-1)  # (R, t - n + 1)
    hits = torch.zeros_like(logp).scatter_add_(1, windows[:, :, -1], match.to(logp.dtype))
    return logp.masked_fill_(hits > 0, float("-inf"))


def controlled_log_probs(
    logits: Tensor, forbidden: Tensor, controls: Controls, history: Tensor | None, wanted: Tensor | None
) -> Tensor:
    """The per-step controls in their one order, shared by beam and greedy search: (R, V)
    logits -> (R, V) log-probabilities (computed in place of `logits`).

    The repetition penalty on the logits (with `history` (R, t), the tokens so far, or None
    when neither repetition control is on); the log-softmax with the `forbidden` ids at -inf;
    n-gram blocking; then the prefix token `wanted` (R,) (`prefix_step`) forced, with its
    score from before the blocking (a prefix is never blocked).
    """
    if history is not None:
        penalize_repetitions(logits, history, controls.repetition_penalty)
    logp = log_probs(logits, forbidden, overwrite=True)
    before = forced_scores(logp, wanted) if history is not None else None
    if history is not None:
        block_ngrams(logp, history, controls.no_repeat_ngram_size)
    return force_prefix(logp, wanted, before)


def prefix_step(prefix: Tensor | None, step: int, rows_per_sentence: int) -> Tensor | None:
    """(R,) the token each decoder row must take at `step` (-1: free), from the (b, P)
    prefixes of its sentence (R = b * rows_per_sentence); None when no prefix goes on."""
    if prefix is None or step >= prefix.size(1):
        return None
    wanted = prefix[:, step].repeat_interleave(rows_per_sentence)  # (R,)
    return wanted if bool((wanted >= 0).any()) else None


def force_prefix(logp: Tensor, wanted: Tensor | None, before: Tensor | None) -> Tensor:
    """Keep only the wanted token (with its score `before` (R,), taken before n-gram blocking:
    a prefix is never blocked) in the rows whose prefix goes on; in place."""
    if wanted is None:
        return logp
    forced = wanted >= 0  # (R,)
    keep = torch.zeros_like(logp, dtype=torch.bool).scatter_(1, wanted.clamp(min=0)[:, None], True)
    logp.masked_fill_(forced[:, None] & ~keep, float("-inf"))
    if before is not None:
        index = wanted.clamp(min=0)[:, None]  # (R, 1)
        current = logp.gather(1, index).squeeze(1)
        logp.scatter_(1, index, torch.where(forced, before, current)[:, None])
    return logp


def forced_scores(logp: Tensor, wanted: Tensor | None) -> Tensor | None:
    """(R,) the scores of the wanted tokens (any value where free), or None."""
    return None if wanted is None else logp.gather(1, wanted.clamp(min=0)[:, None]).squeeze(1)


def draw(logits: Tensor, controls: Controls, generator: torch.Generator) -> Tensor:
    """(R, V) logits (-inf where forbidden) -> (R,) token ids drawn as `controls` say."""
    if controls.temperature == 0:
        return logits.argmax(dim=-1)
    shifted = logits - logits.amax(dim=-1, keepdim=True)  # keeps a tiny temperature finite
    # a temperature below the dtype's smallest normal would be 0 in it (0 / 0 = nan at the max)
    temperature = max(controls.temperature, torch.finfo(shifted.dtype).tiny)
    probs = filter_logits(shifted / temperature, controls.top_k, controls.top_p).softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def check_finite_scores(
    results: Sequence[Sequence[Hypothesis]], controls: Controls, alpha: float, line_offset: int = 0
) -> None:
    """The last check before any output: a hypothesis whose score is NaN or infinite is never
    printed nor returned, but a `DecodingError` (one line) naming the line and the options set."""
    for i, hyps in enumerate(results):
        bad = next((h.score for h in hyps if not math.isfinite(h.score)), None)
        if bad is not None:
            options = {"alpha": alpha} | controls.changed()
            shown = ", ".join(f"{name}={value!r}" for name, value in options.items())
            raise DecodingError(
                f"line {line_offset + i + 1}: decoding gave a score of {bad} (not a finite number) "
                f"with {shown}; nothing was output for it: try other values of these options"
            )
