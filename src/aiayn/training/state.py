"""Where a training run stands, and when it stops.

`TrainState` is everything besides weights and optimizer that a checkpoint needs to continue
a run exactly (the training time is the `TrainClock`'s, `aiayn.training.clock`);
`out_of_budget` says whether one of the run's budgets (steps, minutes, early stopping) is spent.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiayn.training.config import TrainConfig


@dataclass
class TrainState:
    """Everything besides weights, optimizer and clock needed to continue a run exactly."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    target_tokens: int = 0
    best_metric: float | None = None
    best_step: int = 0
    evals_without_improvement: int = 0
    skipped_steps: int = 0
    world_size: int = 1  # processes the data position `batch_in_epoch` counts for
    precision: str = ""  # what `train.precision: auto` measured; a resumed run keeps it
    validation_s: float = 0.0  # seconds the validations have taken, all sessions (their time cap)


class StopRequested(Exception):
    """Raised inside the loop when SIGINT/SIGTERM arrived; a checkpoint has been written."""


def out_of_budget(cfg: TrainConfig, state: TrainState, elapsed_s: float) -> str | None:
    """Why training must stop now (`elapsed_s` of training so far), or None to go on."""
    if cfg.max_steps is not None and state.step >= cfg.max_steps:
        return f"reached train.max_steps={cfg.max_steps}"
    if cfg.max_minutes is not None and elapsed_s >= 60 * cfg.max_minutes:
        return f"reached train.max_minutes={cfg.max_minutes}"
    patience = cfg.early_stopping_patience
    if patience is not None and state.evals_without_improvement >= patience:
        return f"no improvement in {patience} validations (early stopping)"
    return None
