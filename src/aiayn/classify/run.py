"""`aiayn classify train`: the classifier task of the run skeleton (see `aiayn.training.run`).

Labelled texts -> tokenizer -> `EncoderOnly` -> cross-entropy over the examples.

The data is the built-in brackets task (`data.task: brackets`, see `aiayn.classify.brackets`)
or TSV files (`data.task: tsv`, `data.train_tsv`, optional `data.valid_tsv`; without a
validation file the last `data.valid_fraction` of the shuffled training examples is held
out). The run directory is laid out as for translation; its root is a model directory
(`config.json` with the label names under `config.extra.labels`, `model.safetensors`,
`tokenizer.json`) that `aiayn classify predict --model` reads. Validation reports the loss
and the accuracy; the best model by `train.validation_metric` (the loss by default, or
`accuracy`) is kept.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from aiayn.classify.brackets import LABELS as BRACKET_LABELS
from aiayn.classify.brackets import make_brackets
from aiayn.classify.dataset import (
    ClassBatch,
    ClassificationDataset,
    accuracy,
    classification_loss,
    encode_texts,
)
from aiayn.classify.settings import ClassifySettings
from aiayn.classify.tsv import Example, label_names, read_tsv
from aiayn.core.errors import ConfigError
from aiayn.data.paths import resolve_data_file
from aiayn.data.tokenizer import Tokenizer
from aiayn.model import EncoderOnly, ModelConfig
from aiayn.training.config import RunConfig
from aiayn.training.state import TrainState
from aiayn.training.task import Metric, OneTokenizerTask, preset_config

log = logging.getLogger(__name__)

ACCURACY = Metric("accuracy", higher_is_better=True)
CLASSIFY_TASKS = ClassifySettings.task_names()  # brackets, tsv


@dataclass
class ClassifyData:
    """Tokenizer, label names and the encoded splits (valid/test may be None)."""

    tokenizer: Tokenizer
    labels: list[str]
    train: ClassificationDataset
    valid: ClassificationDataset | None
    test: ClassificationDataset | None


def read_splits(data: ClassifySettings) -> tuple[dict[str, list[Example]], list[str]]:
    """The (text, label) examples of each split, and the label names (class index order)."""
    if data.task == "brackets":
        splits = make_brackets(
            data.seed, data.num_train, data.num_valid, data.num_test, data.max_sentence_tokens
        )
        return {name: examples for name, examples in splits.items() if examples}, list(BRACKET_LABELS)
    if data.task != "tsv":
        raise ConfigError(f"aiayn classify needs data.task brackets or tsv, got {data.task!r}")
    if not data.train_tsv:
        raise ConfigError("data.task tsv needs data.train_tsv (or --tsv FILE)")
    train_path = resolve_data_file(data.train_tsv, "TSV file")
    train = read_tsv(train_path)
    labels = label_names(train, str(train_path))
    if data.valid_tsv:
        valid = read_tsv(resolve_data_file(data.valid_tsv, "TSV file"), labels)
    else:  # data.valid_fraction is in [0, 1): ClassifySettings checks its fields

        random.Random(f"aiayn-classify-{data.seed}").shuffle(train)
        cut = len(train) - int(len(train) * data.valid_fraction)
        train, valid = train[:cut], train[cut:]
    return {"train": train, **({"valid": valid} if valid else {})}, labels


def prepare_classify_data(data: ClassifySettings, tokenizer: Tokenizer | None = None) -> ClassifyData:
    """Read the splits, train the tokenizer on the training texts or load it (unless given),
    encode."""
    splits, labels = read_splits(data)
    if tokenizer is None:
        texts = [t for t, _ in splits["train"]]
        tokenizer = Tokenizer.from_spec(data.tokenizer, texts, data.vocab_size, data.special_tokens)
    index = {name: i for i, name in enumerate(labels)}

    def encode(name: str) -> ClassificationDataset | None:
        if name not in splits:
            return None
        texts = [t for t, _ in splits[name]]
        ids = encode_texts(tokenizer, texts, data.max_sentence_tokens, f"{data.task}/{name}")
        labels_of = [index[label] for _, label in splits[name]]
        return ClassificationDataset(ids, labels_of, tokenizer.specials.pad_id)

    prepared = ClassifyData(tokenizer, labels, encode("train"), encode("valid"), encode("test"))
    log.info(
        "data: %d training, %d validation, %d test examples; labels %s; vocabulary %d",
        len(prepared.train),
        len(prepared.valid or []),
        len(prepared.test or []),
        labels,
        tokenizer.vocab_size,
    )
    return prepared


def build_classifier_config(config: RunConfig, tokenizer: Tokenizer, labels: list[str]) -> ModelConfig:
    """The configured preset with the tokenizer's vocabulary and special ids; the label names
    go to `extra`.

    `max_len` (positions) defaults to `data.max_sentence_tokens` text tokens plus the leading
    `<bos>`."""
    fixed = {"vocab_size": tokenizer.vocab_size, **tokenizer.specials.as_dict(), "extra": {"labels": labels}}
    return preset_config(
        config,
        fixed=fixed,
        defaults={"max_len": config.data.max_sentence_tokens + 1, "extra": {"task": config.data.task}},
    )


class ClassifyTask(OneTokenizerTask[ClassifyData]):
    """Labelled texts -> `EncoderOnly`; validated by loss and accuracy."""

    command = "aiayn classify train"
    data_settings = ClassifySettings
    model_type = EncoderOnly.model_type
    target_unit = "examples"
    metrics = (ACCURACY,)

    def check_config(self, config: RunConfig) -> None:
        """The data task must be a classification task; TSV paths are stored resolved, so that
        a resume finds them from any directory."""
        if config.data.task not in CLASSIFY_TASKS:
            raise ConfigError(f"aiayn classify needs data.task brackets or tsv, got {config.data.task!r}")
        for name in ("train_tsv", "valid_tsv"):
            if getattr(config.data, name):
                setattr(config.data, name, str(resolve_data_file(getattr(config.data, name), "TSV file")))

    def prepare_data(self, data: ClassifySettings, tokenizer: Tokenizer | None) -> ClassifyData:
        return prepare_classify_data(data, tokenizer)

    def tokenizer(self, data: ClassifyData) -> Tokenizer:
        return data.tokenizer

    def build_model(self, config: RunConfig, data: ClassifyData) -> EncoderOnly:
        """A fresh encoder-only classifier for the tokenizer's vocabulary and the labels."""
        return EncoderOnly(build_classifier_config(config, data.tokenizer, data.labels), len(data.labels))

    def loss(self, model: nn.Module, batch: ClassBatch, smoothing: float) -> tuple[Tensor, int]:
        return classification_loss(model, batch, smoothing)

    def validation_metrics(
        self, model: nn.Module, config: RunConfig, data: ClassifyData, allowance_s: float | None = None
    ) -> dict[str, float]:
        """Accuracy on the validation split (when there is one); one scoring pass, nothing decoded,
        so no time cap applies (`allowance_s` is for decoding tasks)."""
        return {"accuracy": accuracy(model, data.valid, config.train.batch_tokens)} if data.valid else {}

    def final_results(
        self, best: nn.Module, config: RunConfig, data: ClassifyData, state: TrainState
    ) -> dict[str, Any]:
        """The label names and the best model's validation and test accuracy."""
        return {
            "labels": data.labels,
            "valid_accuracy": accuracy(best, data.valid) if data.valid else None,
            "test_accuracy": accuracy(best, data.test) if data.test else None,
        }


CLASSIFY_TASK = ClassifyTask()
