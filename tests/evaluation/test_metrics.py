"""BLEU / chrF through sacrebleu, and language-model perplexity."""

import math

import pytest
import torch
import torch.nn.functional as F

from aiayn.evaluation import corpus_bleu, corpus_chrf, lm_perplexity, perplexity_from_nll
from decoding.helpers import tiny_lm

TEXT = ["The cat sat on the mat.", "A dog runs across the street!"]


def test_identical_text_scores_100_with_signature():
    bleu = corpus_bleu(TEXT, TEXT)
    assert bleu.score == pytest.approx(100.0)
    assert "tok:13a" in bleu.signature and "case:mixed" in bleu.signature and "nrefs:1" in bleu.signature
    assert bleu.details.startswith("BLEU = 100.00")
    assert corpus_chrf(TEXT, TEXT).score == pytest.approx(100.0)


def test_case_and_lowercase():
    upper = [t.upper() for t in TEXT]
    assert corpus_bleu(upper, TEXT).score < 10
    lowered = corpus_bleu(upper, TEXT, lowercase=True)
    assert lowered.score == pytest.approx(100.0) and "case:lc" in lowered.signature


def test_multiple_references_and_mismatch():
    assert corpus_bleu(TEXT, [TEXT, ["x", "y"]]).signature.startswith("nrefs:2")
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_bleu(TEXT, TEXT[:1])


def test_perplexity_matches_cross_entropy():
    lm = tiny_lm(2, vocab_size=25, max_len=16)
    stream = torch.randint(4, 25, (30,), generator=torch.Generator().manual_seed(0))
    # windows of 4 positions, done by hand
    total = 0.0
    for start in range(0, 29, 4):
        x, y = stream[start : min(start + 4, 29)], stream[start + 1 : min(start + 5, 30)]
        with torch.no_grad():
            total += float(F.cross_entropy(lm(x[None])[0], y, reduction="sum"))
    result = lm_perplexity(lm, stream.tolist(), context=4, batch_size=3)
    assert result.tokens == 29
    assert result.nll == pytest.approx(total / 29, rel=1e-5)
    assert result.perplexity == pytest.approx(math.exp(total / 29), rel=1e-5)
    assert perplexity_from_nll(0.0, 5).perplexity == 1.0
