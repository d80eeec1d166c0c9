"""`aiayn train`: config -> data -> model -> `Trainer` -> final held-out evaluation."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch

from aiayn.data.tokenizer import TokenizerPair
from aiayn.evaluation.translation import evaluate_translation
from aiayn.files import atomic_write_text
from aiayn.model import ModelConfig, Transformer
from aiayn.model.pretrained import load_model
from aiayn.training.config import RunConfig
from aiayn.training.data_setup import PreparedData, prepare_data
from aiayn.training.distributed import DistContext, broadcast_object
from aiayn.training.run_dir import log_to_file, prepare_run_dir
from aiayn.training.trainer import Trainer
from aiayn.translator import Translator

log = logging.getLogger(__name__)

RESULTS_FILE = "results.json"


def build_model_config(config: RunConfig, tokenizers: TokenizerPair) -> ModelConfig:
    """The preset named in the config, with vocabulary sizes from the tokenizers."""
    overrides = dict(config.model.overrides)
    if tokenizers.is_joint:  # one vocabulary: shared embeddings and tied output (Sec. 3.4)
        overrides["vocab_size"] = tokenizers.source.vocab_size
    else:
        overrides |= {
            "src_vocab_size": tokenizers.source.vocab_size,
            "tgt_vocab_size": tokenizers.target.vocab_size,
        }
    overrides.setdefault("max_len", max(256, config.data.max_len + 2))
    overrides.setdefault("extra", {"task": config.data.task})
    return ModelConfig.preset(config.model.preset, **overrides)


def translation_metrics(
    model: Transformer,
    tokenizers: TokenizerPair,
    pairs: list[tuple[str, str]],
    beam: int,
    alpha: float = 0.6,
) -> dict[str, Any]:
    """Translate the sources of `pairs`; BLEU, chrF and exact match against the targets."""
    references = [t for _, t in pairs]
    evaluation = evaluate_translation(
        Translator(model, tokenizers), [s for s, _ in pairs], references, beam=beam, alpha=alpha
    )
    matches = sum(h == r for h, r in zip(evaluation.hypotheses, references, strict=True))
    return evaluation.to_dict() | {
        "signature": evaluation.bleu.signature,
        "exact_match": 100.0 * matches / max(len(pairs), 1),
        "hypotheses": evaluation.hypotheses,
    }


def prepare_shared_data(config: RunConfig, run_dir: Path, resume: bool, dist: DistContext) -> PreparedData:
    """`prepare_data` with the run directory's tokenizers (resume), or with tokenizers trained
    once, on rank 0, and sent to the other ranks (so every rank encodes the data alike)."""
    if resume:
        return prepare_data(config.data, TokenizerPair.load(run_dir))
    if not dist.enabled:
        return prepare_data(config.data)
    data = prepare_data(config.data) if dist.is_main else None
    tokenizers = broadcast_object(data.tokenizers if data else None, dist)
    return data or prepare_data(config.data, tokenizers)


def run_training(
    config: RunConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    is_main: bool = True,
    dist: DistContext | None = None,
) -> dict[str, Any]:
    """Train as configured into `run_dir`; then evaluate the best model on the test split.

    Under torchrun pass the `DistContext` of `aiayn.training.distributed.distributed_session`:
    rank 0 alone writes the run directory and runs the final evaluation.
    """
    run_dir = Path(run_dir)
    dist = dist or DistContext()
    is_main = is_main and dist.is_main
    if is_main:
        prepare_run_dir(run_dir, resume, overwrite)
    with log_to_file(run_dir, enabled=is_main):
        return _train_and_evaluate(config, run_dir, resume, is_main, dist)


def _train_and_evaluate(
    config: RunConfig, run_dir: Path, resume: bool, is_main: bool, dist: DistContext
) -> dict[str, Any]:
    if config.train.threads:
        torch.set_num_threads(config.train.threads)
    torch.manual_seed(config.train.seed)
    data = prepare_shared_data(config, run_dir, resume, dist)
    if is_main and not resume:
        data.tokenizers.save(run_dir)
    model = Transformer(build_model_config(config, data.tokenizers))
    log.info(
        "model: %s preset, %s parameters",
        config.model.preset,
        f"{sum(p.numel() for p in model.parameters()):,}",
    )

    valid_pairs = data.valid_pairs[: config.train.bleu_max_sentences]

    def evaluate(current: Transformer) -> dict[str, float]:
        if not valid_pairs:
            return {}
        metrics = translation_metrics(current, data.tokenizers, valid_pairs, beam=config.train.bleu_beam)
        return {"bleu": metrics["bleu"], "exact_match": metrics["exact_match"]}

    trainer = Trainer(
        config,
        model,
        data.train,
        data.valid,
        run_dir,
        evaluate=evaluate,
        save_extra=data.tokenizers.save,
        is_main=is_main,
        dist=dist,
    )
    state = trainer.fit(resume=resume)
    results: dict[str, Any] = {
        "steps": state.step,
        "epochs": state.epoch,
        "train_minutes": state.elapsed_s / 60,
        "target_tokens": state.target_tokens,
        "tokens_per_s": state.target_tokens / max(state.elapsed_s, 1e-9),
        "best_step": state.best_step,
        "skipped_steps": state.skipped_steps,
        "params": sum(p.numel() for p in model.parameters()),
        "precision": trainer.precision,
        "final_lr": trainer.optimizer.param_groups[0]["lr"],
    }
    if data.test_pairs and is_main:
        best = load_model(run_dir, device=trainer.device)
        metrics = translation_metrics(
            best,
            data.tokenizers,
            data.test_pairs[: config.train.test_max_sentences],
            beam=config.train.test_beam,
            alpha=config.train.test_alpha,
        )
        hypotheses = metrics.pop("hypotheses")
        results["test"] = metrics
        results["examples"] = [
            {"source": s, "reference": r, "output": h}
            for (s, r), h in zip(data.test_pairs[:8], hypotheses[:8], strict=False)
        ]
    if is_main:
        atomic_write_text(run_dir / RESULTS_FILE, json.dumps(results, indent=2) + "\n")
    return results
