"""Lexically constrained beam search: exact against exhaustive search over the outputs that
contain (and avoid) the phrases, never better with a narrower beam, the plain search when
unconstrained, flagged when the limit comes first."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.decoding import beam_search, length_penalty
from aiayn.decoding.beam_search import _beam_search
from aiayn.decoding.constrained_search import constrained_beam_search
from aiayn.decoding.constraints import NO_CONSTRAINTS, Negative, Positive, SentenceConstraints
from aiayn.decoding.controls import NO_CONTROLS

from .helpers import approx, source_batch, tiny_transformer

MAX_STEPS = 6  # outputs of at most 6 tokens, <eos> included


def contains(tokens, phrase) -> bool:
    n = len(phrase)
    return any(tuple(tokens[i : i + n]) == tuple(phrase) for i in range(len(tokens) - n + 1))


def exhaustive(model, src, vocab_size, alpha, include=(), exclude=(), max_steps=MAX_STEPS):
    """Every output of `src` (1, S) with every `include` phrase and no `exclude` phrase,
    scored like beam search (log P / lp), best first (see test_beam_search.exhaustive)."""
    pad, bos, eos = model.config.pad_id, model.config.bos_id, model.config.eos_id
    words = [w for w in range(vocab_size) if w not in (pad, bos, eos)]
    outputs = [(*p, eos) for n in range(max_steps) for p in itertools.product(words, repeat=n)]
    outputs += list(itertools.product(words, repeat=max_steps))
    outputs = [
        out for out in outputs
        if all(contains(out, p) for p in include) and not any(contains(out, p) for p in exclude)
    ]
    labels = torch.full((len(outputs), max_steps), pad)
    for i, out in enumerate(outputs):
        labels[i, : len(out)] = torch.tensor(out)
    tgt_in = torch.cat([torch.full((len(outputs), 1), bos), labels[:, :-1]], dim=1)
    with torch.no_grad():
        logp = model(src.expand(len(outputs), -1), tgt_in).log_softmax(-1)
    token_logp = logp.gather(2, labels[:, :, None]).squeeze(2).masked_fill(labels == pad, 0.0)
    scores = token_logp.sum(1) / length_penalty(torch.tensor([len(o) for o in outputs]), alpha)
    ranked = sorted(zip(scores.tolist(), outputs, strict=True), reverse=True)
    return [([w for w in out if w != eos], score) for score, out in ranked]


# (vocab size, beam wide enough that nothing is pruned: live prefixes x extensions at the last step)
WIDE = [(5, 96), (6, 972)]
CASES = [  # (include, exclude)
    ([[3]], []),  # one single-token phrase
    ([[4, 4]], []),  # a repeated token: the match must be contiguous
    ([[3, 4], [4]], []),  # two phrases that may share a token (3 4 holds both)
    ([[3]], [[4, 3]]),  # include 3, exclude the sequence 4 3
    ([[4, 3, 4]], []),  # a phrase whose prefix is its suffix (a KMP border)
]


@pytest.mark.parametrize(("vocab_size", "beam"), WIDE)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("alpha", "seed"), [(0.0, 0), (0.6, 1), (2.0, 2)])
def test_wide_beam_equals_exhaustive_constrained_search(vocab_size, beam, case, alpha, seed):
    include, exclude = case
    if any(t >= vocab_size for p in include + exclude for t in p):
        pytest.skip("phrase outside the vocabulary")
    model = tiny_transformer(seed, vocab_size=vocab_size)
    src = source_batch([3], vocab_size=vocab_size, seed=seed)
    expected = exhaustive(model, src, vocab_size, alpha, include, exclude)
    constraints = [SentenceConstraints.of(include, exclude)]
    nbest = beam_search(model, src, beam, alpha, nbest=3, max_steps=MAX_STEPS, constraints=constraints)[0]
    assert [h.tokens for h in nbest] == [tokens for tokens, _ in expected[:3]]
    assert [h.score for h in nbest] == approx([score for _, score in expected[:3]])
    assert all(h.constraints_met for h in nbest)


phrases = st.lists(st.integers(3, 5), min_size=1, max_size=2)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), beam=st.integers(1, 4), alpha=st.sampled_from([0.0, 0.6, 1.0]),
       include=st.lists(phrases, min_size=1, max_size=2), exclude=st.lists(phrases, max_size=1))
def test_narrow_beam_never_beats_exhaustive_constrained_search(seed, beam, alpha, include, exclude):
    model = tiny_transformer(seed % 50, vocab_size=6)
    src = source_batch([1 + seed % 4], vocab_size=6, seed=seed)
    expected = exhaustive(model, src, 6, alpha, include, exclude)
    constraints = [SentenceConstraints.of(include, exclude)]
    best = beam_search(model, src, beam, alpha, max_steps=MAX_STEPS, constraints=constraints)[0][0]
    assert not any(contains(best.tokens, p) for p in exclude)  # excluded: never, met or not
    if best.constraints_met:
        assert all(contains(best.tokens, p) for p in include)
        assert expected and best.score <= expected[0][1] + 1e-4
        assert best.score == approx(dict((tuple(t), s) for t, s in expected)[tuple(best.tokens)])
    else:  # flagged: the limit came before every phrase was in
        assert not all(contains(best.tokens, p) for p in include)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unconstrained_allocation_is_the_plain_search(seed):
    # The constrained search itself, given nothing to include, must take the plain search's rules 2-3.
    model = tiny_transformer(seed, vocab_size=14)
    src = source_batch([4, 2, 6], vocab_size=14, seed=seed)
    args = (4, 0.6, 5, 3, None, model.config.bos_id, model.config.eos_id, NO_CONTROLS, None)
    with torch.no_grad():
        plain = _beam_search(model, src, *args)
        constrained = constrained_beam_search(model, src, [NO_CONSTRAINTS] * 3, *args)
    for p, c in zip(plain, constrained, strict=True):
        assert [h.tokens for h in p] == [h.tokens for h in c]
        assert [h.score for h in p] == approx([h.score for h in c])


def test_no_constraints_leave_the_search_unchanged():
    model = tiny_transformer(3, vocab_size=12)
    src = source_batch([5, 1, 3], vocab_size=12, seed=3)
    plain = beam_search(model, src, 4, 0.6, max_len_extra=6, nbest=2)
    unused = beam_search(model, src, 4, 0.6, max_len_extra=6, nbest=2, constraints=[NO_CONSTRAINTS] * 3)
    assert unused == plain  # tokens and scores identical, float for float


def test_batch_equals_one_by_one():
    model = tiny_transformer(5, vocab_size=12)
    lengths = [5, 1, 3]
    src = source_batch(lengths, vocab_size=12, seed=5)
    constraints = [
        SentenceConstraints.of([[7, 8]]), NO_CONSTRAINTS, SentenceConstraints.of([[9], [5]], [[6]])
    ]
    batched = beam_search(model, src, 3, nbest=2, max_len_extra=4, constraints=constraints)
    for i, n in enumerate(lengths):
        alone = beam_search(model, src[i : i + 1, : n + 1], 3, nbest=2, max_len_extra=4,
                            constraints=constraints[i : i + 1])[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
        assert [h.score for h in alone] == approx([h.score for h in batched[i]])
    assert contains(batched[0][0].tokens, [7, 8])
    assert contains(batched[2][0].tokens, [9]) and contains(batched[2][0].tokens, [5])
    assert 6 not in batched[2][0].tokens


def test_limit_grows_by_the_constraint_tokens():
    model = tiny_transformer(4, vocab_size=12)
    src = source_batch([1], vocab_size=12, seed=4)  # 2 source tokens: limit 2 + 0 extra
    phrase = [5, 6, 7, 8, 9]
    best = beam_search(model, src, 4, max_len_extra=0, constraints=[SentenceConstraints.of([phrase])])[0][0]
    assert best.constraints_met and contains(best.tokens, phrase)
    assert len(best.tokens) <= 2 + len(phrase)


def test_limit_reached_first_returns_the_best_flagged():
    model = tiny_transformer(4, vocab_size=12)
    src = source_batch([3], vocab_size=12, seed=4)
    constraints = [SentenceConstraints.of([[5, 6, 7, 8]])]
    hyps = beam_search(model, src, 4, nbest=2, max_steps=3, constraints=constraints)[0]
    assert len(hyps) == 1 and not hyps[0].constraints_met
    assert len(hyps[0].tokens) == 3 and hyps[0].tokens[:3] == [5, 6, 7]  # the most tokens met


@settings(max_examples=40, deadline=None)
@given(tokens=st.lists(st.integers(0, 2), max_size=9),
       phrases=st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=4), min_size=1, max_size=3))
def test_phrase_tracking_is_exact(tokens, phrases):
    positive = Positive.build([SentenceConstraints.of(phrases)], torch.device("cpu"))
    C = positive.phrases.size(1)
    progress = torch.zeros(1, 1, C, dtype=torch.long)
    met = torch.zeros(1, 1, C, dtype=torch.bool)
    count = torch.zeros(1, 1, 1, dtype=torch.long)
    for token in tokens:
        new_progress, new_met, count = positive.advance(progress, met, torch.tensor([[[token]]]))
        progress, met = new_progress[:, :, 0], new_met[:, :, 0]
    assert met[0, 0].tolist() == [contains(tokens, p) for p in phrases]
    if all(contains(tokens, p) for p in phrases):
        assert int(count) == sum(map(len, phrases))


def test_negative_sequences_are_blocked_where_their_start_was_generated():
    negative = Negative.build([SentenceConstraints.of(exclude=[[4], [5, 6, 7]])], torch.device("cpu"))
    history = torch.tensor([[1, 5, 6], [5, 6, 1], [6, 5, 6]])  # 3 beams of one sentence
    logp = negative.block(torch.zeros(3, 9), history, width=3)
    blocked = [set((row == float("-inf")).nonzero().flatten().tolist()) for row in logp]
    assert blocked == [{4, 7}, {4}, {4, 7}]
