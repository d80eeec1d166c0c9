"""A schedule that follows the time budget: progress = max(step / max_steps, elapsed / budget)."""

from __future__ import annotations

import itertools
import json
import math

import pytest
import torch

from aiayn.cli.main import main
from aiayn.model import Transformer
from aiayn.tasks import config_from_dict
from aiayn.training.loss import translation_loss
from aiayn.training.run_dir import prepare_run_dir
from aiayn.training.schedule import budget_decay_step, train_learning_rate
from aiayn.training.trainer import Trainer
from aiayn.translation.data import prepare_data
from aiayn.translation.task import build_model_config

from .conftest import tiny_config

COSINE = {"schedule": "cosine", "lr": 1e-2, "min_lr": 1e-4, "warmup": 10}


def test_decay_step_is_the_further_of_steps_and_clock():
    assert budget_decay_step(100, 30.0, max_steps=1000, budget_s=60.0) == 500  # the clock is ahead
    assert budget_decay_step(800, 30.0, max_steps=1000, budget_s=60.0) == 800  # the steps are ahead
    assert budget_decay_step(100, 90.0, max_steps=1000, budget_s=60.0) == 1000  # never past the end
    assert budget_decay_step(100, 30.0, max_steps=1000, budget_s=None) == 100
    assert budget_decay_step(100, 30.0, max_steps=None, budget_s=60.0) == 100


def lrs_on_a_machine(seconds_per_step: float, **train) -> list[float]:
    """The rate at every step of a run that stops at `max_minutes`, on a fake clock."""
    cfg = config_from_dict(tiny_config(max_minutes=1.0, **COSINE | train)).train
    rates, step = [], 0
    while step * seconds_per_step < 60 and (cfg.max_steps is None or step < cfg.max_steps):
        step += 1
        rates.append(train_learning_rate(cfg, 64, step, elapsed_s=(step - 1) * seconds_per_step))
    return rates


def test_on_a_slow_machine_warmup_then_decay_end_inside_the_budget():
    # 1,000 steps planned, time for 300: the clock drives the decay.
    rates = lrs_on_a_machine(0.2, max_steps=1000)
    assert len(rates) == 300
    assert rates[:9] == pytest.approx([1e-2 * s / 10 for s in range(1, 10)])  # warmup: 10 steps...
    assert 0.99e-2 < rates[9] < 1e-2  # ...whose last one meets the decay, already under way
    decay = rates[9:]
    assert all(a >= b for a, b in itertools.pairwise(decay))  # then only down
    assert rates[-1] == pytest.approx(1e-4, rel=1e-2)  # the schedule's minimum at the end
    assert rates[149] == pytest.approx((1e-2 + 1e-4) / 2, rel=0.05)  # half the time: half the decay
    # The same machine with the budget ignored: the run ends mid-decay, far from the minimum.
    step_based = lrs_on_a_machine(0.2, max_steps=1000, schedule_follows_budget=False)
    assert step_based[-1] > 50 * 1e-4


def test_on_a_fast_machine_the_step_schedule_is_unchanged():
    rates = lrs_on_a_machine(0.01, max_steps=1000)  # 1,000 steps in 10 s of the 60
    assert len(rates) == 1000
    lr, min_lr = COSINE["lr"], COSINE["min_lr"]
    step_based = [  # the cosine schedule by steps alone, as it was before the clock counted
        lr * (s / 10) if s <= 10
        else min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * ((s - 10) / 990)))
        for s in range(1, 1001)
    ]
    assert rates == step_based  # bit for bit: the steps are ahead of the clock throughout


def test_noam_decays_with_the_clock_too():
    cfg = config_from_dict(tiny_config(max_minutes=1.0, max_steps=1000, schedule="noam", warmup=10)).train
    assert train_learning_rate(cfg, 64, 100, elapsed_s=6.0) == pytest.approx(64**-0.5 * 100**-0.5)
    assert train_learning_rate(cfg, 64, 100, elapsed_s=30.0) == pytest.approx(64**-0.5 * 500**-0.5)


class FakeTime:
    """A time source for the trainer's clock that moves only when a training step runs."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_trainer_anneals_by_the_end_of_the_budget_on_a_fake_clock(tmp_path, one_thread):
    clock = FakeTime()
    config = config_from_dict(tiny_config(max_steps=1_000_000, max_minutes=0.5, log_every=10,
                                          eval_every=1000, **COSINE))
    torch.manual_seed(config.train.seed)
    data = prepare_data(config.data)
    model = Transformer(build_model_config(config, data.tokenizers))

    def quarter_second_steps(model, batch, smoothing):
        if model.training:
            clock.now += 0.5  # every training step takes 0.5 s: 60 steps fit in 30 s
        return translation_loss(model, batch, smoothing)

    prepare_run_dir(tmp_path / "run", resume=False, overwrite=False)
    trainer = Trainer(config, model, data.train, data.valid, tmp_path / "run", loss_fn=quarter_second_steps,
                      timer=clock)
    state = trainer.fit()
    assert state.step == 60
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    assert [r["step"] for r in train] == [1, *range(10, 61, 10)]
    assert train[0]["lr"] == pytest.approx(1e-3)  # warmup: step 1 of 10
    assert all(a["lr"] > b["lr"] for a, b in itertools.pairwise(train[1:]))
    # Step 60 started at 29.5 s of the 30 (no step starts once the budget is spent): 98.3% of
    # the way through the cosine, 0.07% of the range above the minimum.
    progress = (29.5 / 30 * 1_000_000 - 10) / (1_000_000 - 10)
    assert train[-1]["lr"] == pytest.approx(1e-4 + 0.5 * (1e-2 - 1e-4) * (1 + math.cos(math.pi * progress)))
    assert train[-1]["lr"] < 1e-4 + 1e-3 * (1e-2 - 1e-4)


def test_the_dates_default_ends_at_the_minimum_within_a_short_budget(tmp_path):
    """A real `aiayn train` of the built-in dates task, timed by the real clock."""
    run_dir = tmp_path / "dates"
    overrides = {
        "train.max_minutes": 0.3, "train.max_steps": 1_000_000, "train.schedule": "cosine",
        "train.min_lr": 1e-4, "train.warmup": 10, "train.log_every": 5, "train.eval_every": 1_000_000,
        "train.progress": "none", "train.schedule_follows_budget": True,  # the recipe's own follows its steps
        "data.num_train": 4000, "data.num_valid": 50, "data.num_test": 50, "train.bleu_max_sentences": 50,
    }
    args = [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
    assert main(["train", "--out", str(run_dir), *args]) == 0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    # Up during the warmup, then down: on a slow machine the decay (by the clock) meets the warmup
    # earlier, so only the shape is certain; the end is: the minimum when the 18 s run out.
    peak = max(r["lr"] for r in train)
    assert train[0]["lr"] < peak and train[-1]["lr"] < peak / 5
    assert train[-1]["lr"] < 1e-4 + 0.01 * (3e-3 - 1e-4)
    assert train[-1]["step"] < 1_000_000 and train[-1]["elapsed_s"] < 0.3 * 60 + 5
    results = json.loads((run_dir / "results.json").read_text())
    assert results["final_lr"] == train[-1]["lr"] and results["steps"] == train[-1]["step"]


def test_a_resumed_run_continues_the_schedule_from_the_recorded_time(tmp_path, one_thread):
    """20 one-second steps of a 60 s budget, stopped by max_steps and resumed with the budget in
    charge: the first resumed step's rate is that of 20 s in, on a clock that restarts at 0."""
    clock = FakeTime()

    def one_second_steps(model, batch, smoothing):
        if model.training:
            clock.now += 1.0
        return translation_loss(model, batch, smoothing)

    def trainer(max_steps: int, resume: bool) -> Trainer:
        config = config_from_dict(tiny_config(max_steps=max_steps, max_minutes=1.0, log_every=1, **COSINE))
        prepare_run_dir(tmp_path / "run", resume=resume, overwrite=False)
        torch.manual_seed(config.train.seed)
        data = prepare_data(config.data)
        model = Transformer(build_model_config(config, data.tokenizers))
        return Trainer(config, model, data.train, data.valid, tmp_path / "run", loss_fn=one_second_steps,
                       timer=clock)

    first = trainer(20, resume=False)
    first.fit()
    assert first.clock.elapsed_s() == 20.0
    clock.now = 0.0  # a new process: its clock starts anew
    resumed = trainer(1_000_000, resume=True)
    resumed.fit(resume=True)
    assert resumed.clock.elapsed_s() == pytest.approx(60.0)  # the budget: 20 s before, 40 s now
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step_21 = next(r for r in rows if r["split"] == "train" and r["step"] == 21)
    progress = (20 / 60 * 1_000_000 - 10) / (1_000_000 - 10)  # 20 s of 60: a third of the decay
    assert step_21["lr"] == pytest.approx(1e-4 + 0.5 * (1e-2 - 1e-4) * (1 + math.cos(math.pi * progress)))
    assert step_21["elapsed_s"] == pytest.approx(21.0)
