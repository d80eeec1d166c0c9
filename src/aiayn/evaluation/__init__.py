"""Evaluation: corpus BLEU / chrF through sacrebleu, language-model perplexity, and the
end-to-end evaluation of a translation model on a test set."""

from aiayn.evaluation.bleu import MetricScore, corpus_bleu, corpus_chrf
from aiayn.evaluation.perplexity import Perplexity, lm_perplexity, perplexity_from_nll
from aiayn.evaluation.translation import TranslationEvaluation, evaluate_translation

__all__ = [
    "MetricScore",
    "Perplexity",
    "TranslationEvaluation",
    "corpus_bleu",
    "corpus_chrf",
    "evaluate_translation",
    "lm_perplexity",
    "perplexity_from_nll",
]
