"""`aiayn classify train`: labelled texts -> tokenizer -> `EncoderOnly` -> `Trainer`.

The data is the built-in brackets task (`data.task: brackets`, see `aiayn.classify.brackets`)
or TSV files (`data.task: tsv`, `data.train_tsv`, optional `data.valid_tsv`; without a
validation file the last `data.valid_fraction` of the shuffled training examples is held
out). The run directory is laid out as for translation; its root is a model directory
(`config.json` with the label names under `config.extra.labels`, `model.safetensors`,
`tokenizer.json`) that `aiayn classify predict --model` reads. Validation reports the loss
and the accuracy; the model with the lowest validation loss is kept.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aiayn.classify.brackets import LABELS as BRACKET_LABELS
from aiayn.classify.brackets import make_brackets
from aiayn.classify.dataset import ClassificationDataset, accuracy, classification_loss, encode_texts
from aiayn.classify.tsv import Example, label_names, read_tsv
from aiayn.data.paths import resolve_data_file
from aiayn.data.tokenizer import JOINT_FILE, Tokenizer
from aiayn.data.tokenizer_spec import make_tokenizer, reload_tokenizer
from aiayn.errors import ConfigError
from aiayn.files import atomic_write_text
from aiayn.model import EncoderOnly, ModelConfig
from aiayn.training.config import DataConfig, RunConfig
from aiayn.training.run_dir import attach_log_file, prepare_run_dir
from aiayn.training.trainer import Trainer

log = logging.getLogger(__name__)

RESULTS_FILE = "results.json"
CLASSIFY_TASKS = ("brackets", "tsv")


@dataclass
class ClassifyData:
    """Tokenizer, label names and the encoded splits (valid/test may be None)."""

    tokenizer: Tokenizer
    labels: list[str]
    train: ClassificationDataset
    valid: ClassificationDataset | None
    test: ClassificationDataset | None


def read_splits(data: DataConfig) -> tuple[dict[str, list[Example]], list[str]]:
    """The (text, label) examples of each split, and the label names (class index order)."""
    if data.task == "brackets":
        splits = make_brackets(data.seed, data.num_train, data.num_valid, data.num_test, data.max_len)
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
    elif not 0.0 <= data.valid_fraction < 1.0:
        raise ConfigError(f"data.valid_fraction must be in [0, 1), got {data.valid_fraction!r}")
    else:
        random.Random(f"aiayn-classify-{data.seed}").shuffle(train)
        cut = len(train) - int(len(train) * data.valid_fraction)
        train, valid = train[:cut], train[cut:]
    return {"train": train, **({"valid": valid} if valid else {})}, labels


def prepare_classify_data(data: DataConfig, tokenizer: Tokenizer | None = None) -> ClassifyData:
    """Read the splits, train the tokenizer on the training texts or load it (unless given),
    encode."""
    splits, labels = read_splits(data)
    if tokenizer is None:
        texts = [t for t, _ in splits["train"]]
        tokenizer = make_tokenizer(data.tokenizer, texts, data.vocab_size, data.special_tokens)
    index = {name: i for i, name in enumerate(labels)}

    def encode(name: str) -> ClassificationDataset | None:
        if name not in splits:
            return None
        texts = [t for t, _ in splits[name]]
        ids = encode_texts(tokenizer, texts, data.max_len, f"{data.task}/{name}")
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
    """The configured preset with the tokenizer's vocabulary; the label names go to `extra`.

    `max_len` (positions) defaults to `data.max_len` text tokens plus the leading `<bos>`."""
    overrides = dict(config.model.overrides) | tokenizer.specials.as_dict()
    overrides["vocab_size"] = tokenizer.vocab_size
    overrides.setdefault("max_len", config.data.max_len + 1)  # + the leading <bos>
    overrides["extra"] = {"task": config.data.task, **overrides.get("extra", {}), "labels": labels}
    return ModelConfig.preset(config.model.preset, **overrides)


def run_classify_training(
    config: RunConfig, run_dir: Path, *, resume: bool = False, overwrite: bool = False
) -> dict[str, Any]:
    """Train a classifier as configured into `run_dir`; returns (and writes) the results."""
    run_dir = Path(run_dir)
    if config.data.task not in CLASSIFY_TASKS:
        raise ConfigError(f"aiayn classify needs data.task brackets or tsv, got {config.data.task!r}")
    if config.train.validation_metric != "loss":
        raise ConfigError(
            "a classifier is selected by its validation loss: set train.validation_metric: loss"
        )
    for name in ("train_tsv", "valid_tsv"):  # stored resolved, so a resume finds them anywhere
        if getattr(config.data, name):
            setattr(config.data, name, str(resolve_data_file(getattr(config.data, name), "TSV file")))
    prepare_run_dir(run_dir, resume, overwrite)
    attach_log_file(run_dir)
    if config.train.threads:
        torch.set_num_threads(config.train.threads)
    torch.manual_seed(config.train.seed)
    tokenizer = reload_tokenizer(run_dir, config.data.special_tokens) if resume else None
    data = prepare_classify_data(config.data, tokenizer)

    def save_tokenizer(directory: Path) -> None:
        data.tokenizer.save(Path(directory) / JOINT_FILE)

    if not resume:
        save_tokenizer(run_dir)
    model = EncoderOnly(build_classifier_config(config, data.tokenizer, data.labels), len(data.labels))
    params = sum(p.numel() for p in model.parameters())
    log.info("model: %s preset, %s parameters", config.model.preset, f"{params:,}")

    def evaluate(current: EncoderOnly) -> dict[str, float]:
        return {"accuracy": accuracy(current, data.valid, config.train.batch_tokens)} if data.valid else {}

    trainer = Trainer(
        config,
        model,
        data.train,
        data.valid,
        run_dir,
        loss_fn=classification_loss,
        evaluate=evaluate,
        save_extra=save_tokenizer,
        command="aiayn classify train",
    )
    state = trainer.fit(resume=resume)
    best = EncoderOnly.from_pretrained(run_dir, device=trainer.device)
    results: dict[str, Any] = {
        "steps": state.step,
        "epochs": state.epoch,
        "train_minutes": state.elapsed_s / 60,
        "examples_per_s": state.target_tokens / max(state.elapsed_s, 1e-9),
        "best_step": state.best_step,
        "params": params,
        "labels": data.labels,
        "valid_accuracy": accuracy(best, data.valid) if data.valid else None,
        "test_accuracy": accuracy(best, data.test) if data.test else None,
    }
    atomic_write_text(run_dir / RESULTS_FILE, json.dumps(results, indent=2) + "\n")
    return results
