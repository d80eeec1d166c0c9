"""The decoding controls, by property (Hypothesis) over random tiny models, sources and searches:
no output repeats an n-gram of the blocked size, a forced prefix is always the output's start, and
the output-length limit always holds. Each property is shown catching a planted bug."""

from __future__ import annotations

import functools
import importlib
import math

import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from aiayn.decoding import beam_search, common, controls, greedy_search
from aiayn.decoding.controls import Controls

from .helpers import DEFAULT_SPECIALS, source_batch, tiny_transformer

VOCAB = 12
MAX_LEN = 24
WORDS = [i for i in range(VOCAB) if i not in DEFAULT_SPECIALS.ids]
FEW = settings(max_examples=80, deadline=None, database=None)
PLANTED = settings(FEW, phases=[Phase.generate], derandomize=True)


@functools.cache
def model(seed: int) -> torch.nn.Module:
    # little noise and a small vocabulary: outputs run long and repeat, which the controls must stop
    return tiny_transformer(seed, vocab_size=VOCAB, noise=0.3, max_len=MAX_LEN)


@st.composite
def decodings(draw) -> dict:
    """A model, a batch of sources, a search and its controls (prefixes only where asked)."""
    lengths = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3))
    sample = draw(st.booleans())
    return {
        "model": draw(st.integers(0, 2)),
        "src": source_batch(lengths, VOCAB, seed=draw(st.integers(0, 1000))),
        "beam": 1 if sample else draw(st.integers(1, 3)),
        "max_len_extra": draw(st.integers(0, 30)),
        "controls": Controls(
            no_repeat_ngram_size=draw(st.integers(0, 3)),
            max_output_ratio=draw(st.none() | st.floats(0.1, 4.0)),
            sample=sample, seed=draw(st.integers(0, 2**31)) if sample else None,
        ),
        "prefixes": draw(st.none() | st.lists(st.lists(st.sampled_from(WORDS), max_size=4),
                                              min_size=len(lengths), max_size=len(lengths))),
    }


def decode(case: dict) -> list[list[int]]:
    """Each sentence's output tokens (without `<eos>`), from greedy search or the best beam."""
    arguments = {key: case[key] for key in ("max_len_extra", "controls", "prefixes")}
    if case["beam"] == 1:
        return greedy_search(model(case["model"]), case["src"], **arguments).tokens
    nbests = beam_search(model(case["model"]), case["src"], case["beam"], **arguments)
    return [hyps[0].tokens for hyps in nbests]


def limit(case: dict, row: int) -> int:
    """The most tokens row `row` may generate, `<eos>` included: source + extra, the model's max_len
    and ceil(ratio x source), whichever is smallest."""
    source = int((case["src"][row] != DEFAULT_SPECIALS.pad_id).sum())
    most = min(source + case["max_len_extra"], MAX_LEN)
    ratio = case["controls"].max_output_ratio
    return max(1, min(most, math.ceil(ratio * source)) if ratio is not None else most)


def ngrams(tokens: list[int], size: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)]


def check_the_controls(config: settings = FEW) -> None:
    @config
    @given(decodings())
    def controls_hold(case) -> None:
        size = case["controls"].no_repeat_ngram_size
        for row, tokens in enumerate(decode(case)):
            prefix = case["prefixes"][row] if case["prefixes"] else []
            assert len(tokens) <= limit(case, row)
            forced = min(len(prefix), limit(case, row))
            assert tokens[:forced] == prefix[:forced]  # the prefix, as far as the limit lets it go
            free = ngrams(tokens, size) if size else []
            if size and len(set(ngrams(prefix, size))) == len(ngrams(prefix, size)):  # a prefix is forced
                assert len(set(free)) == len(free), f"a repeated {size}-gram in {tokens}"

    controls_hold()


def test_no_repeated_ngram_the_prefix_first_and_the_length_limit_in_every_output():
    check_the_controls()


def test_the_property_is_not_vacuous():
    """Without the controls, these models do repeat n-grams and run to the limit."""
    src = source_batch([3, 5, 8], VOCAB, seed=1)
    outputs = [*greedy_search(model(0), src, max_len_extra=20).tokens,
               *greedy_search(model(1), src, max_len_extra=20).tokens]
    assert any(len(set(ngrams(tokens, 2))) < len(ngrams(tokens, 2)) for tokens in outputs)


@pytest.mark.parametrize("bug", ["ngram blocking off by one", "prefix not forced", "ratio not applied"])
def test_the_property_catches_a_planted_bug(monkeypatch, bug):
    if bug == "ngram blocking off by one":
        real = controls.block_ngrams
        planted = {"block_ngrams": lambda logp, history, size: real(logp, history, size + 1 if size else 0)}
    elif bug == "prefix not forced":
        planted = {"force_prefix": lambda logp, wanted, before: logp}
    else:
        real_rule = common.output_length_limit
        planted = {"output_length_limit": lambda length, extra, steps, max_len, ratio: real_rule(
            length, extra, steps, max_len, None)}
    modules = ("aiayn.decoding.greedy", "aiayn.decoding.beam_search", "aiayn.decoding.controls",
               "aiayn.decoding.common")
    for module in map(importlib.import_module, modules):
        for name, function in planted.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, function)
    with pytest.raises(AssertionError):
        check_the_controls(PLANTED)
