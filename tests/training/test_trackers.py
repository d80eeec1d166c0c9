"""`train.report_to` (issue 26): TensorBoard event files and an offline Weights & Biases run are
written into the run directory; an unknown or missing tracker is a one-line error naming it."""

from __future__ import annotations

import pytest

from aiayn.core.errors import ConfigError
from aiayn.tasks import config_from_dict
from aiayn.training import trackers
from aiayn.training.run import run_task
from aiayn.translation.task import TRANSLATION_TASK

from .conftest import tiny_config


def test_tensorboard_writes_event_files(tmp_path):
    pytest.importorskip("tensorboard", reason="needs the optional extra 'tensorboard'")
    run_task(TRANSLATION_TASK, config_from_dict(tiny_config(max_steps=4, eval_every=2,
                                                            report_to=["tensorboard"])), tmp_path / "run")
    events = list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    accumulator.Reload()
    assert {"train/loss", "val/loss"} <= set(accumulator.Tags()["scalars"])


def test_wandb_offline_writes_its_run_files(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="needs the optional extra 'wandb'")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_task(TRANSLATION_TASK, config_from_dict(tiny_config(max_steps=4, eval_every=2, report_to=["wandb"])),
             tmp_path / "run")
    runs = list((tmp_path / "run" / "wandb").glob("offline-run-*"))
    assert runs and list(runs[0].glob("*.wandb"))


def test_unknown_tracker_is_refused_naming_it():
    with pytest.raises(ConfigError, match="train.report_to: unknown tracker 'mlflow'"):
        config_from_dict(tiny_config(report_to=["mlflow"]))


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(trackers.PACKAGES, "wandb", "aiayn_no_such_package")
    with pytest.raises(ConfigError, match=r"pip install 'aiayn\[wandb\]'"):
        trackers.check_trackers(["wandb"])
