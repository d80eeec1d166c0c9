"""A run directory is claimed only when the run can start: after a start refused for its data (line
counts that differ, an empty, binary or missing file, validation files that differ, a directory given
as a file) `--out` does not exist and the same command with the data fixed succeeds. A run stopped
before its first checkpoint resumes from step 0; a directory without a run is never offered for
`--resume`. (The refused starts left `.train.lock` and `train.log`, which blocked the next try, and
`--resume` of them failed with "config file .../train_config.yaml does not exist".)"""

from __future__ import annotations

import json
import logging

import pytest

from aiayn.cli.main import main
from aiayn.data.synthetic import make_task
from aiayn.training import trainer as trainer_module
from aiayn.training.run_dir import CONFIG_FILE

QUICK = [f"--set={item}" for item in (
    "data.tokenizer=char", "data.vocab_size=100", "model.preset=tiny", "model.dropout=0.1",
    "model.max_len=64",
    "train.batch_tokens=400", "train.warmup=2", "train.eval_every=3", "train.bleu_max_sentences=5",
    "train.max_steps=3", "train.threads=1", "train.progress_bar=false", "train.precision=fp32",
    "train.test_beam=1", "train.keep_checkpoints=1",
)]


def write_pairs(directory, lines: int = 60) -> dict[str, object]:
    pairs = make_task("reverse", 1, lines, 0, 0)["train"]
    files = {}
    for name, side in (("train.src", 0), ("train.tgt", 1), ("valid.src", 0), ("valid.tgt", 1)):
        files[name] = directory / name
        chosen = pairs if name.startswith("train") else pairs[:10]
        files[name].write_text("".join(pair[side] + "\n" for pair in chosen), encoding="utf-8")
    return files


def train(files, out, *extra) -> list[str]:
    return ["train", "--train-src", str(files["train.src"]), "--train-tgt", str(files["train.tgt"]),
            "--valid-src", str(files["valid.src"]), "--valid-tgt", str(files["valid.tgt"]),
            "--out", str(out), *QUICK, *extra]


def spoil(files, how: str) -> tuple[str, str]:
    """Spoil the data as a user might; returns (the file the error must name, what it must say)."""
    good = files["train.tgt"].read_bytes()
    if how == "line counts differ":
        files["train.tgt"].write_bytes(good + b"one more\n")
        return str(files["train.tgt"]), "differ in length"
    if how == "an empty file":
        files["train.src"].write_bytes(b"")
        return str(files["train.src"]), "empty"
    if how == "a binary file":
        files["train.src"].write_bytes(bytes(range(256)) * 8)
        return str(files["train.src"]), "not valid UTF-8"
    if how == "a missing file":
        files["train.src"].unlink()
        return str(files["train.src"]), "not found"
    if how == "validation files differ":
        files["valid.tgt"].write_bytes(files["valid.tgt"].read_bytes() + b"x\n")
        return str(files["valid.tgt"]), "differ in length"
    files["train.src"].unlink()  # a directory given as the file
    files["train.src"].mkdir()
    return str(files["train.src"]), "is a directory"


BAD = ["line counts differ", "an empty file", "a binary file", "a missing file", "validation files differ",
       "a directory"]


@pytest.mark.parametrize("how", BAD)
def test_a_start_refused_for_its_data_leaves_no_run_directory(tmp_path, capsys, how):
    files = write_pairs(tmp_path)
    named, said = spoil(files, how)
    out = tmp_path / "t1"
    assert main(train(files, out)) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("aiayn train: error:") and named in err and said in err, err
    assert not out.exists()


def test_the_same_command_succeeds_once_the_data_is_fixed(tmp_path, capsys):
    files = write_pairs(tmp_path)
    good = files["train.tgt"].read_bytes()
    out = tmp_path / "t1"
    spoil(files, "line counts differ")
    assert main(train(files, out)) == 2 and not out.exists()
    files["train.tgt"].write_bytes(good)
    assert main(train(files, out)) == 0, capsys.readouterr().err
    assert json.loads((out / "results.json").read_text())["steps"] == 3


def test_a_later_failure_removes_the_directory_it_made_and_says_so(tmp_path, capsys, monkeypatch):
    """A check that can only come with the data (here: planted in the model's build) fails the start
    after the directory is claimed: the directory goes, with a warning."""
    from aiayn.core.errors import ConfigError
    from aiayn.translation.task import TranslationTask

    def refuse(self, config, data):
        raise ConfigError("planted: the model cannot be built")

    monkeypatch.setattr(TranslationTask, "build_model", refuse)
    files = write_pairs(tmp_path)
    out = tmp_path / "t1"
    assert main(train(files, out)) == 2
    err = capsys.readouterr().err
    assert "planted" in err and f"{out} removed: the run failed before training began" in err
    assert not out.exists()


def test_leftovers_of_a_failed_start_do_not_block_and_are_not_offered_for_resume(tmp_path, capsys):
    out = tmp_path / "t1"
    out.mkdir()
    (out / ".train.lock").write_text("")
    (out / "train.log").write_text("an older failed start\n")
    assert main(["train", "--resume", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "holds no train_config.yaml" in err and "--overwrite" in err
    files = write_pairs(tmp_path)
    assert main(train(files, out)) == 0, capsys.readouterr().err  # the leftovers are taken over
    assert "an older failed start" not in (out / "train.log").read_text()


def test_a_directory_holding_something_else_is_not_offered_for_resume(tmp_path, capsys):
    out = tmp_path / "t1"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    files = write_pairs(tmp_path)
    assert main(train(files, out)) == 2
    err = capsys.readouterr().err.strip()
    assert "holds no run" in err and "--resume" not in err and (out / "notes.txt").exists()


def test_a_run_killed_before_its_first_checkpoint_resumes_from_step_0(tmp_path, capsys, monkeypatch, caplog):
    files = write_pairs(tmp_path)
    out = tmp_path / "t1"

    def killed(self, resume=False):  # what fit writes before its first step, then the process dies
        (self.run_dir / CONFIG_FILE).write_text(self.config.to_yaml())
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(trainer_module.Trainer, "fit", killed)
        assert main(train(files, out)) == 130
    assert (out / CONFIG_FILE).is_file() and not list(out.glob("checkpoints/*"))
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="aiayn"):
        assert main(["train", "--resume", str(out)]) == 0, capsys.readouterr().err
    assert "no checkpoint in" in caplog.text and "training starts from step 0" in caplog.text
    assert json.loads((out / "results.json").read_text())["steps"] == 3
