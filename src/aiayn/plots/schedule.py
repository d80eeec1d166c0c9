"""The learning-rate schedule of Sec. 5.3, several configurations overlaid.

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

The rate grows linearly for `warmup_steps` steps, peaks at d_model^-0.5 * warmup^-0.5, then
decays as 1/sqrt(step). A larger model (d_model) or longer warmup gives a lower peak.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from aiayn.core.errors import ConfigError
from aiayn.plots.output import save_figure
from aiayn.training.schedule import noam_lr


def schedule_configs(d_models: Sequence[int], warmups: Sequence[int]) -> list[tuple[int, int]]:
    """(d_model, warmup) pairs from repeated --d-model / --warmup flags.

    Equal counts pair up in order; a single value pairs with each of the other's. One
    configuration alone gets two comparisons added: twice the warmup, and half the d_model.
    """
    d_models = list(d_models) or [512]
    warmups = list(warmups) or [4000]
    if len(d_models) != len(warmups) and 1 not in (len(d_models), len(warmups)):
        raise ConfigError(
            f"give --d-model and --warmup the same number of times (or one of them once); got "
            f"{len(d_models)} and {len(warmups)}"
        )
    count = max(len(d_models), len(warmups))
    d_models = d_models * count if len(d_models) == 1 else d_models
    warmups = warmups * count if len(warmups) == 1 else warmups
    for d in d_models:
        if d < 1:
            raise ConfigError(f"--d-model must be >= 1, got {d}")
    for w in warmups:
        if w < 1:
            raise ConfigError(f"--warmup must be >= 1, got {w}")
    configs = list(dict.fromkeys(zip(d_models, warmups, strict=True)))
    if len(configs) == 1:
        d, w = configs[0]
        configs += [(d, 2 * w)] + ([(d // 2, w)] if d >= 2 else [])
    return configs


def schedule_figure(
    configs: Sequence[tuple[int, int]], steps: int | None = None, scale: float = 1.0
) -> Figure:
    """Curves of `noam_lr` for each (d_model, warmup) over `steps` (default 5 x the longest warmup)."""
    if not configs:
        raise ConfigError("no schedule configuration to draw")
    steps = steps if steps is not None else 5 * max(w for _, w in configs)
    if not 2 <= steps <= 10_000_000:
        raise ConfigError(f"--steps must be between 2 and 10000000, got {steps}")
    if not scale > 0:
        raise ConfigError(f"--scale must be > 0, got {scale}")
    x = np.unique(np.linspace(1, steps, num=min(steps, 2000)).astype(int))
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    axes = figure.subplots()
    for d_model, warmup in configs:
        y = [noam_lr(int(s), d_model, warmup, scale) for s in x]
        (line,) = axes.plot(x, y, label=f"d_model={d_model}, warmup={warmup}")
        if warmup <= steps:
            axes.plot([warmup], [noam_lr(warmup, d_model, warmup, scale)], "o", color=line.get_color(), ms=4)
    axes.set_xlabel("training step")
    axes.set_ylabel("learning rate")
    factor = "" if scale == 1.0 else f"{scale:g} · "
    axes.set_title(
        f"lrate = {factor}d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)   (Sec. 5.3)", fontsize=10
    )
    axes.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    axes.grid(alpha=0.3)
    axes.legend(fontsize=9)
    axes.set_xlim(0, steps)
    axes.set_ylim(bottom=0)
    return figure


def plot_schedule(
    configs: Sequence[tuple[int, int]], path: str | Path, steps: int | None = None, scale: float = 1.0
) -> Path:
    """Draw the schedules to `path` (.png or .svg)."""
    return save_figure(schedule_figure(configs, steps, scale), path)
