"""Resume equivalence, atomic checkpoint writes, averaging."""

from __future__ import annotations

import json

import pytest
import torch

from aiayn.core.errors import CheckpointError
from aiayn.formats import load_model
from aiayn.model import Transformer
from aiayn.training import checkpoint as checkpoint_module
from aiayn.training.checkpoint import average_checkpoints, list_checkpoints, load_training_state
from aiayn.training.loss import translation_loss
from aiayn.training.run_dir import prepare_run_dir
from aiayn.training.trainer import Trainer
from aiayn.translation.data import prepare_data
from aiayn.translation.task import build_model_config


def make_trainer(config, run_dir, resume=False):
    prepare_run_dir(run_dir, resume=resume, overwrite=False)
    torch.manual_seed(config.train.seed)
    data = prepare_data(config.data)
    model = Transformer(build_model_config(config, data.tokenizers))
    save = data.tokenizers.save
    return Trainer(config, model, data.train, data.valid, run_dir, loss_fn=translation_loss, save_extra=save)


def train_losses(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines) if r["split"] == "train"}


def test_interrupted_and_resumed_run_matches_uninterrupted(tmp_path, make_config):
    full = make_trainer(make_config(max_steps=12, log_every=1), tmp_path / "full")
    full.fit()
    first = make_trainer(make_config(max_steps=6, log_every=1), tmp_path / "split")
    first.fit()
    assert [p.name for p in list_checkpoints(tmp_path / "split")] == ["step_000006"]
    resumed = make_trainer(make_config(max_steps=12, log_every=1), tmp_path / "split", resume=True)
    state = resumed.fit(resume=True)
    assert state.step == 12
    assert train_losses(tmp_path / "full") == train_losses(tmp_path / "split")
    for (name, a), b in zip(
        full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_crash_inside_a_save_leaves_previous_checkpoint_loadable(tmp_path, make_config, monkeypatch):
    trainer = make_trainer(make_config(max_steps=6), tmp_path / "run")
    trainer.fit()
    before = list_checkpoints(tmp_path / "run")
    assert [p.name for p in before] == ["step_000006"]

    def crash(obj, path, *args, **kwargs):
        with open(path, "wb") as handle:
            handle.write(b"partial")  # a half-written file, then the "crash"
        raise OSError("disk died")

    monkeypatch.setattr(checkpoint_module.torch, "save", crash)
    trainer.state.step = 7
    with pytest.raises(CheckpointError, match="disk died"):
        trainer.save_checkpoint()
    after = list_checkpoints(tmp_path / "run")
    assert after == before
    assert load_training_state(after[-1])["train_state"]["step"] == 6
    load_model(after[-1])  # the weights of the previous checkpoint still load


def test_only_the_last_k_checkpoints_are_kept(tmp_path, make_config):
    trainer = make_trainer(make_config(max_steps=12, eval_every=2, keep_checkpoints=3), tmp_path / "run")
    trainer.fit()
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == [
        "step_000008",
        "step_000010",
        "step_000012",
    ]


def test_average_of_checkpoints_is_the_mean(tmp_path, make_config):
    trainer = make_trainer(make_config(max_steps=12, eval_every=4), tmp_path / "run")
    trainer.fit()
    chosen = average_checkpoints(tmp_path / "run", last=2, out=tmp_path / "avg")
    assert [p.name for p in chosen] == ["step_000008", "step_000012"]
    averaged = load_model(tmp_path / "avg").state_dict()
    a, b = (load_model(p).state_dict() for p in chosen)
    for name, tensor in averaged.items():
        torch.testing.assert_close(tensor, (a[name] + b[name]) / 2)
    assert (tmp_path / "avg" / "tokenizer.json").is_file()


def test_average_without_checkpoints_is_an_error(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoints"):
        average_checkpoints(tmp_path, last=5, out=tmp_path / "avg")


def test_training_state_is_loaded_safely(tmp_path):
    class Evil:
        def __reduce__(self):
            return (exec, ("import os; os.environ['AIAYN_PWNED'] = '1'",))

    import os
    import pickle

    (tmp_path / "training_state.pt").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(CheckpointError, match="refused"):
        load_training_state(tmp_path)
    assert "AIAYN_PWNED" not in os.environ
