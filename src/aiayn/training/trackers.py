"""Run trackers besides `metrics.jsonl`: TensorBoard and Weights & Biases (`train.report_to`).

    train:
      report_to: [tensorboard, wandb]

- `tensorboard` writes event files under `RUN_DIR/tensorboard/` (`tensorboard --logdir runs/`);
  it needs the extra `tensorboard` (pip install 'aiayn[tensorboard]').
- `wandb` logs to Weights & Biases (project `aiayn` unless `WANDB_PROJECT` says otherwise; the
  run is named after the run directory); it needs the extra `wandb`. With `WANDB_MODE=offline`
  it writes its files under `RUN_DIR/wandb/` and needs no network or account
  (`wandb sync RUN_DIR/wandb/offline-run-*` uploads them later).

Every record of `metrics.jsonl` (train and validation) goes to each tracker, its numbers as
scalars named `split/key` at its step. A tracker named but not installed is a `ConfigError`
naming the extra, before the run starts.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Protocol

from aiayn.core.errors import ConfigError

PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}
"""Tracker -> the package (and aiayn extra) it needs."""


class Tracker(Protocol):
    def log(self, scalars: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


def check_trackers(names: list[str]) -> None:
    """Refuse, naming the extra, a tracker whose package is not installed."""
    for name in names:
        try:
            importlib.import_module(PACKAGES[name])
        except ImportError:
            raise ConfigError(
                f"train.report_to: {name} needs the Python package {PACKAGES[name]!r}, which comes with "
                f"aiayn's optional extra {name!r}: pip install 'aiayn[{name}]'"
            ) from None


class TensorBoardTracker:
    def __init__(self, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(run_dir / "tensorboard"))

    def log(self, scalars: dict[str, float], step: int) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    def __init__(self, run_dir: Path, config: dict[str, Any], resume: bool) -> None:
        import wandb

        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "aiayn"), name=run_dir.name, dir=str(run_dir),
            config=config, resume="allow" if resume else None, id=_run_id(run_dir),
        )

    def log(self, scalars: dict[str, float], step: int) -> None:
        self.run.log(scalars, step=step)

    def close(self) -> None:
        self.run.finish()


def _run_id(run_dir: Path) -> str:
    """One W&B run per run directory (so `--resume` continues it)."""
    import hashlib

    return hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:16]


def open_trackers(names: list[str], run_dir: Path, config: dict[str, Any], resume: bool) -> list[Tracker]:
    """The trackers `train.report_to` names, opened for `run_dir`."""
    check_trackers(names)
    trackers: list[Tracker] = []
    for name in names:
        if name == "tensorboard":
            trackers.append(TensorBoardTracker(Path(run_dir)))
        elif name == "wandb":
            trackers.append(WandbTracker(Path(run_dir), config, resume))
    return trackers


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The numbers of one metrics record, named `split/key`."""
    split = record.get("split", "train")
    return {
        f"{split}/{key}": float(value)
        for key, value in record.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and key != "step"
    }
