"""Settings left at `auto`, chosen from the corpus and the training speed measured at start-up.

Under a time budget, how many epochs and how many updates a run reaches depends on the corpus
and the machine, so a recipe with one model size, one vocabulary, one dropout and one batch is
right for one corpus at one speed only. These settings may be `auto`:

- `data.vocab_size`: by the training pairs, counted before the tokenizer is trained
  (`choose_vocab_size`, called by the data preparation);
- `model.preset`: by the corpus pairs and the target tokens the `small` model would see;
- `train.batch_tokens`: a slow run is short of updates; on a CPU a smaller batch trains about as
  many tokens per second, so halving it doubles the updates in the same time; on a CUDA GPU the
  choices go up to 64k tokens, those whose training step fits in memory with headroom (one step
  measured: `gpu_batch_candidates`), and the same rule picks the largest that gives enough
  updates (the learning rate follows the schedule's rule for the steps, warmup the updates);
- `model.dropout`: by the epochs the run will reach (few: under-fits with strong dropout; many:
  over-fits with weak);
- `train.warmup`, `train.eval_every`: by the updates the run will reach;
- `train.bleu_max_sentences`: by the validation set, its length and the time a validation may take.

The rules and their evidence are in `aiayn.training.auto_rules`; this module measures and
applies. With any of the last six at `auto`, the run measures its corpus after the tokenizer
(pairs, tokens per side, length profile: `profile_corpus`), times its own training step (as
`train.precision: auto` times it, `aiayn.training.precision`; with the largest batch of the
choices, and again with the chosen preset when that is not the one timed), and logs every
choice with its reason ("model.dropout auto: expected 12 epochs: dropout 0.2"). A number in
the YAML or by `--set` is used as given. The chosen numbers are written to the run's
`train_config.yaml`, so a resumed run keeps them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from aiayn.core.errors import ConfigError, TrainingError
from aiayn.training.auto_rules import (  # noqa: F401  (the rules, re-exported for callers of this module)
    AUTO,
    AUTO_ORDER,
    BATCH_TOKENS_CHOICES,
    DROPOUT_RULE,
    ENOUGH_STEPS,
    GPU_BATCH_TOKENS_CHOICES,
    MEMORY_HEADROOM,
    TIMED_PRESET,
    Choice,
    CorpusProfile,
    Run,
    batch_tokens_for_steps,
    batches_that_fit,
    dropout_for_epochs,
    expected_epochs,
    plan_auto,
    vocab_size_for_pairs,
)
from aiayn.training.config import RunConfig
from aiayn.training.data_settings import DataSettings
from aiayn.training.device import bf16_worth_measuring
from aiayn.training.distributed import DistContext, broadcast_object
from aiayn.training.memory import MemoryFit, cuda_memory_probe
from aiayn.training.precision import (
    measure_training_steps,
    pick_fastest,
    precision_candidates,
    probe_batches,
    timed_probe_batches,
)

log = logging.getLogger(__name__)

CORPUS_SETTINGS = ("data.vocab_size", "model.preset", "train.bleu_max_sentences")
"""`auto` settings that need a translation corpus to measure (`aiayn train`)."""


class AutoChoice(NamedTuple):
    """What `choose_auto_settings` measured and chose."""

    dropout: float | None  # None: not `auto`
    batch_tokens: int
    epochs: float  # expected within the run's budgets, with `batch_tokens`
    steps: dict[int, float]  # updates expected with each candidate batch (the one batch if not auto)
    tokens_per_s: float  # target tokens per second, all processes, in `precision`, of the chosen preset
    precision: str  # the faster precision when `train.precision` is auto (as its timing would pick)
    choices: tuple[Choice, ...] = ()  # every setting chosen, with its reason


def auto_names(config: RunConfig) -> list[str]:
    """The settings `config` leaves at 'auto', as `section.key`."""
    train = config.train
    values = {
        "data.vocab_size": config.data.vocab_size,
        "model.preset": config.model.preset,
        "model.dropout": config.model.overrides.get("dropout"),
        "train.batch_tokens": train.batch_tokens,
        "train.warmup": train.warmup,
        "train.eval_every": train.eval_every,
        "train.bleu_max_sentences": train.bleu_max_sentences,
    }
    return [name for name, value in values.items() if value == AUTO]


def check_auto_supported(config: RunConfig, measures_corpus: bool) -> None:
    """Refuse, before any work, an `auto` the task cannot choose: the corpus settings outside a
    translation task, `model.preset` with `train.init_from` (the source fixes the model)."""
    names = auto_names(config)
    unsupported = [name for name in names if name in CORPUS_SETTINGS and not measures_corpus]
    if unsupported:
        raise ConfigError(f"{unsupported[0]} 'auto' is for translation (aiayn train); give a number")
    if "model.preset" in names and config.train.init_from:
        raise ConfigError("model.preset 'auto' with train.init_from: the source model fixes the size")


def choose_vocab_size(config: DataSettings, pairs: int) -> Choice:
    """Set `config.vocab_size` from 'auto' to the rule's size for `pairs` training pairs, and log it."""
    choice = Choice("data.vocab_size", vocab_size_for_pairs(pairs), f"{pairs:,} training pairs")
    log.info(choice.describe())
    config.vocab_size = choice.value
    return choice


def profile_corpus(src_lengths: Sequence[int] | np.ndarray, tgt_lengths: Sequence[int] | np.ndarray,
                   valid_pairs: int) -> CorpusProfile:
    """The corpus as the rules read it, from the token lengths of each training pair's sides."""
    src, tgt = np.asarray(src_lengths), np.asarray(tgt_lengths)
    if not len(tgt):
        raise TrainingError("settings at 'auto': the training corpus has no pairs to measure")
    return CorpusProfile(len(tgt), int(src.sum()), int(tgt.sum()), float(np.percentile(src, 95)),
                         float(np.percentile(tgt, 95)), valid_pairs)


def take_auto_settings(config: RunConfig) -> tuple[str, ...]:
    """The settings `config` leaves at 'auto' (of `AUTO_ORDER`); a placeholder number stands in
    for each (the model's layout and memory checks need one) until `choose_auto_settings`
    replaces it."""
    names = auto_names(config)
    if "model.preset" in names:
        config.model.preset = TIMED_PRESET
    if "model.dropout" in names:
        config.model.overrides["dropout"] = DROPOUT_RULE[-1][1]  # a dropout costs the same time at any rate
    if "train.batch_tokens" in names:
        config.train.batch_tokens = BATCH_TOKENS_CHOICES[0]  # the batch the speed is timed with
    for name, placeholder in (("warmup", 1), ("eval_every", 1), ("bleu_max_sentences", 0)):
        if f"train.{name}" in names:
            setattr(config.train, name, placeholder)
    return tuple(name for name in AUTO_ORDER if name in names)


class _Timings:
    """The training speed of each preset timed so far (`config.model.preset` is set to it while
    `build_model()` makes the model)."""

    def __init__(self, config: RunConfig, build_model: Callable[[], nn.Module], batches: list[Any],
                 loss_fn: Callable[..., tuple[torch.Tensor, int]], device: torch.device, dist: DistContext,
                 overhead_s: float = 0.0):
        self.config, self.build_model, self.batches = config, build_model, batches
        self.loss_fn, self.device, self.dist = loss_fn, device, dist
        self.overhead_s = overhead_s  # the loop's seconds per batch besides the step (drawing it)
        self.rates: dict[str, dict[str, float]] = {}
        self.precision: dict[str, str] = {}

    def __call__(self, preset: str) -> float:
        if preset not in self.rates:
            self._time(preset)
        return self.rates[preset][self.precision[preset]]

    def _time(self, preset: str) -> None:
        train, given = self.config.train, self.config.model.preset
        self.config.model.preset = preset
        try:
            model = self.build_model().to(self.device)
        finally:
            self.config.model.preset = given
        if train.precision != "auto":
            precisions = [train.precision]
        else:
            precisions = precision_candidates(self.device, bf16_worth_measuring(self.device))
        totals = measure_training_steps(model, self.batches, self.loss_fn, train.label_smoothing, self.device,
                                        precisions, overhead_s=self.overhead_s)
        del model
        self.precision[preset] = pick_fastest(totals) if train.precision == "auto" else train.precision
        self.rates[preset] = {
            p: self.dist.world_size * tokens / max(seconds, 1e-12) for p, (seconds, tokens) in totals.items()
        }
        measured = ", ".join(f"{p} {rate:,.0f}" for p, rate in self.rates[preset].items())
        log.info("training steps timed at %s target tokens/s, using %s%s", measured, self.precision[preset],
                 f" ({preset} preset)" if preset != given else "")


def choose_auto_settings(
    config: RunConfig,
    auto: tuple[str, ...],
    build_model: Callable[[], nn.Module],
    train_data: Any,
    loss_fn: Callable[..., tuple[torch.Tensor, int]],
    device: torch.device,
    dist: DistContext,
    profile: CorpusProfile | None = None,
    memory_probe: MemoryProbe | None = None,
) -> AutoChoice:
    """Set the settings named in `auto` (from `take_auto_settings`) in `config` to the rules'
    choices for this corpus (`profile`, from `profile_corpus`) and machine (rank 0's, on every
    rank), log each with its reason, and return them with what they were chosen from.

    `build_model()` makes the task's model (with `config` as it stands); it is timed on a few
    training batches of `train.batch_tokens` (the largest choice when that is auto), in the
    precision the run will use: with `train.precision: auto`, in fp32 and bf16 as
    `aiayn.training.precision` times them, and the faster one (`precision` of the result, which
    the run can keep instead of timing again). A smaller batch is assumed to train as many target
    tokens per second.
    """
    train = config.train
    candidates = BATCH_TOKENS_CHOICES
    if memory_probe is None and device.type == "cuda":
        memory_probe = cuda_memory_probe
    if "train.batch_tokens" in auto and memory_probe is not None:
        candidates = gpu_batch_candidates(config, build_model, train_data, loss_fn, device, memory_probe)
        train.batch_tokens = candidates[0]  # the batch the speed is timed with
    batches, draw_s = timed_probe_batches(train_data, train.batch_tokens, train.seed)
    if not batches:
        raise TrainingError(f"{' and '.join(auto)} auto: no training batches to time the model on")
    timings = _Timings(config, build_model, batches, loss_fn, device, dist, draw_s)
    probes: dict[int, float] = {}

    def target_per_batch(batch_tokens: int) -> float:
        if batch_tokens not in probes:
            probe = batches if batch_tokens == train.batch_tokens else probe_batches(
                train_data, batch_tokens, train.seed)
            probes[batch_tokens] = sum(int(batch.num_targets) for batch in probe) / max(len(probe), 1)
        return probes[batch_tokens]

    run = Run(
        budget_s=60 * train.max_minutes if train.max_minutes is not None else None,
        max_steps=train.max_steps, max_epochs=train.max_epochs,
        batches_per_step=train.accumulate * dist.world_size, preset=config.model.preset,
        batch_tokens=train.batch_tokens, eval_every=train.eval_every, tokens_per_s=timings,
        target_per_batch=target_per_batch,
        batches_per_epoch=lambda batch_tokens: train_data.num_batches(batch_tokens, seed=train.seed, epoch=0),
        validation_share=validation_share(config, profile, auto), batch_candidates=candidates,
    )
    if profile is not None and dist.is_main:
        log.info("corpus: %s", profile.describe())
    plan = plan_auto(auto, profile, run)
    choice = AutoChoice(
        plan.value("model.dropout"), plan.batch_tokens, plan.epochs, plan.steps, timings(plan.preset),
        timings.precision[plan.preset], tuple(plan.choices),
    )
    choice = broadcast_object(choice, dist)  # rank 0's, on every rank
    for item in choice.choices:
        apply_choice(config, item)
        log.info(item.describe())
    return choice


MemoryProbe = Callable[..., MemoryFit]
"""`probe(build_model, batch, batch_tokens, loss_fn, label_smoothing, device) -> MemoryFit`
(`aiayn.training.memory.cuda_memory_probe`; tests pass a fake one)."""


def gpu_batch_candidates(
    config: RunConfig, build_model: Callable[[], nn.Module], train_data: Any,
    loss_fn: Callable[..., tuple[torch.Tensor, int]], device: torch.device, probe: MemoryProbe,
) -> tuple[int, ...]:
    """`GPU_BATCH_TOKENS_CHOICES` that fit in the device's memory with headroom, by one training
    step of a batch of the smallest choice (`probe`), logged."""
    train = config.train
    smallest = min(GPU_BATCH_TOKENS_CHOICES)
    batch = probe_batches(train_data, smallest, train.seed, count=1)
    if not batch:
        raise TrainingError("train.batch_tokens auto: no training batch to measure the memory with")
    fit = probe(build_model, batch[0], smallest, loss_fn, train.label_smoothing, device)
    fits = batches_that_fit(GPU_BATCH_TOKENS_CHOICES, fit.free_bytes, fit.fixed_bytes, fit.bytes_per_token)
    log.info("train.batch_tokens auto: batches of up to %s tokens fit in %.1f GB free (%.0f%% of it, "
             "%s bytes per token measured, %.1f GB for gradients and Adam's moments)", f"{fits[0]:,}",
             fit.free_bytes / 1e9, 100 * MEMORY_HEADROOM, f"{fit.bytes_per_token:,.0f}",
             fit.fixed_bytes / 1e9)
    return fits


def validation_share(config: RunConfig, profile: CorpusProfile | None, auto: tuple[str, ...] = ()) -> float:
    """The share of the training time the rules expect validations to take: the cap
    (`train.bleu_time_share`) where the run decodes for BLEU (a translation corpus, sentences to
    decode: a number other than 0, or 'auto' among `auto`), else 0 (a loss over the validation
    set costs little beside training)."""
    train = config.train
    sentences = "train.bleu_max_sentences" in auto or train.bleu_max_sentences != 0
    decodes = profile is not None and profile.valid_pairs > 0 and sentences
    return (train.bleu_time_share or 0.0) if decodes else 0.0


def expected_updates(choice: AutoChoice) -> float:
    """The updates `choice` expected the run to reach (with its batch, within the first budget)."""
    return choice.steps[choice.batch_tokens]


def apply_choice(config: RunConfig, choice: Choice) -> None:
    """Write one chosen setting into `config` (so `train_config.yaml` holds the number)."""
    section, key = choice.name.split(".")
    if choice.name == "model.preset":
        config.model.preset = choice.value
    elif section == "model":
        config.model.overrides[key] = choice.value
    else:
        setattr(getattr(config, section), key, choice.value)
