"""Evaluation: corpus BLEU / chrF through sacrebleu, and language-model perplexity.

The end-to-end evaluation of a translation model on a test set (decode, then score) is the
translation package's: `aiayn.translation.evaluate_translation`.
"""

from aiayn.evaluation.bleu import MetricScore, corpus_bleu, corpus_chrf
from aiayn.evaluation.perplexity import Perplexity, lm_perplexity, perplexity_from_nll

__all__ = [
    "MetricScore",
    "Perplexity",
    "corpus_bleu",
    "corpus_chrf",
    "lm_perplexity",
    "perplexity_from_nll",
]
