"""One writer per run directory: while a process trains into RUN_DIR, every other writer (a
second `aiayn train --resume`, `--overwrite`, `lm train`/`classify train` into it, `aiayn
average RUN_DIR --out RUN_DIR`) is refused with one line naming the holder's PID; readers are
never blocked; a SIGKILLed holder leaves no stale lock; under torchrun only rank 0 locks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.cli.main import main
from aiayn.core.errors import RunDirInUseError
from aiayn.training.checkpoint import list_checkpoints
from aiayn.training.distributed import DistContext
from aiayn.training.run import hold_run_dir
from aiayn.training.run_lock import LOCK_FILE, RunDirLock

from .conftest import TrainProcess, train_steps, write_config

LONG = 400  # max_steps of the holder: it must still be training while the others try


def metric_keys(run_dir: Path) -> list[tuple[int, str]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["split"]) for r in map(json.loads, lines)]


def refused(capsys, argv: list[str], holder: int) -> str:
    """Run `aiayn ARGV` in this process: exit status 2, one line naming the holder's PID."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"is in use by process {holder}, which is training into it" in err, err
    assert "Traceback" not in err
    return err


def test_a_second_writer_is_refused_and_a_killed_holder_leaves_no_stale_lock(tmp_path, capsys):
    config = write_config(tmp_path / "config.yaml", max_steps=LONG, eval_every=4)
    run_dir = tmp_path / "run"
    holder = TrainProcess([str(config), "--out", str(run_dir)], tmp_path / "logs")
    pid = holder.process.pid
    holder.wait_until(lambda: list_checkpoints(run_dir), "the first checkpoint")

    # A second training process: exit status 2, naming the holder, before touching anything.
    second = subprocess.run(
        [sys.executable, "-m", "aiayn", "train", "--resume", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    assert second.returncode == 2, second.stderr
    assert second.stderr.strip().splitlines()[-1] == (
        f"aiayn train: error: run directory {run_dir} is in use by process {pid}, which is "
        "training into it; wait for it to finish or stop it first"
    )
    text = tmp_path / "book.txt"
    text.write_text("to be or not to be\n" * 50)
    refused(capsys, ["train", str(config), "--out", str(run_dir)], pid)
    refused(capsys, ["train", str(config), "--out", str(run_dir), "--overwrite"], pid)
    refused(capsys, ["lm", "train", "--text", str(text), "--out", str(run_dir), "--overwrite"], pid)
    refused(capsys, ["classify", "train", "--out", str(run_dir), "--overwrite"], pid)
    refused(capsys, ["average", str(run_dir), "--last", "1", "--out", str(run_dir)], pid)
    assert (run_dir / "train_config.yaml").is_file() and list_checkpoints(run_dir)  # --overwrite did nothing

    # Readers are never blocked.
    assert main(["translate", "--model", str(run_dir), "--text", "abc"]) == 0
    assert main(["average", str(run_dir), "--last", "1", "--out", str(tmp_path / "avg")]) == 0
    capsys.readouterr()

    # The holder trained on undisturbed; SIGKILL it and resume: the kernel released the lock.
    reached = max(train_steps(run_dir))
    holder.wait_until(lambda: max(train_steps(run_dir)) > reached + 2, "more training steps")
    holder.send(signal.SIGKILL)
    assert (run_dir / LOCK_FILE).read_text().split()[0] == str(pid)  # the file stays behind
    resumed_at = int(list_checkpoints(run_dir)[-1].name.removeprefix("step_"))
    assert main(["train", "--resume", str(run_dir), "--set", f"train.max_steps={resumed_at + 4}"]) == 0
    assert (run_dir / LOCK_FILE).read_text().split()[0] == str(os.getpid())
    keys = metric_keys(run_dir)
    assert len(keys) == len(set(keys)), "metrics.jsonl has duplicated (step, split) rows"
    assert max(step for step, _ in keys) == resumed_at + 4
    RunDirLock.acquire(run_dir).release()  # free again once the resumed run ended


def test_only_rank_0_takes_the_lock(tmp_path):
    """The other ranks of a torchrun job neither prepare the directory nor lock it (the 2-rank
    tests in tests/distributed would fail otherwise: rank 1 would find rank 0's lock)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "train_config.yaml").write_text("{}\n")
    other_rank, rank_0 = DistContext(rank=1, world_size=2), DistContext()
    with RunDirLock.acquire(run_dir):
        with hold_run_dir(run_dir, resume=True, overwrite=False, dist=other_rank):
            pass
        refusal = pytest.raises(RunDirInUseError, match=f"process {os.getpid()}")
        with refusal, hold_run_dir(run_dir, resume=True, overwrite=False, dist=rank_0):
            pass
    with hold_run_dir(run_dir, resume=True, overwrite=False, dist=rank_0), pytest.raises(RunDirInUseError):
        RunDirLock.acquire(run_dir)
    RunDirLock.acquire(run_dir).release()  # released when the run ends


def test_overwrite_empties_the_directory_but_keeps_its_lock_file(tmp_path, capsys):
    config = write_config(tmp_path / "config.yaml", max_steps=2, eval_every=2)
    run_dir = tmp_path / "run"
    assert main(["train", str(config), "--out", str(run_dir)]) == 0
    (run_dir / "stray.txt").write_text("from the first run")
    assert main(["train", str(config), "--out", str(run_dir)]) == 2
    assert "already exists" in capsys.readouterr().err  # free, but not to be overwritten silently
    assert main(["train", str(config), "--out", str(run_dir), "--overwrite"]) == 0
    assert not (run_dir / "stray.txt").exists() and (run_dir / LOCK_FILE).is_file()
    assert metric_keys(run_dir).count((2, "val")) == 1
