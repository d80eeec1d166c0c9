"""Settings left at `auto`, chosen from the training speed measured at start-up.

Under a time budget, how many epochs and how many updates a run reaches depends on the
machine, so a recipe with one dropout and one batch size is right for one speed only. Two
settings may be `auto`:

- `model.dropout`: how much regularisation a model needs depends on how often it sees the
  training set. A run that reaches few epochs under-fits with strong dropout, one that reaches
  many over-fits with weak dropout. `DROPOUT_RULE` gives the dropout for the expected epochs.
- `train.batch_tokens`: a slow run is short of updates. On a CPU a smaller batch trains about
  as many tokens per second, so halving the batch doubles the updates in the same time.
  `batch_tokens_for_steps` takes the largest of `BATCH_TOKENS_CHOICES` that still reaches
  `ENOUGH_STEPS` updates within the budget, else the one that reaches the most.

With either at `auto`, the run times its own training step at start-up (as `train.precision:
auto` times it, `aiayn.training.precision`; with the largest batch of the choices), estimates
the epochs and updates it will reach within its budgets (`expected_epochs`), chooses, and logs
both the estimate and the choice ("expected 12 epochs: dropout 0.2"). A number in the YAML or
by `--set` is used as given. The chosen numbers are written to the run's `train_config.yaml`,
so a resumed run keeps them.

The rules are provisional, derived from the Multi30k runs (the `small` model) in
benchmarks/RESULTS.md ("The recipe by shares of the run, and dropout by expected epochs";
"Runs at two slow speeds"): dropout 0.2 began to over-fit after about 17 epochs, 0.3 still
improved at about 36; at one fp32 thread (~1,700 tokens/s, ~2,300 updates of 3000 tokens in 60
minutes) 1500-token batches gave 4,773 updates and +1.1 BLEU, while the fast machine's ~6,400
updates of 3000 tokens reached 40.5.
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

BATCH_TOKENS_CHOICES: tuple[int, ...] = (3000, 1500)
"""What `train.batch_tokens: auto` chooses from, largest first. Provisional (see above)."""

ENOUGH_STEPS = 4000
"""Updates within the budget that a larger batch must still give to be chosen over a smaller one
(Multi30k: the fast machine's ~6,400 updates of 3000 tokens and one fp32 thread's ~2,300 lie on
either side)."""


def dropout_for_epochs(epochs: float) -> float:
    """The dropout `DROPOUT_RULE` gives a run expected to reach `epochs` epochs."""
    return next(dropout for below, dropout in DROPOUT_RULE if epochs < below)


def batch_tokens_for_steps(steps_by_batch: dict[int, float]) -> int:
    """The batch (padded tokens) to train with, given the updates each candidate batch is expected
    to reach: the largest that reaches `ENOUGH_STEPS`, else the one that reaches the most (the
    largest of those, when a step budget makes them equal)."""
    enough = [batch for batch, steps in steps_by_batch.items() if steps >= ENOUGH_STEPS]
    if enough:
        return max(enough)
    most = max(steps_by_batch.values())
    return max(batch for batch, steps in steps_by_batch.items() if steps >= most * (1 - 1e-9))


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
            "model.dropout and train.batch_tokens 'auto' need a budget to estimate the epochs from: "
            "set train.max_minutes, train.max_steps or train.max_epochs"
        )
    return min(limits)


class AutoChoice(NamedTuple):
    """What `choose_auto_settings` measured and chose."""

    dropout: float | None  # None: not `auto`
    batch_tokens: int
    epochs: float  # expected within the run's budgets, with `batch_tokens`
    steps: dict[int, float]  # updates expected with each candidate batch (the one batch if not auto)
    tokens_per_s: float  # target tokens per second, all processes, in `precision`
    precision: str  # the faster precision when `train.precision` is auto (as its timing would pick)


def take_auto_settings(config: RunConfig) -> tuple[str, ...]:
    """The settings `config` leaves at 'auto' ('model.dropout', 'train.batch_tokens'); a
    placeholder number stands in for each (the model's layout and memory checks need one) until
    `choose_auto_settings` replaces it."""
    auto = []
    if config.model.overrides.get("dropout") == AUTO:
        config.model.overrides["dropout"] = DROPOUT_RULE[-1][1]  # a dropout costs the same time at any rate
        auto.append("model.dropout")
    if config.train.batch_tokens == AUTO:
        config.train.batch_tokens = BATCH_TOKENS_CHOICES[0]  # the batch the speed is timed with
        auto.append("train.batch_tokens")
    return tuple(auto)


def choose_auto_settings(
    config: RunConfig,
    auto: tuple[str, ...],
    build_model: Callable[[], nn.Module],
    train_data: Any,
    loss_fn: Callable[..., tuple[torch.Tensor, int]],
    device: torch.device,
    dist: DistContext,
) -> AutoChoice:
    """Set the settings named in `auto` (from `take_auto_settings`) in `config` to the rules'
    choices for this machine (rank 0's, on every rank) and return them with what they were chosen
    from.

    `build_model()` makes the task's model (with `config` as it stands); it is timed on a few
    training batches of `train.batch_tokens` (the largest choice when that is auto), in the
    precision the run will use: with `train.precision: auto`, in fp32 and bf16 as
    `aiayn.training.precision` times them, and the faster one (`precision` of the result, which
    the run can keep instead of timing again). A smaller batch is assumed to train as many target
    tokens per second.
    """
    train = config.train
    model = build_model().to(device)
    batches = probe_batches(train_data, train.batch_tokens, train.seed)
    if not batches:
        raise TrainingError(f"{' and '.join(auto)} auto: no training batches to time the model on")
    if train.precision != "auto":
        precisions = [train.precision]
    else:
        precisions = ["fp32", "bf16"] if bf16_worth_measuring(device) else ["fp32"]
    totals = measure_training_steps(model, batches, loss_fn, train.label_smoothing, device, precisions)
    precision = pick_fastest(totals) if train.precision == "auto" else train.precision
    rates = {p: dist.world_size * tokens / max(seconds, 1e-12) for p, (seconds, tokens) in totals.items()}
    tokens_per_s = rates[precision]
    batches_per_step = train.accumulate * dist.world_size
    candidates = BATCH_TOKENS_CHOICES if "train.batch_tokens" in auto else (train.batch_tokens,)
    epochs_by_batch, steps_by_batch = {}, {}
    for batch_tokens in candidates:
        probe = batches if batch_tokens == train.batch_tokens else probe_batches(
            train_data, batch_tokens, train.seed
        )
        per_epoch = train_data.num_batches(batch_tokens, seed=train.seed, epoch=0)
        epochs_by_batch[batch_tokens] = expected_epochs(
            tokens_per_s,
            sum(int(batch.num_targets) for batch in probe) / max(len(probe), 1),
            per_epoch,
            budget_s=60 * train.max_minutes if train.max_minutes is not None else None,
            max_steps=train.max_steps,
            max_epochs=train.max_epochs,
            batches_per_step=batches_per_step,
        )
        steps_by_batch[batch_tokens] = epochs_by_batch[batch_tokens] * per_epoch / batches_per_step
    batch_tokens = batch_tokens_for_steps(steps_by_batch)
    epochs = epochs_by_batch[batch_tokens]
    dropout = dropout_for_epochs(epochs) if "model.dropout" in auto else None
    choice = AutoChoice(dropout, batch_tokens, epochs, steps_by_batch, tokens_per_s, precision)
    choice = broadcast_object(choice, dist)  # rank 0's, on every rank
    train.batch_tokens = choice.batch_tokens
    measured = ", ".join(f"{p} {rate:,.0f}" for p, rate in rates.items())
    log.info("training steps timed at %s target tokens/s, using %s", measured, choice.precision)
    if "train.batch_tokens" in auto:
        expected = ", ".join(f"{steps:,.0f} with {batch}" for batch, steps in choice.steps.items())
        log.info("train.batch_tokens auto: expected updates %s-token batches: batch_tokens %d",
                 expected, choice.batch_tokens)
    if choice.dropout is not None:
        config.model.overrides["dropout"] = choice.dropout
        log.info("model.dropout auto: expected %.0f epochs: dropout %g", choice.epochs, choice.dropout)
    return choice
