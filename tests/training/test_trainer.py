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
        evaluate=lambda _model: {metric.name: next(scores)},
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
