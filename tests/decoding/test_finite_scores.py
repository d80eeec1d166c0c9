"""Finite or refused: over the whole declared range of every decoding control (`aiayn.core.decoding_choices`),
alone and together (a forced prefix, sampling, n-gram blocking, the repetition penalty, the length
penalty, an ensemble), every score a search gives is a finite number. Shown failing on the penalty's
old bound (any p > 0, with the penalty's old arithmetic)."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from aiayn.core import decoding_choices as decoding_options
from aiayn.core.ranges import Range
from aiayn.decoding import beam_search, controls, greedy_search
from aiayn.decoding.controls import Controls
from aiayn.inference.ensemble import Ensemble

from .helpers import DEFAULT_SPECIALS, source_batch, tiny_transformer

VOCAB = 12
MAX_LEN = 24
WORDS = [i for i in range(VOCAB) if i not in DEFAULT_SPECIALS.ids]
FEW = settings(max_examples=100, deadline=None, database=None)
PLANTED = settings(FEW, phases=[Phase.explicit, Phase.generate], derandomize=True)


@functools.cache
def model(seed: int) -> torch.nn.Module:
    if seed == 3:  # an ensemble of two: the penalty then acts on log-probabilities
        return Ensemble([model(0), model(1)]).eval()
    return tiny_transformer(seed, vocab_size=VOCAB, noise=0.3, max_len=MAX_LEN)


def within(allowed: Range) -> st.SearchStrategy:
    """Any value of a declared range, its bounds included (Hypothesis tries the extremes first)."""
    if allowed.integer:
        low = int(allowed.low or 0)
        high = int(allowed.high) - allowed.high_open if allowed.high is not None else 2**62
        return st.integers(low, min(high, low + 4)) | st.integers(low, high)
    return st.floats(allowed.low, allowed.high, exclude_min=allowed.low_open, exclude_max=allowed.high_open,
                     allow_nan=False, allow_infinity=False)


@st.composite
def decodings(draw) -> dict:
    """A model (or an ensemble), sources, a search and every control drawn from its declared range."""
    lengths = draw(st.lists(st.integers(1, 6), min_size=1, max_size=2))
    ranges = decoding_options
    sample = draw(st.booleans())
    return {
        "model": draw(st.integers(0, 3)),
        "src": source_batch(lengths, VOCAB, seed=draw(st.integers(0, 1000))),
        "beam": 1 if sample else draw(st.integers(1, 3)),
        "alpha": draw(within(ranges.LENGTH_PENALTY)),
        "controls": Controls(
            repetition_penalty=draw(within(controls.REPETITION_PENALTY) | st.just(1.0)),
            no_repeat_ngram_size=draw(within(ranges.NO_REPEAT_NGRAM_SIZE)),
            max_output_ratio=draw(st.none() | within(ranges.MAX_OUTPUT_RATIO)),
            sample=sample,
            temperature=draw(within(ranges.TEMPERATURE)),
            top_k=draw(st.none() | within(ranges.TOP_K)),
            top_p=draw(st.none() | within(ranges.TOP_P)),
            seed=draw(within(ranges.SEED)),
        ),
        "prefixes": draw(st.none() | st.lists(st.lists(st.sampled_from(WORDS), max_size=4),
                                              min_size=len(lengths), max_size=len(lengths))),
    }


def scores(case: dict) -> list[float]:
    """Every score the search gives (greedy: each sentence's; beam: the whole n-best list)."""
    arguments = {"max_len_extra": 8, "controls": case["controls"], "prefixes": case["prefixes"]}
    if case["beam"] == 1:
        return greedy_search(model(case["model"]), case["src"], **arguments).scores
    nbests = beam_search(model(case["model"]), case["src"], case["beam"], case["alpha"],
                         nbest=case["beam"], **arguments)
    return [hyp.score for hyps in nbests for hyp in hyps]


def check_finite_scores(config: settings = FEW) -> None:
    @config
    @given(decodings())
    def finite(case) -> None:
        try:
            found = scores(case)
        except RuntimeError as error:  # sampling from NaN probabilities
            raise AssertionError(f"{error} with {case['controls']}") from None
        assert all(math.isfinite(score) for score in found), f"{found} with {case['controls']}"

    finite()


def test_every_score_is_finite_over_every_declared_range():
    check_finite_scores()


def old_penalty(logits, history, penalty):
    """`penalize_repetitions` as it was: no bound on the penalised logits."""
    if penalty == 1.0 or history.size(1) == 0:
        return logits
    seen = logits.gather(1, history)
    return logits.scatter_(1, history, torch.where(seen > 0, seen / penalty, seen * penalty))


@pytest.mark.parametrize("bound", ["the old bound (p > 0)", "the new bound without the limit"])
def test_the_property_fails_on_the_old_penalty(monkeypatch, bound):
    """With the old arithmetic, a penalty under the smallest float32 (6e-239 is 0 in float32) or a
    normal but tiny one (a positive logit / 1e-38 overflows) gives NaN or infinite scores."""
    monkeypatch.setattr(controls, "penalize_repetitions", old_penalty)
    if bound.startswith("the old"):
        monkeypatch.setattr(controls, "REPETITION_PENALTY", Range(low=0, low_open=True))
    with pytest.raises(AssertionError, match="repetition_penalty"):
        check_finite_scores(PLANTED)
