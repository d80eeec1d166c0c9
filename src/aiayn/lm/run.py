"""`aiayn lm train`: the language-model task of the run skeleton (see `aiayn.training.run`).

A text file -> tokenizer -> windows -> `DecoderOnlyLM` -> next-token loss. The run directory is
the same as for translation (see `aiayn.training.checkpoint`): the best model so far at its
root (`config.json`, `model.safetensors`, `tokenizer.json`: a model directory that
`aiayn lm generate --model` reads), `train_config.yaml`, `metrics.jsonl`, `checkpoints/`, and
`results.json` at the end (with the validation loss and a sample from the best model).

The validation loss is the mean next-token negative log-likelihood (nats per token) over the
whole held-out tail of the text, in non-overlapping windows of `block_size`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aiayn.core.errors import ConfigError
from aiayn.data.pair_store import Progress
from aiayn.data.paths import resolve_data_file
from aiayn.data.sources import digest
from aiayn.data.token_store import TokenStore, cache_dir_for
from aiayn.data.tokenizer import Tokenizer
from aiayn.data.tokenizer_spec import is_trained_kind
from aiayn.inference.torch_generator import TorchGenerator
from aiayn.lm.dataset import LMBatch, TokenWindows
from aiayn.lm.settings import LMSettings
from aiayn.lm.text_store import prepare_lm_store
from aiayn.model import DecoderOnlyLM, ModelConfig
from aiayn.training.config import RunConfig
from aiayn.training.loss import label_smoothed_nll
from aiayn.training.state import TrainState
from aiayn.training.task import OneTokenizerTask, preset_config

log = logging.getLogger(__name__)

LM_TOKENIZERS = ("char", "byte_bpe")
SAMPLE_TOKENS = 300  # length of the sample written to results.json


@dataclass
class LMData:
    """The tokenizer, the training windows and the held-out windows (None without a tail)."""

    tokenizer: Tokenizer
    train: TokenWindows
    valid: TokenWindows | None
    text_path: Path
    store: TokenStore | None = None


def check_lm_config(data: LMSettings) -> None:
    """Raise `ConfigError` unless `data` describes a language-model run."""
    if data.task != "text":
        raise ConfigError(f"aiayn lm needs data.task: text, got {data.task!r}")
    if not data.text_file:
        raise ConfigError("aiayn lm needs a text file: data.text_file in the config, or --text FILE")
    if is_trained_kind(data.tokenizer) and data.tokenizer not in LM_TOKENIZERS:
        raise ConfigError(
            f"data.tokenizer for a language model must be one of {', '.join(LM_TOKENIZERS)}, "
            f"a tokenizer.json or a Hub name; got {data.tokenizer!r}"
        )


def prepare_lm_data(
    data: LMSettings,
    tokenizer: Tokenizer | None = None,
    *,
    cache_dir: Path | None = None,
    create: bool = True,
    on_progress: Progress | None = None,
) -> LMData:
    """The text's token store (found or prepared in `cache_dir`, default
    `cache_dir_for(data.cache_dir)`; see `aiayn.lm.text_store`) with its tokenizer (trained on
    the head or loaded, unless given), and windows cut from its memory-mapped streams.
    `on_progress(characters done, characters)` while a store is made."""
    check_lm_config(data)
    path = resolve_data_file(data.text_file, "text file")
    cache = Path(cache_dir) if cache_dir is not None else cache_dir_for(data.cache_dir)
    store, tokenizer = prepare_lm_store(data, tokenizer, cache, create, on_progress)
    pad_id = tokenizer.specials.pad_id
    train = TokenWindows(store.streams["train"], data.block_size, data.stride, pad_id=pad_id)
    tail = store.streams["valid"]
    valid = TokenWindows(tail, data.block_size, pad_id=pad_id) if len(tail) > 1 else None
    log.info(
        "data: %s training tokens in %s windows (block %d, stride %d), %s held-out tokens; vocabulary %d",
        f"{len(train.stream) - 1:,}",
        f"{len(train):,}",
        data.block_size,
        train.stride,
        f"{len(valid.stream) - 1:,}" if valid else 0,
        tokenizer.vocab_size,
    )
    return LMData(tokenizer, train, valid, path, store)


def build_lm_model_config(config: RunConfig, tokenizer: Tokenizer) -> ModelConfig:
    """The configured preset with the tokenizer's vocabulary and special ids (tied embeddings,
    Sec. 3.4).

    `max_len` (the positional table) defaults to `block_size`; `extra` records the task and
    the block size, which generation uses as its context length.
    """
    block_size = config.data.block_size
    return preset_config(
        config,
        fixed={"vocab_size": tokenizer.vocab_size, **tokenizer.specials.as_dict()},
        defaults={"max_len": block_size, "extra": {"task": "text", "block_size": block_size}},
    )


class LMTask(OneTokenizerTask[LMData]):
    """A text file -> `DecoderOnlyLM`; validated (and selected) by its loss."""

    command = "aiayn lm train"
    data_settings = LMSettings
    uses_store = True
    model_type = DecoderOnlyLM.model_type

    def check_config(self, config: RunConfig) -> None:
        """`check_lm_config`, and the text file stored by its resolved path (so that a resume
        finds it from any directory)."""
        check_lm_config(config.data)
        config.data.text_file = str(resolve_data_file(config.data.text_file, "text file"))

    def prepare_data(
        self,
        data: LMSettings,
        tokenizer: Tokenizer | None,
        *,
        cache_dir: Path | None = None,
        create: bool = True,
    ) -> LMData:
        return prepare_lm_data(data, tokenizer, cache_dir=cache_dir, create=create)

    def tokenizer(self, data: LMData) -> Tokenizer:
        return data.tokenizer

    def tokenizer_digest(self, data: LMData) -> str:
        return digest(data.tokenizer.hf.to_str())

    def build_model(self, config: RunConfig, data: LMData) -> DecoderOnlyLM:
        """A fresh decoder-only model for the tokenizer's vocabulary."""
        return DecoderOnlyLM(build_lm_model_config(config, data.tokenizer))

    def loss(self, model: nn.Module, batch: LMBatch, smoothing: float) -> tuple[torch.Tensor, int]:
        """Summed (label-smoothed) next-token loss of a batch of windows; pad labels are ignored."""
        logits = model(batch.inputs)  # (B, T, V)
        return label_smoothed_nll(logits, batch.labels, smoothing, batch.pad_id), batch.num_targets

    def final_results(
        self, best: nn.Module, config: RunConfig, data: LMData, state: TrainState
    ) -> dict[str, Any]:
        """The validation loss of the best model, and a sample from it."""
        generator = TorchGenerator(best, data.tokenizer)
        sample = generator.generate("", SAMPLE_TOKENS, temperature=1.0, seed=config.train.seed)
        return {
            "val_loss": state.best_metric if config.train.validation_metric == "loss" else None,
            "vocab_size": data.tokenizer.vocab_size,
            "sample": sample,
        }


LM_TASK = LMTask()
