"""`aiayn prepare CONFIG`: the token store alone; a later `aiayn train` finds it."""

from __future__ import annotations

import json

import yaml

from aiayn.cli.main import main

CONFIG = {
    "data": {"task": "copy", "num_train": 300, "num_valid": 10, "num_test": 10, "tokenizer": "char"},
    "model": {"preset": "tiny", "max_len": 64, "dropout": 0.0},
    "train": {
        "max_steps": 2, "batch_tokens": 300, "eval_every": 2, "progress_bar": False, "threads": 1,
        "device": "cpu", "precision": "fp32", "bleu_max_sentences": 2, "test_max_sentences": 2, "warmup": 1,
    },
}  # fmt: skip


def test_prepare_then_train_reuses_the_store(tmp_path, capsys):
    config = tmp_path / "copy.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    cache = tmp_path / "cache"
    assert main(["prepare", str(config), "--set", f"data.cache_dir={cache}"]) == 0
    out = capsys.readouterr().out
    directory = out.splitlines()[0].removeprefix("token store: ")
    assert json.loads(out.splitlines()[1])["num_pairs"] == 300
    made = (cache / directory.rsplit("/", 1)[-1] / "src_ids.bin").stat().st_mtime_ns
    args = ["train", str(config), "--out", str(tmp_path / "run"), "--set", f"data.cache_dir={cache}"]
    assert main(args) == 0
    assert "found, not re-encoded" in (tmp_path / "run" / "train.log").read_text()
    assert (cache / directory.rsplit("/", 1)[-1] / "src_ids.bin").stat().st_mtime_ns == made
    assert main(["train", "--resume", str(tmp_path / "run"), "--set", "train.max_steps=4"]) == 0
    assert (tmp_path / "run" / "train.log").read_text().count("found, not re-encoded") == 2


def test_prepare_reports_a_long_preparation_in_plain_lines(tmp_path, capsys, monkeypatch):
    """A store of more than 500 pairs shows its progress on stderr (plain lines to a file, no
    carriage return, one per chunk here); a short one, or one found in the cache, shows none."""
    monkeypatch.setattr("aiayn.core.progress_display.DEFAULT_INTERVAL_S", 0.0)
    monkeypatch.setattr("aiayn.data.pair_store.ENCODE_CHUNK", 250)
    config = tmp_path / "copy.yaml"
    config.write_text(yaml.safe_dump(CONFIG | {"data": CONFIG["data"] | {"num_train": 600}}))
    cache = ["--set", f"data.cache_dir={tmp_path / 'cache'}"]
    assert main(["prepare", str(config), *cache]) == 0
    err = capsys.readouterr().err
    shown = [line for line in err.splitlines() if line.startswith("prepare")]
    assert "\r" not in err and shown[-1].endswith("(done)")
    assert [line.split(" | ")[1] for line in shown[:-1]] == [
        f"{100 * done / 600:5.1f}% of 600 pairs" for done in (250, 500, 600)
    ]
    assert main(["prepare", str(config), *cache]) == 0  # found: nothing to show
    assert not [line for line in capsys.readouterr().err.splitlines() if line.startswith("prepare")]


def test_prepare_refuses_a_classifier_config(tmp_path, capsys):
    config = tmp_path / "brackets.yaml"
    config.write_text(yaml.safe_dump({"data": {"task": "brackets"}}))
    assert main(["prepare", str(config)]) == 2
    assert "has no token store to prepare" in capsys.readouterr().err
