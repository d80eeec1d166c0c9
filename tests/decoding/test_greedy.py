"""Greedy search: the cache changes nothing but speed; batching changes nothing at all."""

import pytest
import torch

from aiayn.decoding import greedy_search, output_limits

from .helpers import approx, source_batch, tiny_transformer, uncached_greedy, without_eos


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cached_and_uncached_decoding_agree(seed):
    model = tiny_transformer(seed)
    src = source_batch([5, 3, 7, 1], seed=seed)
    cached = greedy_search(model, src, max_len_extra=6)
    uncached = uncached_greedy(model, src, max_len_extra=6)
    assert cached.tokens == uncached.tokens
    assert cached.scores == approx(uncached.scores)


def ending_model(**overrides):
    """A tiny model and batch whose greedy outputs vary and end at `<eos>` mid-sentence."""
    return tiny_transformer(4, noise=0.05, **overrides), source_batch([5, 3, 7, 1], seed=4)


def test_cached_and_uncached_agree_when_rows_end_at_eos():
    model, src = ending_model()
    limits = output_limits(src, model.config.pad_id, max_len_extra=6).tolist()
    cached = greedy_search(model, src, max_len_extra=6)
    uncached = uncached_greedy(model, src, max_len_extra=6)
    ended_early = [len(t) < limit for t, limit in zip(cached.tokens, limits, strict=True)]
    assert sum(ended_early) >= 2 and max(len(set(t)) for t in cached.tokens) >= 3  # the case it checks
    assert cached.tokens == uncached.tokens
    assert cached.scores == approx(uncached.scores)


def test_forced_steps_agree_without_stopping():
    model, src = ending_model()
    assert min(len(t) for t in greedy_search(model, src, max_steps=12).tokens) < 12  # <eos> comes first
    with without_eos(model):
        cached = greedy_search(model, src, max_steps=12)
        uncached = uncached_greedy(model, src, max_steps=12)
    assert [len(t) for t in cached.tokens] == [12] * 4
    assert cached.tokens == uncached.tokens
    assert cached.scores == approx(uncached.scores)


def test_batch_equals_one_by_one():
    model = tiny_transformer(4)
    lengths = [2, 9, 5, 1, 6]
    src = source_batch(lengths, seed=4)
    batched = greedy_search(model, src, max_len_extra=5)
    for i, n in enumerate(lengths):
        alone = greedy_search(model, src[i : i + 1, : n + 1], max_len_extra=5)
        assert alone.tokens[0] == batched.tokens[i]
        assert alone.scores[0] == approx(batched.scores[i])


def test_score_is_the_forced_decoding_log_probability():
    model = tiny_transformer(5)
    src = source_batch([4], seed=5)
    out = greedy_search(model, src, max_len_extra=8)
    tokens = out.tokens[0]
    ended = len(tokens) < 4 + 1 + 8  # stopped by <eos> rather than the length limit
    labels = torch.tensor([[*tokens, model.config.eos_id]] if ended else [tokens])
    tgt_in = torch.tensor([[model.config.bos_id, *labels[0, :-1].tolist()]])
    with torch.no_grad():
        logp = model(src, tgt_in).log_softmax(-1).gather(2, labels[:, :, None]).sum()
    assert out.scores[0] == approx(float(logp))


def test_length_limits_and_no_special_outputs():
    model = tiny_transformer(6)
    src = source_batch([3, 8], seed=6)
    pad_id = model.config.pad_id
    limits = output_limits(src, pad_id, max_len_extra=2)
    assert limits.tolist() == [4 + 2, 9 + 2]  # source tokens + <eos> + extra
    out = greedy_search(model, src, max_len_extra=2)
    for tokens, limit in zip(out.tokens, limits.tolist(), strict=True):
        assert len(tokens) <= limit
        assert not {pad_id, model.config.bos_id} & set(tokens)
    assert output_limits(src, pad_id, max_steps=30, model_max_len=16).tolist() == [16, 16]


def test_model_max_len_caps_the_output():
    model, src = ending_model(max_len=10)
    with without_eos(model):
        out = greedy_search(model, src, max_len_extra=50)
    assert [len(t) for t in out.tokens] == [10] * 4
