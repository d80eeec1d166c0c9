"""The run directory: creation checks and its lock, the metrics log, and the log file."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiayn.core.errors import ConfigError
from aiayn.core.files import atomic_write_text
from aiayn.training.run_lock import LOCK_FILE, RunDirLock

log = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "train_config.yaml"
MIN_FREE_BYTES = 200 * 1024 * 1024  # refuse to start with less free disk than this


def default_run_dir(config_path: str | Path) -> Path:
    """`runs/<config name>-<timestamp>` under the working directory."""
    return Path("runs") / f"{Path(config_path).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> RunDirLock:
    """Create (or check) the run directory, make sure it is writable, and take its lock.

    Returns the held `RunDirLock` (see `aiayn.training.run_lock`): keep it for as long as the
    process writes into the directory. A directory another process trains into is refused
    (`RunDirInUseError` naming its PID), whatever `resume` and `overwrite` say; `overwrite`
    empties the directory only once the lock is held.
    """
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"run directory {run_dir} is not a directory")
    existing = [p for p in run_dir.iterdir() if p.name != LOCK_FILE] if run_dir.is_dir() else []
    if resume:
        check_resumable(run_dir)
    if existing and not resume and not overwrite:
        if (run_dir / LOCK_FILE).is_file():
            RunDirLock.acquire(run_dir).release()  # in use: say by whom
        if not failed_start_leftovers(run_dir):
            raise ConfigError(already_exists(run_dir))
        overwrite = True  # a failed start's log alone: this start takes the directory over
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / f".write_test-{os.getpid()}"
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
    try:
        lock = RunDirLock.acquire(run_dir)
    except OSError as error:
        raise ConfigError(f"run directory {run_dir} is not writable: {error}") from None
    if existing and not resume:  # --overwrite, now that no one else writes here
        for path in (p for p in run_dir.iterdir() if p.name != LOCK_FILE):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    return lock


FAILED_START_FILES = frozenset({LOCK_FILE, "train.log"})
"""What a start that stopped before training leaves at most, besides nothing: its lock and its log."""


def failed_start_leftovers(run_dir: Path) -> bool:
    """Whether directory `run_dir` holds nothing but a failed start's lock and log (no run to
    resume: the next start may take it over)."""
    return run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= FAILED_START_FILES


def already_exists(run_dir: Path) -> str:
    """Why a new run does not start in existing `run_dir`, and what to pass instead: `--resume`
    only where there is a run to continue (its `train_config.yaml`)."""
    if (run_dir / CONFIG_FILE).is_file():
        return (f"run directory {run_dir} already exists; pass --resume {run_dir} to continue it "
                "or --overwrite to start again")
    return (f"directory {run_dir} already exists and holds no run ({CONFIG_FILE} missing: it is not a "
            "run, or one stopped before training began); pass --overwrite to start in it anyway, or "
            "choose another --out")


def check_resumable(run_dir: Path) -> None:
    """Raise `ConfigError` unless `run_dir` holds a run to resume (its `train_config.yaml`),
    saying what to do instead."""
    if not run_dir.is_dir():
        raise ConfigError(f"cannot resume: run directory {run_dir} does not exist")
    if not (run_dir / CONFIG_FILE).is_file():
        raise ConfigError(
            f"cannot resume {run_dir}: it holds no {CONFIG_FILE}, so no run began training in it (a start "
            f"that failed or was stopped first); start again with --out {run_dir} --overwrite"
        )


class RunStart:
    """Whether training has begun (`began`): until then, a failure is a failed start."""

    def __init__(self) -> None:
        self.began = False


def fresh_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> bool:
    """Whether this start makes `run_dir` anew: it does not exist, holds only a failed start's
    leftovers (`failed_start_leftovers`), or `overwrite` empties it."""
    if resume:
        return False
    return overwrite or not run_dir.exists() or failed_start_leftovers(run_dir)


def remove_failed_start(run_dir: Path) -> None:
    """Remove the directory of a start that failed before training began (logged)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    log.warning("%s removed: the run failed before training began (fix the error and run the same "
                "command again)", run_dir)


@contextlib.contextmanager
def lock_if_run_dir(directory: Path) -> Iterator[None]:
    """Hold `directory`'s lock while the block writes into it, when it is a run directory (it
    has a lock file or a `train_config.yaml`): refused while a training process holds it."""
    directory = Path(directory)
    if not ((directory / LOCK_FILE).is_file() or (directory / CONFIG_FILE).is_file()):
        yield
        return
    with RunDirLock.acquire(directory):
        yield


class MetricsLog:
    """Appends one JSON object per line to `metrics.jsonl`, and hands each record to the run
    trackers of `train.report_to` (`aiayn.training.trackers`)."""

    def __init__(
        self, run_dir: Path, resume_step: int | None = None, enabled: bool = True, trackers: Any = ()
    ) -> None:
        self.path = Path(run_dir) / METRICS_FILE
        self.enabled = enabled
        self.trackers = list(trackers)
        if not enabled:
            return
        if resume_step is not None and self.path.exists():
            # Drop entries written after the checkpoint we resume from: they will be redone
            # (and a line torn by a killed process).
            kept = [line for line in self.path.read_text().splitlines() if _step(line) <= resume_step]
            atomic_write_text(self.path, "".join(line + "\n" for line in kept))

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.trackers:
            from aiayn.training.trackers import scalars

            for tracker in self.trackers:
                tracker.log(scalars(record), int(record.get("step", 0)))

    def close(self) -> None:
        """Close the trackers (their files complete)."""
        for tracker in self.trackers:
            tracker.close()
        self.trackers = []


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
