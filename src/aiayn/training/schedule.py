"""Learning-rate schedules (Sec. 5.3).

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

"This corresponds to increasing the learning rate linearly for the first warmup_steps
training steps, and decreasing it thereafter proportionally to the inverse square root of
the step number. We used warmup_steps = 4000." `noam` is that schedule times `scale`;
`inverse_sqrt` (linear warmup to `lr`, then lr * sqrt(warmup / step)), `cosine` (linear
warmup, cosine decay to `min_lr` at `total_steps`) and `constant` are alternatives.
"""

from __future__ import annotations

import math


def noam_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The paper's schedule at 1-based `step`."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def learning_rate(
    step: int,
    schedule: str,
    *,
    d_model: int,
    warmup: int,
    scale: float = 1.0,
    lr: float = 1e-3,
    min_lr: float = 0.0,
    total_steps: int | None = None,
) -> float:
    """Learning rate for 1-based `step` under `schedule` ('noam', 'inverse_sqrt', 'cosine', 'constant')."""
    step = max(step, 1)
    if schedule == "noam":
        return noam_lr(step, d_model, warmup, scale)
    warm = min(1.0, step / warmup) if warmup > 0 else 1.0
    if schedule == "constant":
        return lr * warm
    if schedule == "inverse_sqrt":
        return lr * warm if step <= warmup else lr * math.sqrt(warmup / step)
    if schedule == "cosine":
        if total_steps is None:
            raise ValueError("the cosine schedule needs train.max_steps")
        if step <= warmup:
            return lr * warm
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown schedule {schedule!r}; valid: noam, inverse_sqrt, cosine, constant")
