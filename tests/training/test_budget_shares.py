"""Warmup, validation cadence and checkpoint averaging as shares of the run ('6%'), on a fake clock."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from aiayn.cli.main import main
from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.core.settings import parse_share
from aiayn.model import Transformer
from aiayn.tasks import config_from_dict, load_config
from aiayn.training.checkpoint import (
    STATE_FILE,
    average_checkpoints,
    list_checkpoints,
    load_training_state,
    tail_checkpoints,
)
from aiayn.training.loss import translation_loss
from aiayn.training.progress import Cadence, run_progress
from aiayn.training.run_dir import prepare_run_dir
from aiayn.training.schedule import train_learning_rate
from aiayn.training.trainer import Trainer
from aiayn.translation.data import prepare_data
from aiayn.translation.task import build_model_config

from .conftest import tiny_config

COSINE = {"schedule": "cosine", "lr": 1e-2, "min_lr": 1e-4}


# ------------------------------------------------------------------ settings
def test_a_share_is_a_percentage_and_a_step_count_stays_one():
    assert parse_share("train.warmup", "6%") == pytest.approx(0.06)
    assert parse_share("train.warmup", " 12.5 %") == pytest.approx(0.125)
    assert parse_share("train.warmup", "100%") == 1.0
    assert parse_share("train.warmup", 400) is None
    for bad in ("0%", "101%", "6", "six%", "-5%", "%"):
        with pytest.raises(ConfigError, match=r"train.warmup must be a step count or a share"):
            parse_share("train.warmup", bad)


def test_config_accepts_shares_and_keeps_step_counts():
    config = config_from_dict(tiny_config(max_minutes=60, max_steps=8000, warmup="6%", eval_every="5%"))
    assert (config.train.warmup, config.train.eval_every) == ("6%", "5%")
    assert config_from_dict(config.to_dict()).train.warmup == "6%"  # train_config.yaml reads back
    assert config_from_dict(tiny_config(warmup=400, eval_every=400)).train.warmup == 400
    with pytest.raises(ConfigError, match="train.eval_every must be a step count or a share"):
        config_from_dict(tiny_config(eval_every="often"))
    with pytest.raises(ConfigError, match="train.warmup must be an integer >= 0"):
        config_from_dict(tiny_config(warmup=-1))
    with pytest.raises(ConfigError, match="train.warmup 6% is a share of the run: set train.max_steps"):
        config_from_dict(tiny_config(max_steps=None, max_minutes=60, warmup="6%"))
    with pytest.raises(ConfigError, match="train.eval_every 5% is a share of the run: set train.max_minutes"):
        config_from_dict(tiny_config(max_steps=None, eval_every="5%"))
    assert load_config(None, ["train.warmup=6%", "train.max_steps=100"]).train.warmup == "6%"


def test_progress_is_the_further_of_steps_and_clock():
    assert run_progress(100, 30.0, max_steps=1000, budget_s=60.0) == 0.5
    assert run_progress(800, 30.0, max_steps=1000, budget_s=60.0) == 0.8
    assert run_progress(800, 90.0, max_steps=1000, budget_s=60.0) == 1.0
    assert run_progress(100, 30.0, max_steps=None, budget_s=60.0) == 0.5
    assert run_progress(100, 30.0, max_steps=1000, budget_s=None) == 0.1
    assert run_progress(100, 30.0, max_steps=None, budget_s=None) is None


def test_cadence_in_steps_and_in_shares():
    steps = Cadence(400)
    assert [s for s in range(1, 1300) if steps.due(s, None)] == [400, 800, 1200]
    assert steps.due_at_end(1200, None) is False and steps.due_at_end(1201, 1200) is True
    share = Cadence("5%")
    share.start(0.0)
    due = []
    for step in range(1, 1001):
        progress = step / 1000
        if share.due(step, progress):
            share.passed(progress)
            due.append(step)
    assert due == list(range(50, 1001, 50))  # 0.15 / 0.05 rounds down to 2.99...: not missed
    assert share.due_at_end(1000, 1000) is False and share.due_at_end(1003, 1000) is True
    resumed = Cadence("5%")
    resumed.start(0.12)  # a checkpoint at 12%: the marks at 5% and 10% are behind it
    assert not resumed.due(121, 0.13) and resumed.due(151, 0.151)
    jump = Cadence("5%")
    jump.start(0.0)
    assert jump.due(1, 0.31)  # a long step past several marks: one validation
    jump.passed(0.31)
    assert not jump.due(2, 0.32)


# ------------------------------------------------------------------ the schedule
def rates(seconds_per_step: float, steps: int, **train) -> list[float]:
    cfg = config_from_dict(tiny_config(max_minutes=1.0, max_steps=1000, **COSINE | train)).train
    return [train_learning_rate(cfg, 64, s, (s - 1) * seconds_per_step) for s in range(1, steps + 1)]


def test_a_share_warmup_is_that_many_steps_on_a_fast_machine():
    # 1,000 steps in 10 s of the 60: the steps lead, and 6% of them are 60 warmup steps.
    assert rates(0.01, 1000, warmup="6%") == rates(0.01, 1000, warmup=60)


def test_a_share_warmup_takes_that_share_of_the_time_on_a_slow_machine():
    # 0.6 s a step: 100 steps in the budget; the clock leads, and 6% of 60 s is 3.6 s: 7 steps.
    by_share = rates(0.6, 100, warmup="6%")
    lr = COSINE["lr"]
    assert by_share[1:6] == pytest.approx([lr * (s - 1) * 0.6 / 3.6 for s in range(2, 7)])
    assert max(by_share) == by_share[6] == pytest.approx(lr, rel=1e-3)  # step 7 starts at 3.6 s
    assert all(a > b for a, b in itertools.pairwise(by_share[6:]))
    by_steps = rates(0.6, 100, warmup=60)  # 60 steps: the decay meets the warmup late and low
    assert by_steps.index(max(by_steps)) > 35 and max(by_steps) < 0.75 * lr


# ------------------------------------------------------------------ the trainer, on a fake clock
class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def half_second_trainer(config, run_dir, resume: bool = False) -> Trainer:
    """A Trainer whose clock moves 0.5 s with every training step (validation takes no time)."""
    time = FakeTime()
    prepare_run_dir(run_dir, resume=resume, overwrite=False)
    torch.manual_seed(config.train.seed)
    data = prepare_data(config.data)
    model = Transformer(build_model_config(config, data.tokenizers))

    def half_second_steps(model, batch, smoothing):
        if model.training:
            time.now += 0.5
        return translation_loss(model, batch, smoothing)

    save = data.tokenizers.save
    return Trainer(config, model, data.train, data.valid, run_dir, loss_fn=half_second_steps,
                   save_extra=save, timer=time)


def shared_config(**train):
    """60 steps of 0.5 s in a 30 s budget; the step horizon far away, so the clock leads."""
    settings = {"max_steps": 1_000_000, "max_minutes": 0.5, "log_every": 1, "keep_checkpoints": 10}
    return config_from_dict(tiny_config(**settings | COSINE | train))


@pytest.fixture(scope="module")
def quarter_run(tmp_path_factory):
    """A run validated every 25% of a 30 s budget, with a 10% warmup."""
    run_dir = tmp_path_factory.mktemp("shares") / "run"
    torch.set_num_threads(1)
    trainer = half_second_trainer(shared_config(warmup="10%", eval_every="25%"), run_dir)
    trainer.fit()
    return run_dir


def rows(run_dir, split):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def test_validations_and_checkpoints_fall_at_each_share_of_the_budget(quarter_run):
    # Step k starts (k-1)/2 s in: 25% of 30 s is passed by step 16's start, 50% by 31's, 75% by 46's;
    # the budget runs out after step 60, which gets the final validation.
    assert [r["step"] for r in rows(quarter_run, "val")] == [16, 31, 46, 60]
    assert [p.name for p in list_checkpoints(quarter_run)] == [f"step_{s:06d}" for s in (16, 31, 46, 60)]
    progress = [load_training_state(p)["progress"] for p in list_checkpoints(quarter_run)]
    assert progress == pytest.approx([8 / 30, 15.5 / 30, 23 / 30, 1.0])


def test_the_warmup_share_ends_at_that_share_of_the_budget(quarter_run):
    lrs = {r["step"]: r["lr"] for r in rows(quarter_run, "train")}
    # 10% of 30 s is 3 s: step 7 starts there; until then the rate climbs with the clock.
    assert [lrs[s] for s in range(2, 7)] == pytest.approx([1e-2 * (s - 1) / 6 for s in range(2, 7)])
    assert max(lrs.values()) == lrs[7] == pytest.approx(1e-2)
    assert all(lrs[s] > lrs[s + 1] for s in range(7, 60))


def test_averaging_takes_the_annealed_tail_of_the_budget(quarter_run, tmp_path, capsys):
    checkpoints = list_checkpoints(quarter_run)
    assert [p.name for p in tail_checkpoints(checkpoints, 0.3)] == ["step_000046", "step_000060"]
    assert [p.name for p in tail_checkpoints(checkpoints, 0.2)] == ["step_000060"]
    assert len(tail_checkpoints(checkpoints, 1.0)) == 4
    chosen = average_checkpoints(quarter_run, None, tmp_path / "avg", tail=0.3)
    assert [p.name for p in chosen] == ["step_000046", "step_000060"]
    assert main(["average", str(quarter_run), "--tail", "30%", "--out", str(tmp_path / "avg2")]) == 0
    assert "averaged 2 checkpoints (step_000046, step_000060)" in capsys.readouterr().out
    assert main(["average", str(quarter_run), "--tail", "30", "--out", str(tmp_path / "avg3")]) == 2
    assert "argument --tail: must be a share of the run" in capsys.readouterr().err


def test_tail_averaging_needs_checkpoints_that_record_progress(tmp_path, make_config, one_thread):
    run_dir = tmp_path / "run"
    half_second_trainer(make_config(max_steps=4, eval_every=2), run_dir).fit()
    assert [load_training_state(p)["progress"] for p in list_checkpoints(run_dir)] == [0.5, 1.0]
    newest = list_checkpoints(run_dir)[-1]
    state = load_training_state(newest)
    del state["progress"]  # as an older aiayn wrote it
    torch.save(state, newest / STATE_FILE)
    with pytest.raises(CheckpointError, match="records no progress.*--last N"):
        average_checkpoints(run_dir, None, tmp_path / "avg", tail=0.2)


def test_a_resumed_run_keeps_the_share_cadence(tmp_path, one_thread):
    run_dir = tmp_path / "run"
    half_second_trainer(shared_config(eval_every="25%", max_minutes=0.2), run_dir).fit()
    assert [r["step"] for r in rows(run_dir, "val")] == [7, 13, 19, 24]  # every 3 s of 12
    resumed = half_second_trainer(shared_config(eval_every="25%"), run_dir, resume=True)
    resumed.fit(resume=True)
    # Resumed with 30 s: 12 s are 40%, past the 25% mark; 50% and 75% fall at steps 31 and 46.
    assert [r["step"] for r in rows(run_dir, "val")] == [7, 13, 19, 24, 31, 46, 60]
