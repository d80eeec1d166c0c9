"""Evaluation: corpus BLEU / chrF through sacrebleu, and language-model perplexity.

The end-to-end evaluation of a translation model on a test set (decode, then score) is the
translation package's: `aiayn.translation.evaluate_translation`. The names are imported on
first use (`aiayn.core.lazy_names`): the command line reads the report's settings without torch.
"""

from typing import TYPE_CHECKING

from aiayn.core.lazy_names import lazy_names

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_names(__name__, {
    "MetricScore": "aiayn.evaluation.bleu", "corpus_bleu": "aiayn.evaluation.bleu",
    "corpus_chrf": "aiayn.evaluation.bleu", "Perplexity": "aiayn.evaluation.perplexity",
    "lm_perplexity": "aiayn.evaluation.perplexity", "perplexity_from_nll": "aiayn.evaluation.perplexity",
})
