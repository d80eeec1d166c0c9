"""`aiayn train` and `aiayn average` end to end, through the CLI entry point."""

from __future__ import annotations

import json

import yaml

from aiayn.cli.main import main
from aiayn.data.tokenizer import TokenizerPair
from aiayn.formats import load_model
from training.conftest import tiny_config


def write_config(tmp_path, data):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_train_writes_the_run_directory_layout(tmp_path, capsys):
    config = write_config(tmp_path, tiny_config())
    run_dir = tmp_path / "run"
    assert main(["train", str(config), "--out", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "held-out exact match:" in out and "%" in out
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "train_config.yaml",
        "metrics.jsonl",
        "results.json",
    ):
        assert (run_dir / name).is_file(), name
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_000006", "step_000012"]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    val = [r for r in records if r["split"] == "val"]
    assert {"step", "split", "loss", "lr", "tokens_per_s", "elapsed_s"} <= set(train[0])
    assert {"step", "split", "loss", "ppl", "bleu", "elapsed_s"} <= set(val[0])
    assert [r["step"] for r in val] == [6, 12]
    # The run directory is a model directory: model and tokenizer load from it.
    load_model(run_dir)
    TokenizerPair.load(run_dir)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == 12 and 0 <= results["test"]["exact_match"] <= 100


def test_existing_out_needs_resume_or_overwrite(tmp_path, capsys):
    config = write_config(tmp_path, tiny_config(max_steps=2, eval_every=2))
    run_dir = tmp_path / "run"
    assert main(["train", str(config), "--out", str(run_dir)]) == 0
    assert main(["train", str(config), "--out", str(run_dir)]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["train", str(config), "--out", str(run_dir), "--overwrite"]) == 0


def test_resume_continues_with_more_steps(tmp_path):
    config = write_config(tmp_path, tiny_config(max_steps=6))
    run_dir = tmp_path / "run"
    assert main(["train", str(config), "--out", str(run_dir)]) == 0
    assert main(["train", "--resume", str(run_dir), "--set", "train.max_steps=12"]) == 0
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) == 12 and steps == sorted(steps)


def test_average_command(tmp_path, capsys):
    config = write_config(tmp_path, tiny_config(max_steps=12, eval_every=4))
    run_dir = tmp_path / "run"
    assert main(["train", str(config), "--out", str(run_dir)]) == 0
    assert main(["average", str(run_dir), "--last", "3", "--out", str(tmp_path / "avg")]) == 0
    assert "averaged 3 checkpoints" in capsys.readouterr().out
    load_model(tmp_path / "avg")


def files_config(tmp_path, src_lines, tgt_lines):
    (tmp_path / "train.src").write_text(src_lines)
    (tmp_path / "train.tgt").write_text(tgt_lines)
    data = tiny_config()
    data["data"] = {
        "task": "files",
        "train_src": str(tmp_path / "train.src"),
        "train_tgt": str(tmp_path / "train.tgt"),
        "tokenizer": "char",
    }
    return write_config(tmp_path, data)


def test_mismatched_line_counts_name_both_files(tmp_path, capsys):
    config = files_config(tmp_path, "a b\nc d\ne f\n", "x\ny\n")
    assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "train.src" in err and "train.tgt" in err and "3" in err and "2" in err


def test_invalid_utf8_names_file_and_line(tmp_path, capsys):
    (tmp_path / "train.src").write_bytes(b"ok\nbad \xff byte\n")
    (tmp_path / "train.tgt").write_text("a\nb\n")
    data = tiny_config()
    data["data"] = {
        "task": "files",
        "train_src": str(tmp_path / "train.src"),
        "train_tgt": str(tmp_path / "train.tgt"),
        "tokenizer": "char",
    }
    assert main(["train", str(write_config(tmp_path, data)), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "train.src" in err and "line 2" in err


def test_files_task_paths_resolve_under_the_data_root(tmp_path, monkeypatch, capsys):
    root = tmp_path / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "train.src").write_text("a b\nc d\n" * 20)
    (root / "corpus" / "train.tgt").write_text("b a\nd c\n" * 20)
    monkeypatch.setenv("AIAYN_DATA_DIR", str(root))
    monkeypatch.chdir(tmp_path)
    data = tiny_config(max_steps=2, eval_every=2)
    data["data"] = {"task": "files", "train_src": "corpus/train.src", "train_tgt": "corpus/train.tgt",
                    "tokenizer": "char"}
    config = write_config(tmp_path, data)
    assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 0
    saved = yaml.safe_load((tmp_path / "run" / "train_config.yaml").read_text())
    assert saved["data"]["train_src"] == "corpus/train.src"

    data["data"]["train_tgt"] = "corpus/missing.tgt"
    config = write_config(tmp_path, data)
    assert main(["train", str(config), "--out", str(tmp_path / "run2")]) == 2
    err = capsys.readouterr().err
    assert "data.train_tgt not found: corpus/missing.tgt" in err and str(root) in err


def test_empty_file_is_an_error(tmp_path, capsys):
    config = files_config(tmp_path, "", "")
    assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 2
    assert "train.src" in capsys.readouterr().err


def test_unknown_config_key_is_an_error(tmp_path, capsys):
    data = tiny_config()
    data["train"]["warmpu"] = 3
    assert main(["train", str(write_config(tmp_path, data)), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "train.warmpu" in err and "warmup" in err
