"""`model.dropout: auto`: dropout chosen from the number of epochs the run is expected to reach.

How much regularisation a model needs depends on how often it sees the training set: a run
that reaches a few epochs under-fits with strong dropout, one that reaches many over-fits with
weak dropout. Under a time budget the number of epochs depends on the machine, so a recipe
with one dropout is right for one speed only. With `model.dropout: auto`, the run measures
its training speed at start-up (the model's own training step, timed as `train.precision:
auto` times it, `aiayn.training.precision`), estimates the epochs it will reach within its
budgets (`expected_epochs`), and takes the dropout `DROPOUT_RULE` gives for that many epochs,
logging both ("expected 12 epochs: dropout 0.2"). A number in the YAML or by `--set` is used
as given. The chosen number is written to the run's `train_config.yaml`, so a resumed run
keeps it.

The rule is provisional, derived from the Multi30k runs in benchmarks/RESULTS.md ("The recipe
by shares of the run, and dropout by expected epochs"): dropout 0.2 began to over-fit after
about 17 epochs, 0.3 still improved at about 36. It fills only `model.dropout`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn

from aiayn.errors import ConfigError, TrainingError
from aiayn.training.config import RunConfig
from aiayn.training.device import bf16_worth_measuring
from aiayn.training.distributed import DistContext, broadcast_object
from aiayn.training.precision import measure_training_steps, pick_fastest, probe_batches

log = logging.getLogger(__name__)

AUTO = "auto"

DROPOUT_RULE: tuple[tuple[float, float], ...] = ((20.0, 0.2), (math.inf, 0.3))
"""(fewer expected epochs than, dropout): the first row that applies. Provisional (see above)."""


def dropout_for_epochs(epochs: float) -> float:
    """The dropout `DROPOUT_RULE` gives a run expected to reach `epochs` epochs."""
    return next(dropout for below, dropout in DROPOUT_RULE if epochs < below)


def expected_epochs(
    tokens_per_s: float,
    tokens_per_batch: float,
    batches_per_epoch: int,
    *,
    budget_s: float | None,
    max_steps: int | None,
    max_epochs: int | None,
    batches_per_step: int = 1,
) -> float:
    """Epochs a run reaches within the first of its budgets to run out, at `tokens_per_s`
    (target tokens per second, all processes) and `tokens_per_batch` (target tokens of a batch)."""
    limits = []
    if budget_s is not None:
        limits.append(tokens_per_s * budget_s / max(tokens_per_batch * batches_per_epoch, 1e-9))
    if max_steps is not None:
        limits.append(max_steps * batches_per_step / max(batches_per_epoch, 1))
    if max_epochs is not None:
        limits.append(float(max_epochs))
    if not limits:
        raise ConfigError(
            "model.dropout: auto needs a budget to estimate the epochs from: set train.max_minutes, "
            "train.max_steps or train.max_epochs"
        )
    return min(limits)


class DropoutChoice(NamedTuple):
    """What `choose_dropout` measured and chose."""

    dropout: float
    epochs: float  # expected within the run's budgets
    tokens_per_s: float  # target tokens per second, all processes, in `precision`
    precision: str  # the faster precision when `train.precision` is auto (as its timing would pick)


def take_auto_dropout(config: RunConfig) -> bool:
    """Whether `config` says `model.dropout: auto`; if so, a placeholder number stands in for
    it (the model's layout and memory checks need one) until `choose_dropout` replaces it."""
    overrides = config.model.overrides
    if overrides.get("dropout") != AUTO:
        return False
    overrides["dropout"] = DROPOUT_RULE[-1][1]  # a dropout costs the same time at any rate
    return True


def choose_dropout(
    config: RunConfig,
    build_model: Callable[[], nn.Module],
    train_data: Any,
    loss_fn: Callable[..., tuple[torch.Tensor, int]],
    device: torch.device,
    dist: DistContext,
) -> DropoutChoice:
    """Set `model.dropout` in `config` to the rule's choice for this machine (rank 0's, on every
    rank) and return it with what it was chosen from.

    `build_model()` makes the task's model (with `config` as it stands); it is timed on a few
    training batches, in the precision the run will use: with `train.precision: auto`, in fp32
    and bf16 as `aiayn.training.precision` times them, and the faster one (`precision` of the
    result, which the run can keep instead of timing again).
    """
    train = config.train
    model = build_model().to(device)
    batches = probe_batches(train_data, train.batch_tokens, train.seed)
    if not batches:
        raise TrainingError("model.dropout: auto: no training batches to time the model on")
    if train.precision != "auto":
        precisions = [train.precision]
    else:
        precisions = ["fp32", "bf16"] if bf16_worth_measuring(device) else ["fp32"]
    totals = measure_training_steps(model, batches, loss_fn, train.label_smoothing, device, precisions)
    precision = pick_fastest(totals) if train.precision == "auto" else train.precision
    rates = {p: dist.world_size * tokens / max(seconds, 1e-12) for p, (seconds, tokens) in totals.items()}
    tokens_per_s = rates[precision]
    batches_per_epoch = train_data.num_batches(train.batch_tokens, seed=train.seed, epoch=0)
    epochs = expected_epochs(
        tokens_per_s,
        sum(int(batch.num_targets) for batch in batches) / max(len(batches), 1),
        batches_per_epoch,
        budget_s=60 * train.max_minutes if train.max_minutes is not None else None,
        max_steps=train.max_steps,
        max_epochs=train.max_epochs,
        batches_per_step=train.accumulate * dist.world_size,
    )
    choice = DropoutChoice(dropout_for_epochs(epochs), epochs, tokens_per_s, precision)
    choice = broadcast_object(choice, dist)  # rank 0's, on every rank
    config.model.overrides["dropout"] = choice.dropout
    measured = ", ".join(f"{p} {rate:,.0f}" for p, rate in rates.items())
    log.info(
        "model.dropout auto: training steps timed at %s target tokens/s, using %s; expected %.0f "
        "epochs: dropout %g",
        measured, choice.precision, choice.epochs, choice.dropout,
    )
    return choice
