"""A full disk or an unwritable run directory fails up front, before any data or training
work, with a clear message (exit 2, no traceback); a disk that fills up mid-run fails with
a clear message and leaves the previous checkpoints intact."""

from __future__ import annotations

import errno
import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from aiayn.cli.main import main
from aiayn.training import checkpoint as checkpoint_module
from aiayn.training.checkpoint import CHECKPOINTS, list_checkpoints

from .conftest import write_config

Usage = namedtuple("Usage", "total used free")


def train(capsys, *argv: str) -> tuple[int, str]:
    code = main(["train", *argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def assert_nothing_done(run_dir: Path) -> None:
    """No data prepared (the tokenizer is written right after), nothing trained."""
    if run_dir.is_dir():
        assert sorted(p.name for p in run_dir.iterdir()) in ([], ["train.log"])


def test_full_disk_fails_up_front(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10 * 2**30, 10 * 2**30 - 2**20, 2**20))
    run_dir = tmp_path / "run"
    code, err = train(capsys, str(write_config(tmp_path / "c.yaml")), "--out", str(run_dir))
    assert code == 2
    assert f"aiayn train: error: only 1 MiB free on the disk of {run_dir}" in err
    assert_nothing_done(run_dir)


@pytest.mark.parametrize("where", ["under_a_file", "is_a_file", "proc"])
def test_unwritable_run_directory_fails_up_front(tmp_path, capsys, where):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    run_dir = {
        "under_a_file": blocker / "run",
        "is_a_file": blocker,
        "proc": Path("/proc/aiayn-hardening-test/run"),
    }[where]
    code, err = train(capsys, str(write_config(tmp_path / "c.yaml")), "--out", str(run_dir))
    assert code == 2
    assert f"aiayn train: error: run directory {run_dir} is not" in err  # "not writable" / "not a directory"
    assert blocker.read_text() == "not a directory"


def test_disk_full_during_a_checkpoint_save_is_a_clear_error(tmp_path, monkeypatch, capsys):
    real_save = checkpoint_module.torch.save
    saves = {"n": 0}

    def save(obj, path, *args, **kwargs):
        saves["n"] += 1
        if saves["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(checkpoint_module.torch, "save", save)
    run_dir = tmp_path / "run"
    config = write_config(tmp_path / "c.yaml", max_steps=8, eval_every=4)
    code, err = train(capsys, str(config), "--out", str(run_dir))
    assert code == 2
    assert f"cannot write checkpoint {run_dir / CHECKPOINTS / 'step_000008'}" in err
    assert "No space left on device; the previous checkpoints are untouched" in err
    assert [p.name for p in list_checkpoints(run_dir)] == ["step_000004"]
    assert [p.name for p in (run_dir / CHECKPOINTS).iterdir()] == ["step_000004"]  # no temporary left
