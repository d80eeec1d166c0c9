"""`--init-from SOURCE` and `train.freeze` (issue 26): a run starts from a trained model's
weights, settings and tokenizer with a fresh optimizer and step counter; frozen groups keep
their weights; bad input is a one-line error naming what is at fault."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from aiayn.cli.main import main
from aiayn.formats import load_model
from aiayn.tasks import config_from_dict
from aiayn.training.checkpoint import load_training_state
from aiayn.training.init_from import freeze
from aiayn.training.run import run_task
from aiayn.translation.task import TRANSLATION_TASK

from .conftest import tiny_config


@pytest.fixture(scope="module")
def source_run(tmp_path_factory):
    """A tiny trained translation run directory (a model directory)."""
    run_dir = tmp_path_factory.mktemp("source") / "run"
    config = config_from_dict(tiny_config(max_steps=6, eval_every=6))
    run_task(TRANSLATION_TASK, config, run_dir)
    return run_dir


def _write_config(path, **train) -> str:
    path.write_text(yaml.safe_dump(tiny_config(**train)))
    return str(path)


def test_init_from_starts_from_the_weights_with_a_fresh_run(source_run, tmp_path):
    config = _write_config(tmp_path / "c.yaml", max_steps=2, eval_every=2)
    out = tmp_path / "fine"
    assert main(["train", config, "--out", str(out), "--init-from", str(source_run)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["init_from"] == str(source_run) and results["steps"] == 2  # the step count starts at 0
    model_json = json.loads((out / "config.json").read_text())
    assert model_json["config"]["extra"]["init_from"] == str(source_run)
    assert yaml.safe_load((out / "train_config.yaml").read_text())["train"]["init_from"] == str(source_run)
    assert (out / "tokenizer.json").read_text() == (source_run / "tokenizer.json").read_text()
    card = (out / "README.md").read_text()
    assert str(source_run) in card


def test_freeze_keeps_groups_unchanged_and_without_optimizer_state(source_run, tmp_path):
    config = _write_config(tmp_path / "c.yaml", max_steps=3, eval_every=3, freeze=["embeddings", "encoder"])
    out = tmp_path / "frozen"
    assert main(["train", config, "--out", str(out), "--init-from", str(source_run)]) == 0
    before, after = load_model(source_run).state_dict(), load_model(out).state_dict()
    for name in before:
        same = torch.equal(before[name], after[name])
        if name.startswith(("src_embedding.", "tgt_embedding.", "encoder.", "output_projection.")):
            assert same, name
        elif name.startswith("decoder.layers.0.feed_forward.linear1.weight"):
            assert not same, name
    results = json.loads((out / "results.json").read_text())
    assert 0 < results["trainable_params"] < results["params"]
    state = load_training_state(sorted((out / "checkpoints").iterdir())[-1])["optimizer"]
    trainable = [p for p in load_model(out).parameters() if p.requires_grad]
    frozen_model = load_model(out)
    freeze(frozen_model, ["embeddings", "encoder"])
    num_trainable = sum(1 for p in frozen_model.parameters() if p.requires_grad)
    assert len(state["param_groups"][0]["params"]) == num_trainable < len(trainable)
    assert len(state["state"]) == num_trainable


def test_freeze_groups_and_layer_ranges():
    from aiayn.model import ModelConfig, Transformer

    model = Transformer(ModelConfig.tiny(vocab_size=20))
    trainable, total = freeze(model, ["encoder.layers.0-1", "decoder.layers.1"])
    assert trainable < total
    assert all(not p.requires_grad for n, p in model.named_parameters() if n.startswith("encoder.layers."))
    assert all(p.requires_grad for n, p in model.named_parameters() if n.startswith("decoder.layers.0."))


@pytest.mark.parametrize(("args", "expected"), [
    (["--set", "model.d_model=128"], "model.d_model=128 contradicts --init-from"),
    (["--set", "train.freeze=[encoderz]"], "train.freeze: no parameter group 'encoderz'"),
    (["--set", "train.freeze=[encoder.layers.0-7]"], "train.freeze: no parameter group 'encoder.layers.0-7'"),
    (["--set", "data.tokenizer=/no/tokenizer.json"], "data.tokenizer /no/tokenizer.json contradicts"),
])
def test_bad_input_is_one_line_naming_the_key(source_run, tmp_path, capsys, args, expected):
    config = _write_config(tmp_path / "c.yaml", max_steps=1)
    code = main(["train", config, "--out", str(tmp_path / "x"), "--init-from", str(source_run), *args])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and expected in error[-1], error


def test_init_from_what_is_not_a_model(tmp_path, capsys, monkeypatch):
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as without network, and without waiting
    config = _write_config(tmp_path / "c.yaml", max_steps=1)
    (tmp_path / "empty").mkdir()
    for source, expected in [
        (tmp_path / "empty", "not a model directory"),
        ("nobody-xyz/not-a-model", "cannot be downloaded from the Hugging Face Hub"),
    ]:
        args = ["--out", str(tmp_path / "y"), "--overwrite", "--init-from", str(source)]
        code = main(["train", config, *args])
        error = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and expected in error[-1] and f"--init-from {source}" in error[-1], error


def test_a_language_model_is_not_a_translation_source(tmp_path, capsys):
    from aiayn import formats
    from aiayn.data import Tokenizer
    from aiayn.model import DecoderOnlyLM, ModelConfig

    tokenizer = Tokenizer.train("char", ["abc def"])
    formats.save_pretrained(DecoderOnlyLM(ModelConfig.tiny(vocab_size=tokenizer.vocab_size)), tmp_path / "lm")
    tokenizer.save(tmp_path / "lm" / "tokenizer.json")
    config = _write_config(tmp_path / "c.yaml", max_steps=1)
    assert main(["train", config, "--out", str(tmp_path / "z"), "--init-from", str(tmp_path / "lm")]) == 2
    assert "holds a 'decoder_only' model" in capsys.readouterr().err


def test_tokenizer_larger_than_the_model_is_refused_naming_the_file(source_run, tmp_path, capsys):
    import shutil

    from aiayn.data import Tokenizer

    shutil.copytree(source_run, tmp_path / "src", ignore=shutil.ignore_patterns("checkpoints"))
    Tokenizer.train("char", ["abcdefghijklmnopqrstuvwxyz0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ!?.,;:"]).save(
        tmp_path / "src" / "tokenizer.json")
    config = _write_config(tmp_path / "c.yaml", max_steps=1)
    assert main(["train", config, "--out", str(tmp_path / "w"), "--init-from", str(tmp_path / "src")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "tokenizer.json" in error and "has no row in the source embedding of" in error, error
