"""The Trainer is task-agnostic: the `Metric` says which way is better, the loss is given."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from aiayn.core.errors import ConfigError
from aiayn.model import Transformer
from aiayn.training.loss import translation_loss
from aiayn.training.run_dir import prepare_run_dir
from aiayn.training.task import Metric
from aiayn.training.trainer import Trainer
from aiayn.translation.data import prepare_data
from aiayn.translation.task import build_model_config

SCORES = [1.0, 3.0, 2.0, 5.0, 4.0, 0.5]  # one per validation, at steps 1..6


def scripted_trainer(config, run_dir, metric: Metric) -> Trainer:
    prepare_run_dir(run_dir, resume=False, overwrite=False)
    torch.manual_seed(config.train.seed)
    data = prepare_data(config.data)
    model = Transformer(build_model_config(config, data.tokenizers))
    scores = iter(SCORES)
    return Trainer(
        config,
        model,
        data.train,
        data.valid,
        run_dir,
        loss_fn=translation_loss,
        evaluate=lambda _model, **_caps: {metric.name: next(scores)},
        metrics=(metric,),
    )


@pytest.mark.parametrize(("higher_is_better", "best_step"), [(True, 4), (False, 6)])
def test_best_model_follows_the_metric_direction(tmp_path, make_config, higher_is_better, best_step):
    config = make_config(max_steps=6, eval_every=1, keep_checkpoints=6, validation_metric="score")
    run_dir = tmp_path / "run"
    trainer = scripted_trainer(config, run_dir, Metric("score", higher_is_better))
    state = trainer.fit()
    assert (state.best_step, state.best_metric) == (best_step, SCORES[best_step - 1])
    best = load_file(str(run_dir / "model.safetensors"))
    saved = load_file(str(run_dir / "checkpoints" / f"step_{best_step:06d}" / "model.safetensors"))
    assert all(torch.equal(best[name], saved[name]) for name in saved)
    final = load_file(str(run_dir / "checkpoints" / "step_000006" / "model.safetensors"))
    assert best_step == 6 or not all(torch.equal(best[name], final[name]) for name in final)
    # Validations since the best one that did not beat it.
    assert state.evals_without_improvement == 6 - best_step


def test_a_metric_the_task_does_not_report_is_refused(tmp_path, make_config):
    config = make_config(validation_metric="bleu")
    with pytest.raises(ConfigError, match="train.validation_metric must be one of loss, ppl, score"):
        scripted_trainer(config, tmp_path / "run", Metric("score", True))


def test_a_gradient_scaler_step_is_the_unscaled_step_and_an_overflow_only_lowers_the_scale(
    tmp_path, make_config, one_thread
):
    """fp16's path through `train_step` (CUDA's; a CPU scaler here, on fp32 arithmetic): scaling by a
    power of two and back changes no bit of the update, and an overflow skips the step and halves
    the scale without counting as a bad step."""
    config = make_config()

    def trainer_at(scale: float | None, name: str) -> Trainer:
        trainer = scripted_trainer(config, tmp_path / name, Metric("score", True))
        trainer.scaler = None if scale is None else torch.amp.GradScaler("cpu", init_scale=scale)
        return trainer

    batches = [next(iter(trainer_at(None, "probe").train_data.batches(400, shuffle=False)))]
    plain, scaled = trainer_at(None, "plain"), trainer_at(2.0**10, "scaled")
    for trainer in (plain, scaled):
        torch.manual_seed(5)  # the same dropout
        assert trainer.train_step(batches, elapsed_s=0.0) is not None
    pairs = zip(plain.model.parameters(), scaled.model.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    overflowing = trainer_at(2.0**100, "overflow")

    def huge_loss(model, batch, smoothing):  # gradients of ~1e30, x 2^100: past float32's range
        loss, count = translation_loss(model, batch, smoothing)
        return loss * 1e30, count

    overflowing.step_loss = huge_loss
    before = [p.detach().clone() for p in overflowing.model.parameters()]
    assert overflowing.train_step(batches, elapsed_s=0.0) is None
    assert overflowing.scaler.get_scale() == 2.0**99 and overflowing.state.skipped_steps == 0
    assert overflowing.state.step == 0 and overflowing.consecutive_bad_steps == 0
    assert all(torch.equal(a, b) for a, b in zip(before, overflowing.model.parameters(), strict=True))
