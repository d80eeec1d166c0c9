"""Sampling from a decoder-only LM: seeded, bounded, stoppable; top-k 1 is greedy."""

import pytest
import torch

from aiayn.decoding import Sampling, filter_logits, sample_stream

from .helpers import tiny_lm

PROMPT = [5, 9, 4, 12]


def sample(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, top_p=None, seed=None,
           stop_ids=None):
    sampling = Sampling(temperature, top_k, top_p)
    return list(sample_stream(model, prompt_ids, max_new_tokens, sampling, seed, stop_ids))


@pytest.fixture(scope="module")
def lm():
    return tiny_lm(0, vocab_size=30)


def test_same_seed_same_tokens_and_global_rng_untouched(lm):
    state = torch.random.get_rng_state()
    first = sample(lm, PROMPT, max_new_tokens=12, temperature=1.5, seed=7, stop_ids=())
    torch.manual_seed(123)  # the global RNG plays no part
    second = sample(lm, PROMPT, max_new_tokens=12, temperature=1.5, seed=7, stop_ids=())
    assert first == second
    others = [sample(lm, PROMPT, max_new_tokens=12, temperature=1.5, seed=s, stop_ids=()) for s in range(4)]
    assert any(other != first for other in others)
    torch.manual_seed(0)
    torch.random.set_rng_state(state)


def test_max_new_tokens_and_stop_ids(lm):
    free = sample(lm, PROMPT, max_new_tokens=10, temperature=2.0, seed=3, stop_ids=())
    assert len(free) == 10
    assert sample(lm, PROMPT, max_new_tokens=0, seed=3) == []
    stop = free[4]
    stopped = sample(lm, PROMPT, max_new_tokens=10, temperature=2.0, seed=3, stop_ids=[stop])
    assert stopped == free[: free.index(stop) + 1]  # ends with the first stop token


def test_top_k_one_and_tiny_top_p_are_greedy(lm):
    greedy = sample(lm, PROMPT, max_new_tokens=8, temperature=0.0, stop_ids=())
    assert sample(lm, PROMPT, max_new_tokens=8, top_k=1, seed=5, stop_ids=()) == greedy
    assert sample(lm, PROMPT, max_new_tokens=8, top_p=1e-6, seed=5, stop_ids=()) == greedy


@pytest.mark.parametrize("temperature", [1e-45, 1e-30, 1e-8])
def test_tiny_temperature_is_greedy_not_nan(lm, temperature):
    # logits / 1e-45 overflows to inf; the sampler must still draw the arg-max, not fail on NaN.
    greedy = sample(lm, PROMPT, max_new_tokens=8, temperature=0.0, stop_ids=())
    assert sample(lm, PROMPT, max_new_tokens=8, temperature=temperature, seed=5, stop_ids=()) == greedy


def test_cached_greedy_matches_full_recomputation(lm):
    greedy = sample(lm, PROMPT, max_new_tokens=8, temperature=0.0, stop_ids=())
    tokens = list(PROMPT)
    with torch.no_grad():
        for _ in range(8):
            tokens.append(int(lm(torch.tensor([tokens]))[0, -1].argmax()))
    assert greedy == tokens[len(PROMPT) :]


def test_stream_yields_one_token_at_a_time_and_stops_at_max_len():
    lm = tiny_lm(1, vocab_size=30, max_len=8)
    stream = sample_stream(lm, [4, 5, 6, 7, 8], 100, Sampling(), seed=0, stop_ids=())
    assert isinstance(next(stream), int)
    assert len(list(stream)) == 8 - 5  # positions run out: max_len - prompt + 1 tokens in all
    assert lm.training is False


def test_eval_mode_is_restored(lm):
    lm.train()
    sample(lm, PROMPT, max_new_tokens=2, seed=0)
    assert lm.training
    lm.eval()


def test_filter_logits():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    assert torch.isinf(filter_logits(logits, top_k=2)).tolist() == [[True, False, True, False]]
    # probabilities ~ [.03, .64, .09, .24]: 0.64 < 0.8 so the nucleus also takes 0.24
    assert torch.isinf(filter_logits(logits, top_p=0.8)).tolist() == [[True, False, True, False]]
    assert torch.isinf(filter_logits(logits, top_p=0.5)).tolist() == [[True, False, True, True]]
    assert torch.equal(filter_logits(logits), logits)
