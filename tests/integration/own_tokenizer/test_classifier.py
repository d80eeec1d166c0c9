"""`aiayn classify train --tokenizer FILE`: the classifier reads its ids from the tokenizer."""

from __future__ import annotations

import json

from aiayn.classify.predict import Classifier
from aiayn.cli.main import main

from .conftest import END_OF_TEXT, gpt2_layout, save

FIELDS = {
    "model.preset": "tiny", "model.d_model": 32, "model.d_ff": 64, "model.num_encoder_layers": 1,
    "train.batch_tokens": 256, "train.max_steps": 2, "train.eval_every": 2, "train.max_minutes": "null",
    "train.progress_bar": "false", "train.warmup": 2, "train.threads": 1,
    "data.num_train": 100, "data.num_valid": 20, "data.num_test": 20, "data.max_sentence_tokens": 12,
}  # fmt: skip
OVERRIDES = [arg for key, value in FIELDS.items() for arg in ("--set", f"{key}={value}")]


def test_brackets_with_a_gpt2_layout_tokenizer(tmp_path, capsys):
    path = save(gpt2_layout(["([{}])" * 50, "some words, too"], num_merges=10), tmp_path / "tok.json")
    run_dir = tmp_path / "run"
    assert main(["classify", "train", "--tokenizer", str(path), "--out", str(run_dir), *OVERRIDES]) == 0
    config = json.loads((run_dir / "config.json").read_text())["config"]
    end = json.loads(path.read_text())["added_tokens"][0]["id"]
    ids = (config["pad_id"], config["bos_id"], config["eos_id"], config["unk_id"])
    assert ids == (end + 1, end, end, None)
    classifier = Classifier.load(run_dir)
    assert classifier.tokenizer.specials.bos_id == end
    assert classifier.tokenizer.id_to_token(end) == END_OF_TEXT
    capsys.readouterr()
    assert main(["classify", "predict", "--model", str(run_dir), "--text", "(][)"]) == 0
    label, probability = capsys.readouterr().out.strip().split("\t")
    assert label in ("balanced", "unbalanced") and 0.5 <= float(probability) <= 1.0
