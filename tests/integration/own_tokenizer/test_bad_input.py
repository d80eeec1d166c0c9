"""Bad tokenizers: one clear line naming the file and the token, exit status 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aiayn.cli.main import main
from aiayn.data import Tokenizer

from .conftest import gpt2_layout, save

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "legacy_dates"
TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(40))


def error_line(capsys) -> str:
    """The one error line of a failed command (other stderr lines are the run's log)."""
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert len(errors) == 1, errors
    return errors[0]


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "content", ['{"model": ', '{"version": "1.0", "model": {"type": "Nonsense"}}', "[1, 2, 3]", "\xff\xfe"]
)
def test_a_file_that_is_not_a_tokenizer(tmp_path, text_file, capsys, content):
    bad = tmp_path / "broken.json"
    bad.write_text(content, encoding="utf-8")
    args = ["lm", "train", "--text", str(text_file), "--tokenizer", str(bad), "--out", str(tmp_path / "run")]
    assert main(args) == 2
    line = error_line(capsys)
    assert str(bad) in line and "not a valid tokenizer file" in line
    assert not (tmp_path / "run" / "config.json").exists()  # nothing trained


def test_translation_and_classifier_reject_it_too(tmp_path, capsys):
    bad = tmp_path / "broken.json"
    bad.write_text('{"model": ', encoding="utf-8")
    small = ["--set", "data.num_train=50", "--set", "data.num_valid=5", "--set", "data.num_test=5"]
    assert main(["train", "--out", str(tmp_path / "t"), "--set", f"data.tokenizer={bad}", *small]) == 2
    assert str(bad) in error_line(capsys)
    assert main(["classify", "train", "--tokenizer", str(bad), "--out", str(tmp_path / "c"), *small]) == 2
    assert str(bad) in error_line(capsys)


def test_a_special_token_name_not_in_the_vocabulary(tmp_path, text_file, capsys):
    path = save(gpt2_layout([TEXT], num_merges=20), tmp_path / "gpt2.json")
    args = ["lm", "train", "--text", str(text_file), "--tokenizer", str(path), "--out", str(tmp_path / "run")]
    assert main([*args, "--set", "data.special_tokens={bos: '<s>', eos: '</s>'}"]) == 2
    line = error_line(capsys)
    assert str(path) in line and "'<s>'" in line and "not a token of its vocabulary" in line


def test_an_ambiguous_tokenizer_asks_for_data_special_tokens(tmp_path, text_file, capsys):
    hf = gpt2_layout([TEXT], num_merges=20)
    hf.add_special_tokens(["<|user|>", "<|bot|>"])
    path = save(hf, tmp_path / "chat.json")
    args = ["lm", "train", "--text", str(text_file), "--tokenizer", str(path), "--out", str(tmp_path / "run")]
    assert main(args) == 2
    line = error_line(capsys)
    assert str(path) in line and "bos and eos" in line and "data.special_tokens" in line


def grown(directory: Path, file_name: str = "tokenizer.json") -> Path:
    """Add one token to the directory's tokenizer: one more than the model's embedding has."""
    tokenizer = Tokenizer.load(directory / file_name)
    tokenizer.hf.add_tokens(["<|extra|>"])
    tokenizer.save(directory / file_name)
    return directory / file_name


def test_a_model_directory_whose_tokenizer_outgrew_the_embedding(tmp_path, capsys):
    model_dir = tmp_path / "model"
    shutil.copytree(FIXTURE, model_dir)
    path = grown(model_dir)
    assert main(["translate", "--model", str(model_dir), "--text", "1 May 2020", "--device", "cpu"]) == 2
    line = error_line(capsys)
    assert str(path) in line and "'<|extra|>'" in line and "no row in the model's source embedding" in line
    page = str(tmp_path / "e.html")
    assert main(["explore", "--model", str(model_dir), "--input", str(path), "--out", page]) == 2
    assert "'<|extra|>'" in error_line(capsys)


def test_a_language_model_directory_too(tmp_path, text_file, capsys):
    run_dir = tmp_path / "run"
    tiny = {
        "model.preset": "tiny", "model.d_model": 16, "model.d_ff": 32, "model.num_decoder_layers": 1,
        "data.block_size": 8, "train.batch_tokens": 64, "train.max_steps": 1, "train.progress_bar": "false",
    }  # fmt: skip
    overrides = [arg for key, value in tiny.items() for arg in ("--set", f"{key}={value}")]
    assert main(["lm", "train", "--text", str(text_file), "--out", str(run_dir), *overrides]) == 0
    path = grown(run_dir)
    capsys.readouterr()
    assert main(["lm", "generate", "--model", str(run_dir), "--max-new-tokens", "3"]) == 2
    line = error_line(capsys)
    assert str(path) in line and "'<|extra|>'" in line
