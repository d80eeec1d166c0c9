"""A translation model on the `dates` task with a loaded tokenizer whose special tokens are not
at ids 0..3 (there: ` ,-.`, ordinary characters) still learns the task, and decodes with greedy
and beam search: every consumer reads the ids from the model, none assumes 0..3.

Both tests share one training run (`aiayn train --set data.tokenizer=FILE`); its length, 1100
steps, is sized in benchmarks/RESULTS.md ("The same task with a loaded tokenizer ...").
"""

from __future__ import annotations

import json

import pytest
import tokenizers
from tokenizers import decoders, models

import aiayn
from aiayn.cli.main import main
from aiayn.data.synthetic import make_task

NAMES = {"bos": "[START]", "eos": "[END]"}
STEPS = 1100
SETTINGS = {
    "data.num_train": 30000, "data.num_valid": 100, "data.num_test": 400,
    "train.max_steps": STEPS, "train.max_minutes": "null", "train.eval_every": STEPS,
    "train.validation_metric": "loss", "train.progress_bar": "false",
}  # fmt: skip


def splits() -> dict[str, list[tuple[str, str]]]:
    """The run's own splits (`aiayn train` makes the same from the same settings)."""
    return make_task("dates", 1, *(SETTINGS[f"data.num_{split}"] for split in ("train", "valid", "test")))


def char_tokenizer_with_specials_last(texts: list[str]) -> tokenizers.Tokenizer:
    """One token per character seen, then `[UNK]` (its model's unknown token) and the special
    tokens `[START]`, `[END]`; no padding token (aiayn appends one)."""
    chars = sorted({c for text in texts for c in text})
    vocab = {c: i for i, c in enumerate([*chars, "[UNK]"])}
    hf = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]", fuse_unk=False))
    hf.decoder = decoders.Fuse()
    hf.add_special_tokens(list(NAMES.values()))
    return hf


@pytest.fixture(scope="module")
def dates_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("dates")
    path = root / "chars.json"
    char_tokenizer_with_specials_last([s + t for s, t in splits()["train"]]).save(str(path))
    names = "{" + ", ".join(f"{role}: '{token}'" for role, token in NAMES.items()) + "}"
    overrides = [f"data.tokenizer={path}", f"data.special_tokens={names}"]
    overrides += [f"{key}={value}" for key, value in SETTINGS.items()]
    assert main(["train", "--out", str(root / "run"), *[a for o in overrides for a in ("--set", o)]]) == 0
    return root / "run"


def test_the_ids_are_not_0_to_3_and_travel_with_the_model(dates_run):
    config = json.loads((dates_run / "config.json").read_text())["config"]
    tokenizer = json.loads((dates_run / "tokenizer.json").read_text())
    ids = {token["content"]: token["id"] for token in tokenizer["added_tokens"]}
    assert config["bos_id"] == ids["[START]"] and config["eos_id"] == ids["[END]"]
    assert config["pad_id"] == ids["<pad>"] == config["tgt_vocab_size"] - 1  # appended
    assert config["unk_id"] == tokenizer["model"]["vocab"]["[UNK]"]
    assert min(config[k] for k in ("pad_id", "bos_id", "eos_id", "unk_id")) > 3


def test_learns_the_task_and_decodes_greedy_and_beam(dates_run):
    results = json.loads((dates_run / "results.json").read_text())
    assert results["test"]["exact_match"] >= 99.0  # the run's own greedy test decoding
    pairs = splits()["test"][:200]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    translator = aiayn.load(dates_run, device="cpu")
    for beam in (1, 4):
        outputs = translator.translate(sources, beam=beam)
        assert sum(o == r for o, r in zip(outputs, references, strict=True)) >= 0.99 * len(pairs), beam
