"""The run directory: creation checks, the metrics log, and the log file."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiayn.errors import ConfigError
from aiayn.files import atomic_write_text

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "train_config.yaml"
MIN_FREE_BYTES = 200 * 1024 * 1024  # refuse to start with less free disk than this


def default_run_dir(config_path: str | Path | None) -> Path:
    """`runs/<config name>-<timestamp>` under the working directory."""
    name = Path(config_path).stem if config_path else "dates"
    return Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """Create (or check) the run directory and make sure it is writable, before any training."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"run directory {run_dir} is not a directory")
    if resume:
        if not (run_dir / CONFIG_FILE).is_file():
            raise ConfigError(f"cannot resume: {run_dir} is not a run directory ({CONFIG_FILE} missing)")
    elif run_dir.exists() and any(run_dir.iterdir()):
        if not overwrite:
            raise ConfigError(
                f"run directory {run_dir} already exists; pass --resume {run_dir} to continue it "
                "or --overwrite to start again"
            )
        shutil.rmtree(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write_test"
        probe.write_bytes(b"\0" * 4096)
        probe.unlink()
    except OSError as error:
        raise ConfigError(f"run directory {run_dir} is not writable: {error}") from None
    free = shutil.disk_usage(run_dir).free
    if free < MIN_FREE_BYTES:
        raise ConfigError(
            f"only {free / 2**20:.0f} MiB free on the disk of {run_dir}; checkpoints need at "
            f"least {MIN_FREE_BYTES / 2**20:.0f} MiB"
        )


class MetricsLog:
    """Appends one JSON object per line to `metrics.jsonl` (and to TensorBoard when installed)."""

    def __init__(self, run_dir: Path, resume_step: int | None = None, enabled: bool = True) -> None:
        self.path = Path(run_dir) / METRICS_FILE
        self.enabled = enabled
        if not enabled:
            return
        if resume_step is not None and self.path.exists():
            # Drop entries written after the checkpoint we resume from: they will be redone
            # (and a line torn by a killed process).
            kept = [line for line in self.path.read_text().splitlines() if _step(line) <= resume_step]
            atomic_write_text(self.path, "".join(line + "\n" for line in kept))
        self.tensorboard = None
        try:  # optional
            from torch.utils.tensorboard import SummaryWriter

            self.tensorboard = SummaryWriter(str(Path(run_dir) / "tensorboard"))
        except Exception:
            self.tensorboard = None

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.tensorboard is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key not in ("step",):
                    self.tensorboard.add_scalar(f"{record['split']}/{key}", value, record["step"])


def _step(line: str) -> float:
    """The step of one metrics.jsonl line; infinity for a line that is not a JSON object."""
    try:
        record = json.loads(line)
    except ValueError:
        return math.inf
    step = record.get("step", 0) if isinstance(record, dict) else None
    return step if isinstance(step, (int, float)) else math.inf


@contextlib.contextmanager
def log_to_file(run_dir: Path, enabled: bool = True) -> Iterator[None]:
    """Also write aiayn's log messages to `RUN_DIR/train.log` while the block runs."""
    if not enabled:
        yield
        return
    handler = logging.FileHandler(Path(run_dir) / "train.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("aiayn")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()
