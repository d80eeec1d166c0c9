"""Translation, the paper's task: sentence pairs -> encoder-decoder `Transformer`.

data (read the splits of a synthetic task, Multi30k or parallel files; make the tokenizers;
encode) -> task (`TranslationTask`, what `aiayn train` runs through `aiayn.training.run`) ->
evaluate (decode a test set, then BLEU and chrF: `aiayn evaluate`, validation BLEU).
"""

from aiayn.translation.data import PreparedData, encode_split, prepare_data, read_splits
from aiayn.translation.evaluate import TranslationEvaluation, evaluate_translation
from aiayn.translation.task import TRANSLATION_TASK, TranslationTask, build_model_config

__all__ = [
    "TRANSLATION_TASK",
    "PreparedData",
    "TranslationEvaluation",
    "TranslationTask",
    "build_model_config",
    "encode_split",
    "evaluate_translation",
    "prepare_data",
    "read_splits",
]
