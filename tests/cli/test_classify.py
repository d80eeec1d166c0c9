"""`aiayn classify train` and `aiayn classify predict` end to end, through the CLI."""

import json

from aiayn import formats
from aiayn.cli.classify import DEFAULT_CONFIG, TSV_CONFIG
from aiayn.cli.main import main
from aiayn.model import EncoderOnly
from aiayn.tasks import load_config

TINY_FIELDS = {
    "model.preset": "tiny", "model.d_model": 32, "model.d_ff": 64, "model.num_encoder_layers": 1,
    "train.batch_tokens": 256, "train.max_steps": 4, "train.eval_every": 2, "train.max_minutes": "null",
    "train.progress_bar": "false", "train.warmup": 2, "train.threads": 1,
}  # fmt: skip
BRACKET_FIELDS = {
    "data.num_train": 200, "data.num_valid": 30, "data.num_test": 30, "data.max_sentence_tokens": 12,
}  # fmt: skip


def overrides(fields: dict) -> list[str]:
    return [arg for key, value in fields.items() for arg in ("--set", f"{key}={value}")]


TINY, BRACKETS = overrides(TINY_FIELDS), overrides(BRACKET_FIELDS)


def predictions(text: str) -> list[tuple[str, float]]:
    rows = [line.split("\t") for line in text.strip().splitlines()]
    return [(label, float(probability)) for label, probability in rows]


def test_brackets_train_resume_and_predict(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["classify", "train", "--out", str(run_dir), *TINY, *BRACKETS]) == 0
    out = capsys.readouterr().out
    assert "validation accuracy:" in out and "held-out test accuracy:" in out
    for name in ("config.json", "model.safetensors", "tokenizer.json", "metrics.jsonl", "results.json"):
        assert (run_dir / name).is_file(), name
    val = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in val if r["split"] == "val"]
    assert [r["step"] for r in val] == [2, 4] and all(0 <= r["accuracy"] <= 100 for r in val)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["labels"] == ["balanced", "unbalanced"] and 0 <= results["test_accuracy"] <= 100
    model = formats.from_pretrained(EncoderOnly, run_dir)
    assert model.num_classes == 2 and model.config.extra["labels"] == ["balanced", "unbalanced"]

    assert main(["classify", "train", "--resume", str(run_dir), "--set", "train.max_steps=6"]) == 0
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 6
    capsys.readouterr()

    assert main(["classify", "predict", "--model", str(run_dir), "--text", "(][)"]) == 0
    [(label, probability)] = predictions(capsys.readouterr().out)
    assert label in ("balanced", "unbalanced") and 0.5 <= probability <= 1.0
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("()\n(][)\n{[]}()\n", encoding="utf-8")
    assert main(["classify", "predict", "--model", str(run_dir), "--input", str(inputs)]) == 0
    rows = predictions(capsys.readouterr().out)
    assert len(rows) == 3 and rows[1] == (label, probability)  # same text, same answer

    # a long input: printed in chunks, with progress on stderr (plain lines to a file), and an
    # empty line named by its line number in the whole file
    long = tmp_path / "long.txt"
    long.write_text("()\n(][)\n" * 350, encoding="utf-8")
    assert main(["classify", "predict", "--model", str(run_dir), "--input", str(long)]) == 0
    out, err = capsys.readouterr()
    assert predictions(out)[1::2] == [(label, probability)] * 350 and "\r" not in err
    shown = [line for line in err.splitlines() if line.startswith("classify")]
    assert shown and shown[-1].endswith("(done)") and "100.0% of 700 lines" in shown[-1]
    long.write_text("()\n" * 554 + "\n()\n", encoding="utf-8")
    assert main(["classify", "predict", "--model", str(run_dir), "--input", str(long)]) == 2
    out, err = capsys.readouterr()
    assert f"{long}: line 555: empty text" in err and out == ""  # nothing printed


def test_tsv_train_and_predict(tmp_path, capsys):
    lines = [
        f"{word} is {mood}\t{mood}" for word in ("this", "that", "it", "she") for mood in ("good", "bad")
    ]
    train, valid = tmp_path / "train.tsv", tmp_path / "valid.tsv"
    train.write_text("\n".join(lines * 5) + "\n", encoding="utf-8")
    valid.write_text("he is good\tgood\nhe is bad\tbad\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    args = ["classify", "train", "--tsv", str(train), "--valid-tsv", str(valid), "--out", str(run_dir), *TINY]
    assert main(args) == 0
    results = json.loads((run_dir / "results.json").read_text())
    assert results["labels"] == ["bad", "good"] and results["test_accuracy"] is None
    assert load_config(run_dir / "train_config.yaml").data.tokenizer == "bpe"  # classify_tsv.yaml
    assert results["valid_accuracy"] in (0.0, 50.0, 100.0)
    capsys.readouterr()
    assert main(["classify", "predict", "--model", str(run_dir), "--text", "we are good"]) == 0
    assert predictions(capsys.readouterr().out)[0][0] in ("bad", "good")


def test_bad_input_is_reported_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("fine\tyes\nnot fine\n", encoding="utf-8")
    out = str(tmp_path / "run")
    assert main(["classify", "train", "--tsv", str(bad), "--out", out, *TINY]) == 2
    assert "bad.tsv: line 2: expected 2 tab-separated columns" in capsys.readouterr().err
    assert main(["classify", "train", "--tsv", str(tmp_path / "none.tsv"), "--out", out]) == 2
    assert "TSV file not found" in capsys.readouterr().err
    assert main(["classify", "train", "--out", out, "--set", "data.task=dates"]) == 2
    assert "brackets or tsv" in capsys.readouterr().err
    assert main(["classify", "predict", "--model", str(tmp_path), "--text", "()"]) == 2
    assert "not a model directory" in capsys.readouterr().err


def test_default_configs_are_valid():
    config = load_config(DEFAULT_CONFIG)
    assert config.data.task == "brackets" and config.data.tokenizer == "char"
    assert load_config(TSV_CONFIG).data.task == "tsv"


def test_train_init_from_a_classifier_and_refuse_other_labels(tmp_path, capsys):
    words, moods = ("this", "that", "it", "she"), ("good", "bad")
    lines = [f"{word} is {mood}\t{mood}" for word in words for mood in moods]
    train = tmp_path / "train.tsv"
    train.write_text("\n".join(lines * 5) + "\n", encoding="utf-8")
    source = tmp_path / "source"
    assert main(["classify", "train", "--tsv", str(train), "--out", str(source), *TINY]) == 0
    tuned = tmp_path / "tuned"
    steps = overrides({k: v for k, v in TINY_FIELDS.items() if k.startswith("train.")})
    assert main(["classify", "train", "--tsv", str(train), "--init-from", str(source), "--out", str(tuned),
                 *steps]) == 0
    results = json.loads((tuned / "results.json").read_text())
    assert results["init_from"] == str(source) and results["labels"] == ["bad", "good"]
    other = tmp_path / "other.tsv"
    other.write_text("this is fine\tfine\nthat is ok\tok\n" * 5, encoding="utf-8")
    capsys.readouterr()
    args = ["--tsv", str(other), "--init-from", str(source), "--out", str(tmp_path / "x")]
    assert main(["classify", "train", *args, *steps]) == 2
    assert "are not those of --init-from" in capsys.readouterr().err
