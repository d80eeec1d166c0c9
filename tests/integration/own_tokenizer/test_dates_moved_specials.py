"""A translation model on the `dates` task with a loaded tokenizer whose special tokens are not
at ids 0..3 (there: ` ,-.`, ordinary characters) still learns the task, and decodes with greedy
and beam search: every consumer reads the ids from the model, none assumes 0..3.

Both tests share one training run (`aiayn train --set data.tokenizer=FILE`), the session's
`dates_run` (tests/shared_dates.py), which tests/export reuses.
"""

from __future__ import annotations

import json

import aiayn
from shared_dates import splits


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
