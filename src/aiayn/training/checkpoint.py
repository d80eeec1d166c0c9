"""Checkpoints: atomic, resumable, averageable.

Run directory layout:

    RUN_DIR/
      config.json, model.safetensors, tokenizer.json   the best model so far (a model directory)
      train_config.yaml                                 the full resolved config
      metrics.jsonl                                     one JSON object per log/validation
      checkpoints/step_000500/                          the last K saves, each holding
        config.json, model.safetensors                    the weights (a model directory), and
        training_state.pt                                 optimizer, schedule step, clock, RNG, data position

A checkpoint is written into a hidden temporary directory and renamed into place in one
step, so a crash mid-save leaves the previous checkpoints untouched and never a partial one.
A directory being replaced or pruned is first renamed to a hidden name, then deleted. Hidden
leftovers of a killed process (`.step_NNNNNN.tmp-PID`, `.step_NNNNNN.old-PID`) are never
listed as checkpoints and are removed by the next save. Training state is read back with
`torch.load(weights_only=True)`, which refuses pickles that would run code. Before a resumed run
builds its model, `check_resume_model` compares the newest checkpoint's weights header with the
model the config describes, laid out on the meta device: a config that disagrees with the
checkpoint (`--set model.d_model=1000000000`) is an error naming the tensor, not an allocation.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aiayn import formats
from aiayn.core.errors import CheckpointError
from aiayn.core.files import atomic_directory, atomic_write, write_errors
from aiayn.formats import CONFIG_FILE as MODEL_CONFIG_FILE
from aiayn.formats import (
    WEIGHTS_FILE,
    check_unstored_buffers,
    check_weights_file,
    load_model,
    load_weights,
    meta_model,
    read_model_json,
)
from aiayn.formats.model_card import write_model_card
from aiayn.training.run_dir import lock_if_run_dir

CHECKPOINTS = "checkpoints"
STATE_FILE = "training_state.pt"
STEP_PATTERN = re.compile(r"^step_(\d{6,})$")
LEFTOVER_PATTERN = re.compile(r"^\.step_\d{6,}\.(tmp|old)-\d+$")
CHECKPOINT_FILES = (STATE_FILE, WEIGHTS_FILE, MODEL_CONFIG_FILE)
REQUIRED_STATE = {"optimizer": dict, "train_state": dict, "rng_cpu": torch.Tensor}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_dir(path: Path) -> None:
    """Delete a directory so that no half-deleted copy is ever visible under its name."""
    trash = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _remove_leftovers(root: Path) -> None:
    """Remove the hidden temporary directories of saves that a killed process left behind."""
    for leftover in root.iterdir():
        if LEFTOVER_PATTERN.match(leftover.name):
            shutil.rmtree(leftover, ignore_errors=True)


def save_checkpoint(run_dir: Path, step: int, model: nn.Module, state: dict[str, Any], keep: int) -> Path:
    """Write `checkpoints/step_NNNNNN/` atomically and keep only the newest `keep` checkpoints.

    A failed write (e.g. a full disk) raises `CheckpointError`; the previous checkpoints stay.
    """
    root = Path(run_dir) / CHECKPOINTS
    final = root / f"step_{step:06d}"
    tmp = root / f".{final.name}.tmp-{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(root)
        formats.save_pretrained(model, tmp)
        atomic_write(tmp / STATE_FILE, lambda path: torch.save(state, path))
        _fsync_dir(tmp)
        if final.exists():  # the same step saved again (e.g. after a resume): replace it
            _remove_dir(final)
        os.rename(tmp, final)
        _fsync_dir(root)
    except OSError as error:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointError(
            f"cannot write checkpoint {final}: {error}; the previous checkpoints are untouched"
        ) from None
    for old in list_checkpoints(run_dir)[:-keep]:
        with contextlib.suppress(OSError):  # best effort: an extra old checkpoint does no harm
            _remove_dir(old)
    return final


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first (temporary directories are ignored)."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in root.iterdir()
        if (m := STEP_PATTERN.match(p.name)) and all((p / f).is_file() for f in CHECKPOINT_FILES)
    ]
    return [p for _, p in sorted(found)]


def load_training_state(checkpoint: Path) -> dict[str, Any]:
    """Read `training_state.pt` safely (`weights_only=True`); a hostile pickle is refused."""
    path = Path(checkpoint) / STATE_FILE
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None
    except Exception as error:  # arbitrary bytes fail in arbitrary places inside the unpickler
        lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
        # torch's message starts with advice to load unsafely; the line naming the refused
        # global ("Unsupported global: GLOBAL posix.system ...") is the one worth showing.
        detail = next((line for line in lines if "GLOBAL" in line), lines[0])
        raise CheckpointError(
            f"{path}: refused to load: not a plain tensor/number checkpoint, so it may run code "
            f"or is corrupt ({detail})"
        ) from None
    problems = [
        f"{key!r} ({kind.__name__})"
        for key, kind in REQUIRED_STATE.items()
        if not isinstance(state, dict) or not isinstance(state.get(key), kind)
    ]
    if problems:
        raise CheckpointError(f"{path}: not an aiayn training state: missing or wrong {', '.join(problems)}")
    return state


def check_resume_model(run_dir: Path, build: Callable[[], nn.Module], config_name: str) -> None:
    """Before a resumed run builds its model with `build()`: lay that model out on the meta
    device (no memory) and check it against the newest checkpoint's weights header (names,
    shapes, dtypes). Raises `CheckpointError` naming the tensor, or `config_name` when the
    config is too large to lay out; does nothing when the run has no checkpoint yet."""
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        return
    weights = checkpoints[-1] / WEIGHTS_FILE
    layout = meta_model(build, config_name)
    check_weights_file(layout, weights)
    check_unstored_buffers(layout, weights, config_name)


def restore_weights(model: nn.Module, checkpoint: Path) -> None:
    """Load a checkpoint's weights into `model` (names and shapes checked)."""
    load_weights(model, Path(checkpoint) / WEIGHTS_FILE)


def checkpoint_progress(checkpoint: Path) -> float:
    """The run's progress (share of its budget, 0..1) when `checkpoint` was written."""
    progress = load_training_state(checkpoint).get("progress")
    if isinstance(progress, bool) or not isinstance(progress, (int, float)):
        raise CheckpointError(
            f"{checkpoint}: records no progress (written by an older aiayn, or by a run with neither "
            "train.max_steps nor train.max_minutes); choose checkpoints with --last N instead"
        )
    return float(progress)


def tail_checkpoints(checkpoints: list[Path], tail: float) -> list[Path]:
    """The checkpoints written in the last `tail` share of the run (0 < tail <= 1) before the
    newest one: those whose progress is at least the newest one's minus `tail`."""
    progress = [checkpoint_progress(checkpoint) for checkpoint in checkpoints]
    return [path for path, at in zip(checkpoints, progress, strict=True) if at >= progress[-1] - tail - 1e-9]


def average_checkpoints(
    run_dir: Path, last: int | None, out: Path, *, tail: float | None = None
) -> list[Path]:
    """Average the weights of the last `last` checkpoints into model directory `out` (Sec. 6.1),
    or (with `tail`, a share such as 0.2) of those written in the last `tail` of the run.

    "For the base models, we used a single model obtained by averaging the last 5
    checkpoints, which were written at 10-minute intervals." How many checkpoints cover the
    end of a run depends on the machine's speed when they are taken every N steps: on a slow
    machine the last five can span the whole run, warmup included. `tail` takes the annealed
    end of the run instead, by the progress each checkpoint records (`tail_checkpoints`); only
    the `train.keep_checkpoints` newest exist to choose from. The tokenizer files of the run
    are copied along, so `out` is a complete model directory. When `out` is a run directory
    (`out` = `run_dir` included), it is written under the run directory's lock: refused while
    a training process writes into it.
    """
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        raise CheckpointError(f"{run_dir}: no checkpoints to average under {CHECKPOINTS}/")
    if tail is None and (last is None or last < 1):
        raise CheckpointError(f"--last must be >= 1, got {last}")
    if tail is not None and not 0 < tail <= 1:
        raise CheckpointError(f"--tail must be a share in (0%, 100%], got {tail:.4g}")
    out = Path(out)
    with lock_if_run_dir(out):
        chosen = checkpoints[-last:] if tail is None else tail_checkpoints(checkpoints, tail)
        model = load_model(chosen[0])
        total = {name: tensor.double().clone() for name, tensor in model.state_dict().items()}
        for checkpoint in chosen[1:]:
            other = load_model(checkpoint)
            for name, tensor in other.state_dict().items():
                total[name] += tensor.double()
        dtypes = {name: tensor.dtype for name, tensor in model.state_dict().items()}
        averaged = {name: (tensor / len(chosen)).to(dtypes[name]) for name, tensor in total.items()}
        model.load_state_dict(averaged)
        names = ", ".join(path.name for path in chosen)
        model.config.extra["averaged_from"] = (
            f"the average of {len(chosen)} checkpoints of {run_dir} ({names})"
        )
        # a new directory appears only when complete; into an existing one (the run directory)
        # each file is replaced atomically
        with write_errors(out), (
            contextlib.nullcontext(out) if out.exists() else atomic_directory(out)
        ) as directory:
            formats.save_pretrained(model, directory)
            tokenizer_files = [*Path(run_dir).glob("*tokenizer.json"), *Path(run_dir).glob("tokenizer.model"),
                               *(Path(run_dir) / name for name in ("source.spm", "target.spm", "vocab.json"))]
            for tokenizer_file in tokenizer_files:
                same = tokenizer_file.resolve() == (out / tokenizer_file.name).resolve()
                if tokenizer_file.is_file() and not same:
                    atomic_write(directory / tokenizer_file.name,
                                 lambda p, src=tokenizer_file: shutil.copyfile(src, p))
            read_model_json(directory)  # sanity: the result is a model directory
            write_model_card(directory, name=out.name)
    return chosen
