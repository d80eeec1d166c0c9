"""Learning-rate schedules (Sec. 5.3).

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

"This corresponds to increasing the learning rate linearly for the first warmup_steps
training steps, and decreasing it thereafter proportionally to the inverse square root of
the step number. We used warmup_steps = 4000." `noam` is that schedule times `scale`;
`inverse_sqrt` (linear warmup to `lr`, then lr * sqrt(warmup / step)), `cosine` (linear
warmup, cosine decay to `min_lr` at `total_steps`) and `constant` are alternatives.

A time budget (`train.max_minutes`, with `train.schedule_follows_budget`, the default) moves the
decay along with the clock as well as with the steps: the schedule's progress is
max(step / max_steps, elapsed / budget), expressed as a `decay_step` (`budget_decay_step`), so
that on a machine too slow to reach `max_steps` in the budget the decay still ends, at the
schedule's final learning rate, when the budget does. Warmup counts optimizer steps (it is
there for Adam's moment estimates, which depend on updates, not seconds), unless it is given as
a share of the run (`train.warmup: 6%`, see `aiayn.training.progress`): then it ends when the
schedule's progress reaches that share, `decay_step` reaching share * max_steps, so it takes
the same share of the budget on a slow machine as on a fast one (fewer updates on the slow one).

What this does to reproducibility: the elapsed time comes from the clock, so the learning rate
depends on how fast the machine ran. Every checkpoint records the training time so far, and a
resumed run continues the schedule from that time; under torchrun rank 0's clock is broadcast
with its stop decision, so every rank uses the same rate. But an interrupted and resumed run,
or two runs of one config, are not bit-identical. The bit-exact guarantees (a resumed run equals
an uninterrupted one; torchrun equals one process on the union batch) hold for step-based
schedules: no `train.max_minutes`, or `train.schedule_follows_budget: false`. When the steps run
ahead of the clock (a fast machine), `decay_step` is `step` and the rates are the step-based ones.
"""

from __future__ import annotations

import math

from aiayn.core.settings import parse_share
from aiayn.training.config import TrainConfig


def noam_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The paper's schedule at 1-based `step`."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def budget_decay_step(step: int, elapsed_s: float, *, max_steps: int | None, budget_s: float | None) -> float:
    """The step the schedule's decay stands at: max(step, elapsed_s / budget_s * max_steps).

    That is progress = max(step / max_steps, elapsed / budget) in units of steps. Without a
    budget (`budget_s` None) or a step horizon (`max_steps` None) it is `step` itself.
    """
    if budget_s is None or max_steps is None or budget_s <= 0:
        return step
    return max(step, min(elapsed_s / budget_s, 1.0) * max_steps)


def learning_rate(
    step: int,
    schedule: str,
    *,
    d_model: int,
    warmup: float,
    scale: float = 1.0,
    lr: float = 1e-3,
    min_lr: float = 0.0,
    total_steps: int | None = None,
    decay_step: float | None = None,
    warmup_follows_decay: bool = False,
) -> float:
    """Learning rate for 1-based `step` under `schedule` ('noam', 'inverse_sqrt', 'cosine', 'constant').

    Warmup follows `step` (or `decay_step` when `warmup_follows_decay`: a warmup that is a share
    of the run); the decay follows `decay_step` (default `step`; further on when a time budget
    runs ahead of the steps, see `budget_decay_step`). Each schedule is the smaller of its
    warmup and its decay, so a decay that starts during warmup takes over without a jump.
    """
    step = max(step, 1)
    decay = step if decay_step is None else max(decay_step, step)
    ramp = decay if warmup_follows_decay else step
    if schedule == "noam":
        if decay == step:
            return noam_lr(step, d_model, warmup, scale)
        return scale * d_model**-0.5 * min(decay**-0.5, ramp * warmup**-1.5)
    warm = min(1.0, ramp / warmup) if warmup > 0 else 1.0
    if schedule == "constant":
        return lr * warm
    if schedule == "inverse_sqrt":
        if decay <= warmup:
            return lr * warm
        return lr * min(warm, math.sqrt(warmup / decay))
    if schedule == "cosine":
        if total_steps is None:
            raise ValueError("the cosine schedule needs train.max_steps")
        if decay <= warmup:
            return lr * warm
        progress = min(1.0, (decay - warmup) / max(1, total_steps - warmup))
        cosine = min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))
        return min(lr * warm, cosine)
    raise ValueError(f"unknown schedule {schedule!r}; valid: noam, inverse_sqrt, cosine, constant")


def train_learning_rate(cfg: TrainConfig, d_model: int, step: int, elapsed_s: float = 0.0) -> float:
    """The learning rate of the `train` section `cfg` at 1-based `step`, `elapsed_s` seconds of
    training in (the clock counts only with `max_minutes` and `schedule_follows_budget`)."""
    follows = cfg.max_minutes is not None and cfg.schedule_follows_budget
    share = parse_share("train.warmup", cfg.warmup)
    if share is not None and cfg.max_steps is None:
        raise ValueError("a warmup given as a share of the run needs train.max_steps")
    return learning_rate(
        step,
        cfg.schedule,
        d_model=d_model,
        warmup=cfg.warmup if share is None else share * cfg.max_steps,
        warmup_follows_decay=share is not None,
        scale=cfg.lr_scale,
        lr=cfg.lr,
        min_lr=cfg.min_lr,
        total_steps=cfg.max_steps,
        decay_step=budget_decay_step(
            step, elapsed_s, max_steps=cfg.max_steps, budget_s=60 * cfg.max_minutes if follows else None
        ),
    )
