"""Settings at `auto` (`model.dropout`, `train.batch_tokens`): the rules, the epoch and update
estimates, and a number given by hand winning."""

from __future__ import annotations

import json
import logging

import pytest
import torch
import yaml

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.model import Transformer
from aiayn.tasks import config_from_dict
from aiayn.training import auto_settings
from aiayn.training import precision as precision_module
from aiayn.training.auto_settings import (
    BATCH_TOKENS_CHOICES,
    ENOUGH_STEPS,
    batch_tokens_for_steps,
    choose_auto_settings,
    dropout_for_epochs,
    expected_epochs,
    take_auto_settings,
)
from aiayn.training.distributed import DistContext
from aiayn.training.loss import translation_loss
from aiayn.training.memory import MemoryFit
from aiayn.translation.data import prepare_data
from aiayn.translation.task import build_model_config

from .conftest import tiny_config


def test_the_rule_picks_dropout_by_expected_epochs():
    assert [dropout_for_epochs(e) for e in (1, 12, 19.9, 20, 36, 200)] == [0.2, 0.2, 0.2, 0.3, 0.3, 0.3]


def test_expected_epochs_within_the_first_budget_to_run_out():
    # Multi30k-like: 160 batches of ~2,600 target tokens an epoch, 60 minutes.
    slow = expected_epochs(1_450, 2_600, 160, budget_s=3600, max_steps=8000, max_epochs=None)
    fast = expected_epochs(4_800, 2_600, 160, budget_s=3600, max_steps=8000, max_epochs=None)
    assert slow == pytest.approx(1_450 * 3600 / (2_600 * 160)) and 12 < slow < 13
    assert fast == pytest.approx(4_800 * 3600 / (2_600 * 160)) and 41 < fast < 42
    assert expected_epochs(1e9, 2_600, 160, budget_s=3600, max_steps=8000, max_epochs=None) == 50  # steps
    assert expected_epochs(1e9, 2_600, 160, budget_s=3600, max_steps=8000, max_epochs=7) == 7
    assert expected_epochs(1e9, 2_600, 160, budget_s=None, max_steps=800, max_epochs=None,
                           batches_per_step=2) == 10  # accumulation: 2 batches a step
    with pytest.raises(ConfigError, match="auto' need a budget"):
        expected_epochs(1_000, 2_600, 160, budget_s=None, max_steps=None, max_epochs=None)


def test_config_accepts_auto_for_dropout_only():
    config = config_from_dict(tiny_config() | {"model": {"preset": "tiny", "dropout": "auto"}})
    assert config.model.overrides["dropout"] == "auto"
    with pytest.raises(ConfigError, match="model.d_model must be int"):
        config_from_dict(tiny_config() | {"model": {"preset": "tiny", "d_model": "auto"}})
    with pytest.raises(ConfigError, match="model.dropout must be float"):
        config_from_dict(tiny_config() | {"model": {"preset": "tiny", "dropout": "lots"}})


def test_the_batch_rule_keeps_the_large_batch_while_it_gives_enough_updates():
    large, small = BATCH_TOKENS_CHOICES
    fast = {large: 6_400, small: 12_800}  # the fast machine's 60 minutes
    slow = {large: 2_300, small: 4_600}  # one fp32 thread
    very_slow = {large: 1_000, small: 2_000}  # one fp32 thread, 30 minutes
    assert batch_tokens_for_steps(fast) == large
    assert batch_tokens_for_steps({large: ENOUGH_STEPS, small: 2 * ENOUGH_STEPS}) == large
    assert batch_tokens_for_steps(slow) == small
    assert batch_tokens_for_steps(very_slow) == small  # neither reaches enough: the most updates
    assert batch_tokens_for_steps({large: 800, small: 800}) == large  # a step budget: equal updates


def test_config_accepts_auto_for_batch_tokens():
    config = config_from_dict(tiny_config(batch_tokens="auto"))
    assert config.train.batch_tokens == "auto"
    assert config_from_dict(tiny_config(batch_tokens=1234)).train.batch_tokens == 1234
    with pytest.raises(ConfigError, match="train.batch_tokens must be a number or 'auto', got 'lots'"):
        config_from_dict(tiny_config(batch_tokens="lots"))
    with pytest.raises(ConfigError, match="train.batch_tokens"):
        config_from_dict(tiny_config(batch_tokens=0))
    with pytest.raises(ConfigError, match="train.lr must be float, got 'auto'"):
        config_from_dict(tiny_config(lr="auto"))  # only the settings that say so take 'auto'
    with pytest.raises(ConfigError, match="train.warmup must be a step count or a share"):
        config_from_dict(tiny_config(warmup="automatic"))


@pytest.mark.parametrize("tokens_per_s", [10.0, 1e7])
def test_choose_batch_tokens_follows_the_measured_speed(monkeypatch, tokens_per_s, caplog):
    """Slow: the large batch would give few updates, so the small one is chosen; fast: the large."""
    config = auto_config(batch_tokens="auto", max_minutes=1.0)
    data = prepare_data(config.data)
    timed_with = []

    def fake_timing(model, batches, loss_fn, smoothing, device, precisions, **kwargs):
        timed_with.append(config.train.batch_tokens)
        return {p: (10.0, int(tokens_per_s * 10)) for p in precisions}

    monkeypatch.setattr(auto_settings, "measure_training_steps", fake_timing)
    assert take_auto_settings(config) == ("train.batch_tokens", "model.dropout")  # in the order chosen
    assert config.train.batch_tokens == BATCH_TOKENS_CHOICES[0]  # timed with the largest
    with caplog.at_level(logging.INFO, logger="aiayn.training.auto_settings"):
        choice = choose_auto_settings(
            config, ("model.dropout", "train.batch_tokens"),
            lambda: Transformer(build_model_config(config, data.tokenizers)), data.train,
            translation_loss, torch.device("cpu"), DistContext(),
        )
    assert timed_with == [BATCH_TOKENS_CHOICES[0]]  # timed once, with the largest
    assert choice.steps.keys() == set(BATCH_TOKENS_CHOICES)
    for batch_tokens, steps in choice.steps.items():  # the time budget's updates with each batch
        probe = auto_settings.probe_batches(data.train, batch_tokens, config.train.seed)
        per_batch = sum(b.num_targets for b in probe) / len(probe)
        assert steps == pytest.approx(tokens_per_s * 60 / per_batch)
    expected = BATCH_TOKENS_CHOICES[0] if tokens_per_s > 1e6 else BATCH_TOKENS_CHOICES[1]
    assert choice.batch_tokens == expected == config.train.batch_tokens
    assert choice.batch_tokens == batch_tokens_for_steps(choice.steps)
    assert choice.dropout == dropout_for_epochs(choice.epochs) == config.model.overrides["dropout"]
    assert f"batch_tokens {expected}" in caplog.text


def test_train_with_auto_batch_records_the_choice_and_a_number_wins(tmp_path, monkeypatch):
    def slow_timing(model, batches, loss_fn, smoothing, device, precisions, **kwargs):
        return {p: (1000.0, 1) for p in precisions}  # 0.001 target tokens/s: few updates with either

    monkeypatch.setattr(auto_settings, "measure_training_steps", slow_timing)
    config = write_config(tmp_path / "auto.yaml", 0.1, batch_tokens="auto")
    assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 0
    saved = yaml.safe_load((tmp_path / "run" / "train_config.yaml").read_text())
    assert saved["train"]["batch_tokens"] == BATCH_TOKENS_CHOICES[-1]  # a resumed run reads the number
    assert saved["model"]["dropout"] == 0.1  # not auto: as given

    def no_timing(*args, **kwargs):
        raise AssertionError("a batch given by hand is not measured for")

    monkeypatch.setattr(auto_settings, "measure_training_steps", no_timing)
    run2 = tmp_path / "run2"
    assert main(["train", str(config), "--out", str(run2), "--set", "train.batch_tokens=777"]) == 0
    assert yaml.safe_load((run2 / "train_config.yaml").read_text())["train"]["batch_tokens"] == 777


def auto_config(**train):
    return config_from_dict(
        tiny_config(**{"max_minutes": 60.0, "max_steps": None} | train)
        | {"model": {"preset": "tiny", "dropout": "auto", "max_len": 64}}
    )


@pytest.mark.parametrize("tokens_per_s", [10.0, 5_000.0])
def test_choose_dropout_follows_the_measured_speed(monkeypatch, tokens_per_s, caplog):
    config = auto_config()
    data = prepare_data(config.data)
    measured = []

    def fake_timing(model, batches, loss_fn, smoothing, device, precisions, **kwargs):
        measured.append(list(precisions))
        return {p: (10.0, int(tokens_per_s * 10)) for p in precisions}  # 10 s of tokens_per_s

    monkeypatch.setattr(auto_settings, "measure_training_steps", fake_timing)
    assert take_auto_settings(config) == ("model.dropout",)
    assert config.model.overrides["dropout"] == 0.3  # the placeholder
    with caplog.at_level(logging.INFO, logger="aiayn.training.auto_settings"):
        choice = choose_auto_settings(
            config, ("model.dropout",), lambda: Transformer(build_model_config(config, data.tokenizers)),
            data.train, translation_loss, torch.device("cpu"), DistContext(),
        )
    dropout = choice.dropout
    batches = auto_settings.probe_batches(data.train, config.train.batch_tokens, config.train.seed)
    per_batch = sum(b.num_targets for b in batches) / len(batches)
    per_epoch = data.train.num_batches(config.train.batch_tokens, seed=config.train.seed, epoch=0)
    epochs = tokens_per_s * 3600 / (per_batch * per_epoch)
    assert dropout == dropout_for_epochs(epochs) == config.model.overrides["dropout"]
    assert choice.epochs == pytest.approx(epochs) and choice.tokens_per_s == pytest.approx(tokens_per_s)
    assert choice.precision == "fp32"
    assert measured == [["fp32"]]  # tiny_config sets fp32: timed in that precision alone
    assert f"model.dropout auto: expected {epochs:.0f} epochs: dropout {dropout:g}" in caplog.text
    assert "train.batch_tokens auto" not in caplog.text and choice.steps.keys() == {config.train.batch_tokens}
    assert dropout == (0.2 if tokens_per_s == 10.0 else 0.3)  # a few epochs of the tiny set, or hundreds


def write_config(path, dropout, **train):
    data = tiny_config(**{"max_steps": 2, "eval_every": 2, "max_minutes": 60.0} | train)
    data["model"]["dropout"] = dropout
    path.write_text(yaml.safe_dump(data))
    return path


def test_train_with_auto_dropout_records_the_choice(tmp_path, monkeypatch, caplog):
    """The speed timed for the dropout is the precision timing too: the Trainer does not time again."""

    def fake_timing(model, batches, loss_fn, smoothing, device, precisions, **kwargs):
        assert precisions == ["fp32", "bf16"]
        return {"fp32": (1.0, 1), "bf16": (1.0, 2)}  # 1 and 2 target tokens/s: very few epochs

    def no_second_timing(*args, **kwargs):
        raise AssertionError("train.precision auto was timed again")

    monkeypatch.setattr(auto_settings, "measure_training_steps", fake_timing)
    monkeypatch.setattr(auto_settings, "bf16_worth_measuring", lambda device: True)
    monkeypatch.setattr(precision_module, "measure_precision", no_second_timing)
    config = write_config(tmp_path / "auto.yaml", "auto", precision="auto")
    with caplog.at_level(logging.INFO, logger="aiayn.training"):
        assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 0
    assert "timed at fp32 1, bf16 2 target tokens/s, using bf16" in caplog.text
    assert "expected 0 epochs: dropout 0.2" in caplog.text
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["precision"] == "bf16"
    # What the settings were chosen for, against what the run did: within the run's 2 steps.
    expected = results["expected_updates"]
    assert expected["reached"] == results["steps"] == 2 and 0 < expected["expected"] <= 2
    assert expected["share"] == pytest.approx(2 / expected["expected"], rel=1e-3)
    assert f"updates: expected {expected['expected']:,.0f} at start-up" in caplog.text
    saved = yaml.safe_load((tmp_path / "run" / "train_config.yaml").read_text())
    assert saved["model"]["dropout"] == 0.2  # a resumed run reads the number
    assert json.loads((tmp_path / "run" / "config.json").read_text())["config"]["dropout"] == 0.2


def test_a_number_wins_over_the_rule(tmp_path, monkeypatch):
    def no_timing(*args, **kwargs):
        raise AssertionError("a dropout given by hand is not measured for")

    monkeypatch.setattr(auto_settings, "measure_training_steps", no_timing)
    config = write_config(tmp_path / "fixed.yaml", 0.25)
    assert main(["train", str(config), "--out", str(tmp_path / "run"), "--set", "model.dropout=0.15"]) == 0
    assert yaml.safe_load((tmp_path / "run" / "train_config.yaml").read_text())["model"]["dropout"] == 0.15
    auto = write_config(tmp_path / "auto.yaml", "auto")
    assert main(["train", str(auto), "--out", str(tmp_path / "run2"), "--set", "model.dropout=0.25"]) == 0
    assert json.loads((tmp_path / "run2" / "config.json").read_text())["config"]["dropout"] == 0.25


def test_on_a_gpu_the_batch_is_the_largest_that_fits_and_gives_enough_updates(monkeypatch, caplog):
    config = auto_config(batch_tokens="auto", max_minutes=60.0)
    data = prepare_data(config.data)
    probed, timed_with = [], []

    def fake_probe(build_model, batch, batch_tokens, loss_fn, smoothing, device):
        probed.append(batch_tokens)
        return MemoryFit(free_bytes=8e9, fixed_bytes=1e9, bytes_per_token=2e5)  # room for 27,000 tokens

    def fast_timing(model, batches, loss_fn, smoothing, device, precisions, **kwargs):
        timed_with.append(config.train.batch_tokens)
        return {p: (1.0, 10**7) for p in precisions}  # plenty of updates with any batch

    monkeypatch.setattr(auto_settings, "measure_training_steps", fast_timing)
    take_auto_settings(config)
    with caplog.at_level(logging.INFO, logger="aiayn.training.auto_settings"):
        choice = choose_auto_settings(
            config, ("train.batch_tokens", "model.dropout"),
            lambda: Transformer(build_model_config(config, data.tokenizers)), data.train, translation_loss,
            torch.device("cpu"), DistContext(), memory_probe=fake_probe,
        )
    assert probed == [3000]  # one step of the smallest batch measures the memory
    assert timed_with == [24576]  # timed with the largest that fits
    assert choice.batch_tokens == 24576 == config.train.batch_tokens
    assert set(choice.steps) == {24576, 16384, 12288, 8192, 6144, 4096, 3000}
    assert "batches of up to 24,576 tokens fit in 8.0 GB free" in caplog.text
