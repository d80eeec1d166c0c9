"""`Classifier`: a trained `EncoderOnly` model and its tokenizer, texts in, labels out."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch

from aiayn.classify.dataset import ClassificationDataset, encode_texts, predict_probabilities
from aiayn.core.errors import CheckpointError, DataError
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import JOINT_FILE, Tokenizer
from aiayn.formats import open_model, read_model_dir
from aiayn.model import EncoderOnly


class Prediction(NamedTuple):
    """The most probable label of a text and its probability."""

    label: str
    probability: float


class Classifier:
    """Classify texts with a model directory written by `aiayn classify train`."""

    def __init__(self, model: EncoderOnly, tokenizer: Tokenizer, labels: list[str]) -> None:
        if len(labels) != model.num_classes:
            raise CheckpointError(f"{len(labels)} label names for a model of {model.num_classes} classes")
        tokenizer.check_fits(model.config.src_vocab_size)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.labels = labels

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> Classifier:
        """Read the model, tokenizer and label names from a model directory."""
        record = read_model_dir(directory)
        model = open_model(record, EncoderOnly, device)
        extra = model.config.extra if isinstance(model.config.extra, dict) else {}
        labels = extra.get("labels")
        if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
            labels = [str(i) for i in range(model.num_classes)]  # a model trained elsewhere
        tokenizer = Tokenizer.load(record.path / JOINT_FILE, SpecialTokens.of(model.config))
        return cls(model, tokenizer, labels)

    def predict(self, texts: list[str], origin: str = "input", first_line: int = 1) -> list[Prediction]:
        """The prediction for each text (non-empty; longer ones are cut to fit the model's max_len).

        `origin` names the texts in errors (e.g. the file they come from), `first_line` the line
        number of the first text there.
        """
        check_texts(texts, origin, first_line)
        ids = encode_texts(self.tokenizer, texts, self.model.config.max_len - 1, origin)  # + <bos>
        dataset = ClassificationDataset(ids, [0] * len(ids), self.model.config.pad_id)
        probs, predicted = predict_probabilities(self.model, dataset)
        return [Prediction(self.labels[int(c)], float(probs[i, c])) for i, c in enumerate(predicted.tolist())]


def check_texts(texts: list[str], origin: str = "input", first_line: int = 1) -> None:
    """A `DataError` naming the first empty text (line `first_line` + its index in `origin`)."""
    for number, text in enumerate(texts, start=first_line):
        if not text.strip():
            raise DataError(f"{origin}: line {number}: empty text, nothing to classify")
