"""Non-finite losses and gradients are caught at once: the step is skipped (weights and
optimizer untouched) and counted; K consecutive bad steps stop training with a clear error."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from aiayn.cli.main import main
from aiayn.core.errors import TrainingError
from aiayn.model import Transformer
from aiayn.tasks import config_from_dict
from aiayn.training import loss as loss_module
from aiayn.training.checkpoint import list_checkpoints, load_training_state
from aiayn.training.loss import translation_loss
from aiayn.training.run_dir import prepare_run_dir
from aiayn.training.trainer import Trainer
from aiayn.translation.data import prepare_data
from aiayn.translation.task import build_model_config

from .conftest import tiny_train_config, write_config


class BadLoss:
    """`translation_loss`, except that the training calls listed in `bad` (1-based) return a
    NaN loss, or (with `where="grad"`) a finite loss whose gradient is NaN."""

    def __init__(self, bad: set[int], where: str = "loss") -> None:
        self.bad, self.where, self.calls = bad, where, 0

    def __call__(self, model, batch, smoothing):
        loss, tokens = translation_loss(model, batch, smoothing)
        if not model.training:  # validation: leave alone
            return loss, tokens
        self.calls += 1
        if self.calls in self.bad:
            if self.where == "loss":
                loss = loss * float("nan")
            else:
                loss.register_hook(lambda grad: grad * float("nan"))
        return loss, tokens


def make_trainer(tmp_path, loss_fn, **train) -> Trainer:
    config = config_from_dict(tiny_train_config(**train))
    prepare_run_dir(tmp_path / "run", resume=False, overwrite=False)
    torch.set_num_threads(1)  # restored by the autouse fixture
    torch.manual_seed(config.train.seed)
    data = prepare_data(config.data)
    model = Transformer(build_model_config(config, data.tokenizers))
    return Trainer(config, model, data.train, data.valid, tmp_path / "run", loss_fn=loss_fn)


def snapshot(trainer: Trainer) -> tuple[dict, dict]:
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    return weights, copy.deepcopy(trainer.optimizer.state_dict())


def assert_unchanged(trainer: Trainer, before: tuple[dict, dict]) -> None:
    weights, optimizer = before
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor, weights[name]), f"{name} changed on a skipped step"
    now = trainer.optimizer.state_dict()
    assert now["state"].keys() == optimizer["state"].keys()
    for key, entry in optimizer["state"].items():
        for name, value in entry.items():
            assert torch.equal(torch.as_tensor(now["state"][key][name]), torch.as_tensor(value))
    assert all(p.grad is None for p in trainer.model.parameters())  # nothing left to leak


@pytest.mark.parametrize("where", ["loss", "grad"])
def test_bad_step_is_skipped_without_touching_weights_or_optimizer(tmp_path, where):
    trainer = make_trainer(tmp_path, BadLoss({2, 3}, where))
    batches = trainer._batches()
    assert trainer.train_step([next(batches)]) is not None  # step 1: fine
    before = snapshot(trainer)
    for skipped in (1, 2):
        assert trainer.train_step([next(batches)]) is None
        assert_unchanged(trainer, before)
        assert (trainer.state.step, trainer.state.skipped_steps) == (1, skipped)
        assert trainer.consecutive_bad_steps == skipped
    assert trainer.train_step([next(batches)]) is not None  # a good step resets the streak
    assert (trainer.state.step, trainer.state.skipped_steps, trainer.consecutive_bad_steps) == (2, 2, 0)
    changed = any(not torch.equal(v, before[0][k]) for k, v in trainer.model.state_dict().items())
    assert changed, "a good step after bad ones must update the weights"


def test_scattered_bad_steps_are_counted_and_training_finishes(tmp_path):
    trainer = make_trainer(tmp_path, BadLoss({2, 5, 6}), max_steps=8, max_bad_steps=3)
    state = trainer.fit()
    assert (state.step, state.skipped_steps) == (8, 3)
    saved = load_training_state(list_checkpoints(tmp_path / "run")[-1])
    assert saved["train_state"]["skipped_steps"] == 3
    for name, tensor in trainer.model.state_dict().items():
        assert torch.isfinite(tensor).all(), name


def test_consecutive_bad_steps_stop_training_with_a_clear_error(tmp_path):
    trainer = make_trainer(tmp_path, BadLoss({3, 4, 5, 6}), max_steps=20, max_bad_steps=3)
    with pytest.raises(TrainingError, match=r"3 consecutive steps .*non-finite.*train\.max_bad_steps=3"):
        trainer.fit()
    assert trainer.state.step == 2 and trainer.state.skipped_steps == 3


def test_cli_reports_non_finite_training_without_traceback(tmp_path, monkeypatch, capsys):
    def nan_loss(hidden, weight, labels, smoothing):
        return (hidden.float().sum() + weight.sum()) * float("nan")

    monkeypatch.setattr(loss_module, "projected_label_smoothed_nll", nan_loss)
    config = write_config(tmp_path / "config.yaml", max_bad_steps=4)
    code = main(["train", str(config), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert "aiayn train: error: 4 consecutive steps had a non-finite loss or gradient" in err
    assert "train.max_bad_steps=4" in err and "Traceback" not in err
    assert "step 1: non-finite loss; step skipped (4 skipped so far, 4 in a row)" in err


def test_cli_run_with_a_few_bad_steps_reports_them(tmp_path, monkeypatch, capsys):
    real = loss_module.projected_label_smoothed_nll
    calls = {"n": 0}

    def sometimes_nan(hidden, weight, labels, smoothing):
        loss = real(hidden, weight, labels, smoothing)
        if smoothing > 0:  # training (validation uses no smoothing)
            calls["n"] += 1
            if calls["n"] in (3, 7):
                return loss * float("nan")
        return loss

    monkeypatch.setattr(loss_module, "projected_label_smoothed_nll", sometimes_nan)
    config = write_config(tmp_path / "config.yaml", max_steps=10)
    assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert (results["steps"], results["skipped_steps"]) == (10, 2)
    assert "non-finite loss; step skipped" in capsys.readouterr().err
