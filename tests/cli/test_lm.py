"""`aiayn lm train` and `aiayn lm generate` end to end, through the CLI entry point."""

import json

import pytest
import yaml

from aiayn import formats
from aiayn.cli.lm import DEFAULT_CONFIG
from aiayn.cli.main import main
from aiayn.data.tokenizer import Tokenizer
from aiayn.model import DecoderOnlyLM
from aiayn.tasks import load_config

TEXT = "".join(
    f"To be, or not to be, that is question {i}.\nWhether 'tis nobler in the mind.\n" for i in range(30)
)
TINY_FIELDS = {
    "model.preset": "tiny", "model.d_model": 32, "model.d_ff": 64, "model.num_decoder_layers": 1,
    "data.block_size": 16, "train.batch_tokens": 128, "train.max_steps": 4, "train.eval_every": 2,
    "train.log_every": 1, "train.progress_bar": "false", "train.warmup": 2, "train.threads": 1,
}  # fmt: skip
TINY = [arg for key, value in TINY_FIELDS.items() for arg in ("--set", f"{key}={value}")]


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "play.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_train_resume_and_generate(tmp_path, text_file, capsys):
    run_dir = tmp_path / "run"
    assert main(["lm", "train", "--text", str(text_file), "--out", str(run_dir), *TINY]) == 0
    out = capsys.readouterr().out
    assert "validation loss" in out and "sample:" in out
    for name in ("config.json", "model.safetensors", "tokenizer.json", "train_config.yaml", "results.json"):
        assert (run_dir / name).is_file(), name
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_000002", "step_000004"]
    val = [r for r in records(run_dir) if r["split"] == "val"]
    assert [r["step"] for r in val] == [2, 4] and all(r["loss"] > 0 for r in val)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == 4 and results["val_loss"] == min(r["loss"] for r in val)
    # The run directory is a model directory.
    model = formats.from_pretrained(DecoderOnlyLM, run_dir)
    assert model.config.max_len == 16 and model.config.extra["block_size"] == 16
    assert model.config.tgt_vocab_size == Tokenizer.load(run_dir / "tokenizer.json").vocab_size

    assert main(["lm", "train", "--resume", str(run_dir), "--set", "train.max_steps=6"]) == 0
    steps = [r["step"] for r in records(run_dir)]
    assert max(steps) == 6 and steps == sorted(steps)
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 6
    capsys.readouterr()

    def generate(*extra):
        args = ["lm", "generate", "--model", str(run_dir), "--text", "To be", "--seed", "3", *extra]
        assert main(args) == 0
        return capsys.readouterr().out

    first = generate("--max-new-tokens", "40")
    assert first == generate("--max-new-tokens", "40")  # same seed, same text
    assert first.startswith("To be") and len(first.rstrip("\n")) <= len("To be") + 40
    assert generate("--max-new-tokens", "0") == "To be\n"
    greedy = generate("--max-new-tokens", "30", "--temperature", "0")
    assert greedy == generate("--max-new-tokens", "30", "--temperature", "0", "--seed", "99")


def test_config_names_a_text_file_under_the_data_root(tmp_path, monkeypatch):
    root = tmp_path / "data"
    (root / "plays").mkdir(parents=True)
    (root / "plays" / "hamlet.txt").write_text(TEXT, encoding="utf-8")
    monkeypatch.setenv("AIAYN_DATA_DIR", str(root))
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "lm.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data": {
                    "text_file": "plays/hamlet.txt",
                    "tokenizer": "byte_bpe",
                    "vocab_size": 300,
                    "stride": 4,
                }
            }
        )
    )
    run_dir = tmp_path / "run"
    tiny = [*TINY, "--set", "train.max_steps=2"]
    assert main(["lm", "train", str(config), "--out", str(run_dir), *tiny]) == 0
    stored = load_config(run_dir / "train_config.yaml")
    assert stored.data.task == "text" and stored.data.stride == 4
    assert stored.data.text_file == str((root / "plays" / "hamlet.txt").resolve())


def test_shakespeare_config_is_valid_and_unknown_keys_are_errors():
    config = load_config(DEFAULT_CONFIG)
    assert config.data.text_file == "tinyshakespeare/input.txt" and config.data.block_size == 64
    assert config.data.tokenizer == "char" and config.data.valid_fraction == 0.1


def test_bad_input_is_reported_without_a_traceback(tmp_path, text_file, capsys):
    out = str(tmp_path / "run")
    assert main(["lm", "train", "--text", str(tmp_path / "missing.txt"), "--out", out]) == 2
    assert "text file not found" in capsys.readouterr().err
    assert main(["lm", "train", "--text", str(text_file), "--out", out, "--set", "data.blocksize=8"]) == 2
    assert "unknown key(s) data.blocksize" in capsys.readouterr().err
    assert main(["lm", "train", "--text", str(text_file), "--out", out, "--set", "data.tokenizer=bpe"]) == 2
    assert "char, byte_bpe" in capsys.readouterr().err
    assert main(["lm", "train", "--text", str(text_file), "--out", out, "--set", "data.stride=99"]) == 2
    assert "data.stride" in capsys.readouterr().err
    assert main(["lm", "generate", "--model", str(tmp_path)]) == 2
    assert "not a model directory" in capsys.readouterr().err
