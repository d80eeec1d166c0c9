"""The optimised beam search (shared encoder keys/values, one row per sentence at step 0, one
top-k over raw logits, preallocated cache) finds what a plain, unoptimised beam search finds."""

import pytest
import torch

from aiayn import load
from aiayn.decoding import beam_search, greedy_search
from aiayn.inference.torch_translator import pad_batch

from .helpers import source_batch, tiny_transformer
from .reference_beam_search import assert_same_search, reference_beam_search


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("beam", "nbest", "alpha"), [(1, 1, 0.0), (4, 1, 0.6), (5, 3, 1.0)])
def test_random_models_same_as_reference(seed, beam, nbest, alpha):
    model = tiny_transformer(seed, vocab_size=24)
    src = source_batch([5, 1, 7, 3, 7, 2], vocab_size=24, seed=seed)  # padded rows of varied lengths
    ours = beam_search(model, src, beam, alpha, max_len_extra=4, nbest=nbest)
    reference = reference_beam_search(model, src, beam, alpha, max_len_extra=4, nbest=nbest)
    assert_same_search(ours, reference, tie=1e-4)  # the perturbed models' logits are large (helpers.approx)


def test_trained_model_same_as_reference(dates_run):
    """The session's trained `dates` model on held-out inputs, in one padded batch."""
    from shared_dates import splits

    translator = load(dates_run, "cpu")
    model, config = translator.model, translator.config
    texts = [source for source, _ in splits()["test"][:40]]
    ids = [[*row, config.eos_id] for row in translator.tokenizers.source.encode_batch(texts)]
    src = pad_batch(ids, config.pad_id, torch.device("cpu"))
    for beam, nbest in ((4, 1), (5, 2)):
        ours = beam_search(model, src, beam, 0.6, max_len_extra=10, nbest=nbest)
        reference = reference_beam_search(model, src, beam, 0.6, max_len_extra=10, nbest=nbest)
        assert_same_search(ours, reference)
        assert all(hyps for hyps in ours)



@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_greedy_same_as_reference_beam_one(seed):
    """Greedy search, whose finished rows leave the batch, finds what the plain reference finds
    with one beam and no length penalty (the same rule), rows ending at different steps."""
    model = tiny_transformer(seed, vocab_size=24)
    src = source_batch([5, 1, 7, 3, 7, 2, 4, 6], vocab_size=24, seed=seed)  # padded rows of varied lengths
    ours = greedy_search(model, src, max_len_extra=6)
    reference = reference_beam_search(model, src, 1, 0.0, max_len_extra=6)
    assert ours.tokens == [hyps[0].tokens for hyps in reference]
    assert ours.scores == pytest.approx([hyps[0].score for hyps in reference], rel=1e-4, abs=1e-4)
    assert len({len(tokens) for tokens in ours.tokens}) > 1  # rows finished at different steps
