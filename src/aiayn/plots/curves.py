"""Training curves from run directories: loss (and BLEU when logged) against steps or minutes.

Reads `RUN_DIR/metrics.jsonl` (`aiayn.training.run_dir.MetricsLog`): one JSON object per
line with `step`, `split` ('train' or 'val'), `loss`, `elapsed_s` (wall-clock seconds since the
run started), and for validation `ppl`, `bleu`, ... Against minutes, runs of different speeds
compare as a user with a time budget sees them: what each reached after N minutes.
Training loss (label-smoothed, Sec. 5.4) is drawn solid, validation loss (plain negative
log-likelihood) dashed with markers, one colour per run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from matplotlib.figure import Figure

from aiayn.core.errors import DataError
from aiayn.plots.output import save_figure
from aiayn.training.run_dir import METRICS_FILE

X_AXES = ("step", "minutes")
"""What the curves can be drawn against."""


class Point(NamedTuple):
    """One logged value: its step, the minutes since the run started (None when the line has no
    `elapsed_s`) and the value."""

    step: int
    minutes: float | None
    value: float


@dataclass
class RunCurves:
    """The series of one run: lists of `Point`, by step."""

    name: str
    train_loss: list[Point] = field(default_factory=list)
    val_loss: list[Point] = field(default_factory=list)
    val_bleu: list[Point] = field(default_factory=list)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_run(run_dir: str | Path, name: str | None = None) -> RunCurves:
    """Read the metrics of `run_dir` (a run directory or its metrics.jsonl file)."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / METRICS_FILE
    if not path.is_file():
        raise DataError(f"{run_dir}: no {METRICS_FILE} (is it a run directory of `aiayn train`?)")
    run = RunCurves(name or (path.parent.name if path.name == METRICS_FILE else path.stem))
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"cannot read {path}: {error}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}: line {number} is not JSON ({error.msg})") from None
        if not isinstance(record, dict) or _number(record.get("step")) is None:
            raise DataError(f"{path}: line {number} has no numeric 'step'")
        step = int(record["step"])
        seconds = _number(record.get("elapsed_s"))
        minutes = None if seconds is None else seconds / 60
        loss, bleu = _number(record.get("loss")), _number(record.get("bleu"))
        if record.get("split") == "train" and loss is not None:
            run.train_loss.append(Point(step, minutes, loss))
        elif record.get("split") == "val":
            if loss is not None:
                run.val_loss.append(Point(step, minutes, loss))
            if bleu is not None:
                run.val_bleu.append(Point(step, minutes, bleu))
    if not (run.train_loss or run.val_loss):
        raise DataError(f"{path}: no training or validation loss logged yet")
    for series in (run.train_loss, run.val_loss, run.val_bleu):
        series.sort()
    return run


def run_names(run_dirs: Sequence[str | Path]) -> list[str]:
    """Legend names: the directory names, or the paths as given when two names clash."""
    names = [Path(d).name if Path(d).is_dir() else Path(d).parent.name for d in run_dirs]
    if len(set(names)) < len(names):
        return [str(d) for d in run_dirs]
    return names


def _xy(run: RunCurves, series: list[Point], x: str) -> tuple[list[float], list[float]]:
    """The x (step or minutes) and y values of a series; a point without minutes is an error
    when drawing against minutes."""
    if x == "step":
        return [p.step for p in series], [p.value for p in series]
    missing = next((p for p in series if p.minutes is None), None)
    if missing is not None:
        raise DataError(
            f"{run.name}: the metrics line of step {missing.step} has no elapsed_s; draw against steps"
        )
    return [p.minutes for p in series], [p.value for p in series]  # type: ignore[misc]


def curves_figure(runs: Sequence[RunCurves], x: str = "step") -> Figure:
    """Loss against steps or minutes (and BLEU, when any run logged it), one colour per run."""
    if not runs:
        raise DataError("no run directory given")
    if x not in X_AXES:
        raise DataError(f"x must be one of {', '.join(X_AXES)}, got {x!r}")
    x_label = "step" if x == "step" else "minutes since the run started"
    with_bleu = any(run.val_bleu for run in runs)
    figure = Figure(figsize=(12 if with_bleu else 7.5, 4.5), layout="constrained")
    axes = figure.subplots(1, 2 if with_bleu else 1, squeeze=False)[0]
    loss_axes = axes[0]
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for run, color in zip(runs, colors, strict=True):
        if run.train_loss:
            loss_axes.plot(*_xy(run, run.train_loss, x), color=color, lw=1.3, label=f"{run.name} train")
        if run.val_loss:
            xs, values = _xy(run, run.val_loss, x)
            loss_axes.plot(xs, values, color=color, ls="--", marker="o", ms=4, label=f"{run.name} val")
        if with_bleu and run.val_bleu:
            axes[1].plot(*_xy(run, run.val_bleu, x), color=color, marker="o", ms=4, label=run.name)
    loss_axes.set_xlabel(x_label)
    loss_axes.set_ylabel("loss per target token (nats)")
    loss_axes.set_title("loss (train: label-smoothed; val: plain NLL)", fontsize=10)
    loss_axes.grid(alpha=0.3)
    loss_axes.legend(fontsize=8)
    if with_bleu:
        axes[1].set_xlabel(x_label)
        axes[1].set_ylabel("BLEU")
        axes[1].set_title("validation BLEU", fontsize=10)
        axes[1].grid(alpha=0.3)
        axes[1].legend(fontsize=8)
    return figure


def plot_curves(run_dirs: Sequence[str | Path], path: str | Path, x: str = "step") -> list[RunCurves]:
    """Read each run and draw the curves against `x` ('step' or 'minutes') to `path` (.png or
    .svg); returns the runs read."""
    runs = [read_run(d, name) for d, name in zip(run_dirs, run_names(run_dirs), strict=True)]
    save_figure(curves_figure(runs, x), path)
    return runs
