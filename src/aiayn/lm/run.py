"""`aiayn lm train`: a text file -> tokenizer -> windows -> `DecoderOnlyLM` -> `Trainer`.

The run directory is the same as for translation (see `aiayn.training.checkpoint`): the best
model so far at its root (`config.json`, `model.safetensors`, `tokenizer.json`: a model
directory that `aiayn lm generate --model` reads), `train_config.yaml`, `metrics.jsonl`,
`checkpoints/`, and `results.json` at the end.

The validation loss is the mean next-token negative log-likelihood (nats per token) over the
whole held-out tail of the text, in non-overlapping windows of `block_size`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aiayn.data.paths import resolve_data_file
from aiayn.data.tokenizer import JOINT_FILE, Tokenizer
from aiayn.data.tokenizer_spec import is_trained_kind, make_tokenizer, reload_tokenizer
from aiayn.errors import ConfigError
from aiayn.files import atomic_write_text
from aiayn.lm.dataset import LMBatch, TokenWindows, read_text, split_text, text_stream
from aiayn.lm.generate import generate
from aiayn.model import DecoderOnlyLM, ModelConfig
from aiayn.training.config import DataConfig, RunConfig
from aiayn.training.distributed import DistContext, broadcast_object
from aiayn.training.loss import label_smoothed_nll
from aiayn.training.run_dir import log_to_file, prepare_run_dir
from aiayn.training.trainer import Trainer

log = logging.getLogger(__name__)

RESULTS_FILE = "results.json"
LM_TOKENIZERS = ("char", "byte_bpe")
SAMPLE_TOKENS = 300  # length of the sample written to results.json


@dataclass
class LMData:
    """The tokenizer, the training windows and the held-out windows (None without a tail)."""

    tokenizer: Tokenizer
    train: TokenWindows
    valid: TokenWindows | None
    text_path: Path


def check_lm_config(data: DataConfig) -> None:
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
    if data.block_size < 1:
        raise ConfigError(f"data.block_size must be >= 1, got {data.block_size}")
    if data.stride is not None and not 1 <= data.stride <= data.block_size:
        raise ConfigError(
            f"data.stride must be between 1 and data.block_size ({data.block_size}), got {data.stride}"
        )
    if not 0.0 <= data.valid_fraction < 1.0:
        raise ConfigError(f"data.valid_fraction must be in [0, 1), got {data.valid_fraction!r}")


def prepare_lm_data(data: DataConfig, tokenizer: Tokenizer | None = None) -> LMData:
    """Read and split the text, train the tokenizer on the head or load it (unless given), cut
    windows."""
    check_lm_config(data)
    path = resolve_data_file(data.text_file, "text file")
    head, tail = split_text(read_text(path), data.valid_fraction)
    if tokenizer is None:
        if is_trained_kind(data.tokenizer):
            log.info("training a %s tokenizer on %s characters of %s", data.tokenizer, f"{len(head):,}", path)
        tokenizer = make_tokenizer(data.tokenizer, [head], data.vocab_size, data.special_tokens)
    pad_id = tokenizer.specials.pad_id
    train = TokenWindows(text_stream(tokenizer, head), data.block_size, data.stride, pad_id=pad_id)
    valid = TokenWindows(text_stream(tokenizer, tail), data.block_size, pad_id=pad_id) if tail else None
    log.info(
        "data: %s training tokens in %s windows (block %d, stride %d), %s held-out tokens; vocabulary %d",
        f"{train.stream.numel() - 1:,}",
        f"{len(train):,}",
        data.block_size,
        train.stride,
        f"{valid.stream.numel() - 1:,}" if valid else 0,
        tokenizer.vocab_size,
    )
    return LMData(tokenizer, train, valid, path)


def build_lm_model_config(config: RunConfig, tokenizer: Tokenizer) -> ModelConfig:
    """The configured preset with the tokenizer's vocabulary (tied embeddings, Sec. 3.4).

    `max_len` (the positional table) defaults to `block_size`; `extra` records the task and
    the block size, which generation uses as its context length.
    """
    overrides = dict(config.model.overrides) | tokenizer.specials.as_dict()
    overrides["vocab_size"] = tokenizer.vocab_size
    overrides.setdefault("max_len", config.data.block_size)
    overrides.setdefault("extra", {})
    overrides["extra"] = {"task": "text", "block_size": config.data.block_size, **overrides["extra"]}
    return ModelConfig.preset(config.model.preset, **overrides)


def lm_loss(model: nn.Module, batch: LMBatch, smoothing: float) -> tuple[torch.Tensor, int]:
    """Summed (label-smoothed) next-token loss of a batch of windows; pad labels are ignored."""
    logits = model(batch.inputs)  # (B, T, V)
    return label_smoothed_nll(logits, batch.labels, smoothing, batch.pad_id), batch.num_tgt_tokens


def run_lm_training(
    config: RunConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    dist: DistContext | None = None,
) -> dict[str, Any]:
    """Train a language model as configured into `run_dir`; returns (and writes) the results.

    Under torchrun pass the `DistContext` of `distributed_session`: rank 0 trains the tokenizer
    and sends it to the others, and alone writes the run directory.
    """
    dist = dist or DistContext()
    run_dir = Path(run_dir)
    check_lm_config(config.data)
    if config.train.validation_metric != "loss":
        raise ConfigError("a language model is validated by its loss: set train.validation_metric: loss")
    # Stored by its resolved path, so that a resume finds the text from any directory.
    config.data.text_file = str(resolve_data_file(config.data.text_file, "text file"))
    if dist.is_main:
        prepare_run_dir(run_dir, resume, overwrite)
    with log_to_file(run_dir, enabled=dist.is_main):
        return _train_lm(config, run_dir, resume, dist)


def _train_lm(config: RunConfig, run_dir: Path, resume: bool, dist: DistContext) -> dict[str, Any]:
    if config.train.threads:
        torch.set_num_threads(config.train.threads)
    torch.manual_seed(config.train.seed)
    if resume:
        data = prepare_lm_data(config.data, reload_tokenizer(run_dir, config.data.special_tokens))
    else:  # rank 0 trains the tokenizer; the other ranks receive it
        data = prepare_lm_data(config.data) if dist.is_main else None
        tokenizer = broadcast_object(data.tokenizer if data else None, dist)
        data = data or prepare_lm_data(config.data, tokenizer)

    def save_tokenizer(directory: Path) -> None:
        data.tokenizer.save(Path(directory) / JOINT_FILE)

    if not resume and dist.is_main:
        save_tokenizer(run_dir)
    model = DecoderOnlyLM(build_lm_model_config(config, data.tokenizer))
    params = sum(p.numel() for p in model.parameters())
    log.info("model: %s preset, %s parameters", config.model.preset, f"{params:,}")
    trainer = Trainer(
        config,
        model,
        data.train,
        data.valid,
        run_dir,
        loss_fn=lm_loss,
        save_extra=save_tokenizer,
        is_main=dist.is_main,
        dist=dist,
        command="aiayn lm train",
    )
    state = trainer.fit(resume=resume)
    results: dict[str, Any] = {
        "steps": state.step,
        "epochs": state.epoch,
        "train_minutes": state.elapsed_s / 60,
        "target_tokens": state.target_tokens,
        "tokens_per_s": state.target_tokens / max(state.elapsed_s, 1e-9),
        "val_loss": state.best_metric if config.train.validation_metric == "loss" else None,
        "best_step": state.best_step,
        "skipped_steps": state.skipped_steps,
        "params": params,
        "vocab_size": data.tokenizer.vocab_size,
    }
    if not dist.is_main:
        return results
    best = DecoderOnlyLM.from_pretrained(run_dir, device=trainer.device)
    sample_ids = generate(best, [], SAMPLE_TOKENS, temperature=1.0, seed=config.train.seed)
    results["sample"] = data.tokenizer.decode(sample_ids)
    atomic_write_text(run_dir / RESULTS_FILE, json.dumps(results, indent=2) + "\n")
    return results
