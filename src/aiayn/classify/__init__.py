"""Encoder-only sequence classification: the brackets task, TSV files, training, prediction.

brackets (the built-in task) / tsv (user data) -> dataset (encoding, batches, loss,
accuracy) -> run (`aiayn classify train`) -> predict (`Classifier`, `aiayn classify predict`).
"""

from aiayn.classify.brackets import is_balanced, make_brackets
from aiayn.classify.dataset import ClassBatch, ClassificationDataset, accuracy, classification_loss
from aiayn.classify.predict import Classifier, Prediction
from aiayn.classify.tsv import read_tsv

__all__ = [
    "ClassBatch",
    "ClassificationDataset",
    "Classifier",
    "Prediction",
    "accuracy",
    "classification_loss",
    "is_balanced",
    "make_brackets",
    "read_tsv",
]
