"""Beam search: exact on a tiny vocabulary, never better than exhaustive search, and greedy
at beam size 1."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from aiayn.data.special_tokens import SpecialTokens
from aiayn.decoding import beam_search, greedy_search, length_penalty
from aiayn.model import DecoderCache, ModelConfig

from .helpers import DEFAULT_SPECIALS, approx, source_batch, tiny_transformer

MAX_STEPS = 4  # outputs of at most 4 tokens, <eos> included


def exhaustive(model, src, vocab_size: int, alpha: float, max_steps: int = MAX_STEPS):
    """Every possible output of `src` (1, S), scored like beam search, best first.

    Outputs: w_1 .. w_{n-1} <eos> for n <= max_steps, and w_1 .. w_max_steps without <eos>
    (cut at the length limit), where w ranges over the ids that are neither <pad>, <bos>
    nor <eos> (the model config's ids). Score: log P(Y | X) / lp(|Y|) by forced decoding.
    """
    pad, bos, eos = model.config.pad_id, model.config.bos_id, model.config.eos_id
    words = [w for w in range(vocab_size) if w not in (pad, bos, eos)]
    outputs = [(*prefix, eos) for n in range(max_steps) for prefix in itertools.product(words, repeat=n)]
    outputs += list(itertools.product(words, repeat=max_steps))
    labels = torch.full((len(outputs), max_steps), pad)
    for i, out in enumerate(outputs):
        labels[i, : len(out)] = torch.tensor(out)
    tgt_in = torch.cat([torch.full((len(outputs), 1), bos), labels[:, :-1]], dim=1)
    with torch.no_grad():
        logp = model(src.expand(len(outputs), -1), tgt_in).log_softmax(-1)
    token_logp = logp.gather(2, labels[:, :, None]).squeeze(2).masked_fill(labels == pad, 0.0)
    lengths = torch.tensor([len(out) for out in outputs])
    scores = token_logp.sum(1) / length_penalty(lengths, alpha)
    ranked = sorted(zip(scores.tolist(), outputs, strict=True), reverse=True)
    return [([w for w in out if w != eos], score) for score, out in ranked]


# Special ids elsewhere than 0..3, as in a tokenizer loaded from a tokenizer.json: the search
# must read them from the model config (GPT-2 style: one token opens and closes).
MOVED = {"pad_id": 5, "bos_id": 3, "eos_id": 4, "unk_id": None}
SHARED_BOS_EOS = {"pad_id": 5, "bos_id": 4, "eos_id": 4, "unk_id": None}


@pytest.mark.parametrize(("vocab_size", "beam", "ids"), [(5, 24, {}), (6, 108, {}), (6, 108, MOVED)])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wide_beam_equals_exhaustive_search(vocab_size, beam, ids, alpha, seed):
    # `beam` = the number of extensions at the last step (live prefixes x (words + <eos>)),
    # so nothing is ever pruned.
    model = tiny_transformer(seed, vocab_size=vocab_size, **ids)
    src = source_batch([3], vocab_size=vocab_size, seed=seed, specials=SpecialTokens.of(model.config))
    expected = exhaustive(model, src, vocab_size, alpha)
    nbest = beam_search(model, src, beam, alpha, nbest=3, max_steps=MAX_STEPS)[0]
    assert [h.tokens for h in nbest] == [tokens for tokens, _ in expected[:3]]
    assert [h.score for h in nbest] == approx([score for _, score in expected[:3]])


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), beam=st.integers(1, 3), alpha=st.sampled_from([0.0, 0.6, 1.0]))
def test_narrow_beam_never_beats_exhaustive_search(seed, beam, alpha):
    torch.set_num_threads(1)
    model = tiny_transformer(seed % 50, vocab_size=6)
    src = source_batch([1 + seed % 4], vocab_size=6, seed=seed)
    expected = exhaustive(model, src, 6, alpha)
    best = beam_search(model, src, beam, alpha, max_steps=MAX_STEPS)[0][0]
    assert best.score <= expected[0][1] + 1e-4
    # and its score is the true score of its tokens
    assert best.score == approx(dict((tuple(t), s) for t, s in expected)[tuple(best.tokens)])


@pytest.mark.parametrize("ids", [{}, MOVED, SHARED_BOS_EOS])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_beam_size_one_without_length_penalty_is_greedy(seed, ids):
    model = tiny_transformer(seed, vocab_size=12, **ids)
    src = source_batch([4, 2, 6], vocab_size=12, seed=seed, specials=SpecialTokens.of(model.config))
    greedy = greedy_search(model, src, max_len_extra=8)
    beam = beam_search(model, src, beam_size=1, alpha=0.0, max_len_extra=8)
    assert [hyps[0].tokens for hyps in beam] == greedy.tokens
    assert [hyps[0].score for hyps in beam] == approx(greedy.scores)


def test_batch_equals_one_by_one():
    model = tiny_transformer(7, vocab_size=12)
    lengths = [5, 1, 8, 3]
    src = source_batch(lengths, vocab_size=12, seed=7)
    batched = beam_search(model, src, beam_size=3, nbest=3, max_len_extra=6)
    for i, n in enumerate(lengths):
        alone = beam_search(model, src[i : i + 1, : n + 1], beam_size=3, nbest=3, max_len_extra=6)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
        assert [h.score for h in alone] == approx([h.score for h in batched[i]])


@pytest.mark.parametrize("ids", [{}, MOVED, SHARED_BOS_EOS])
def test_nbest_lists_are_sorted_distinct_and_within_limits(ids):
    model = tiny_transformer(8, vocab_size=12, **ids)
    specials = SpecialTokens.of(model.config)
    src = source_batch([2, 6, 4], vocab_size=12, seed=8, specials=specials)
    results = beam_search(model, src, beam_size=4, alpha=0.6, nbest=4, max_len_extra=3)
    for hyps, n in zip(results, [2, 6, 4], strict=True):
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 4
        for h in hyps:
            assert len(h.tokens) <= n + 1 + 3
            assert not {specials.pad_id, specials.bos_id, specials.eos_id} & set(h.tokens)


class MarkovModel(nn.Module):
    """Stands in for a Transformer in the search: the next-token distribution depends only
    on the last token, through the (V, V) table of log-probabilities `logp[last, next]`."""

    def __init__(self, logp: torch.Tensor) -> None:
        super().__init__()
        self.config = ModelConfig.tiny(vocab_size=logp.size(0))
        self.logp = logp
        self.output_projection = nn.Identity()

    def encode(self, src, src_padding_mask=None):
        return torch.zeros(src.size(0), src.size(1), 1)

    def new_cache(self) -> DecoderCache:
        return DecoderCache.empty(1)

    def incremental_step(self, last, memory, src_padding_mask, cache, groups=1):
        return self.logp[last[:, -1]]  # (B, V)


def test_search_goes_on_while_an_open_beam_can_still_win():
    # After <bos>: <eos> 0.52, w 0.48. After w: w 0.99, <eos> 0.01. Outputs of at most 4 tokens.
    w, bos, eos = 3, DEFAULT_SPECIALS.bos_id, DEFAULT_SPECIALS.eos_id
    probs = torch.full((5, 5), 1e-9)
    probs[bos, eos], probs[bos, w] = 0.52, 0.48
    probs[w, w], probs[w, eos] = 0.99, 0.01
    model = MarkovModel(probs.log())
    src = torch.tensor([[w, eos]])
    # alpha 0: [] (log .52 = -0.654) beats [w w w w] (log .48 + 3 log .99 = -0.764)
    best = beam_search(model, src, beam_size=2, alpha=0.0, max_steps=4)[0][0]
    assert best.tokens == [] and best.score == approx(-0.6539)
    # alpha 1: lp(4) = 1.5 and [w w w w] scores -0.509: the search must not stop at step 1,
    # where the open beam's score -0.734 / lp(1) looks worse than the finished -0.654.
    best = beam_search(model, src, beam_size=2, alpha=1.0, max_steps=4)[0][0]
    assert best.tokens == [w, w, w, w] and best.score == approx(-0.7641 / 1.5)


def test_bad_arguments():
    model = tiny_transformer(0)
    with pytest.raises(ValueError, match="nbest"):
        beam_search(model, source_batch([2]), beam_size=2, nbest=3)
