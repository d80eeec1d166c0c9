"""One rule for blank lines (empty or whitespace only) in `translate`, `--scores` and `aiayn score`: the
output is empty and scored with its `<eos>`. A line holding one space got `score: 0.0` and
`token_scores: []`, while `aiayn score` of the pair gave about -5.9."""

from __future__ import annotations

import json

import pytest

from aiayn.cli.main import main

BLANKS = ["", " ", "\t  ", "\u3000"]
"""Empty, a space, a tab and spaces, an ideographic space (Unicode whitespace)."""


@pytest.mark.parametrize("beam", ["1", "3"])
def test_a_blank_line_scores_as_aiayn_score_scores_it(model_dir, tmp_path, capsys, beam):
    source, empty = tmp_path / "in.txt", tmp_path / "empty.txt"
    source.write_text("".join(line + "\n" for line in [*BLANKS, "ja"]), encoding="utf-8")
    empty.write_text("\n" * (len(BLANKS) + 1), encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(source), "--beam", beam,
                 "--max-extra-len", "4", "--device", "cpu", "--format", "jsonl", "--scores"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["score", "--model", str(model_dir), "--input", str(source), "--ref", str(empty)]) == 0
    scored = [float(line) for line in capsys.readouterr().out.splitlines()]
    for record, expected in zip(records[: len(BLANKS)], scored, strict=False):
        assert record["text"] == "" and record["words"] == [] and len(record["token_scores"]) == 1
        assert record["score"] == pytest.approx(expected, abs=1e-4) and expected < 0
        assert record["token_scores"][0] == pytest.approx(expected, abs=1e-4)


def test_a_blank_line_in_the_nbest_text_format_has_the_same_score(model_dir, tmp_path, capsys):
    source, empty = tmp_path / "in.txt", tmp_path / "empty.txt"
    source.write_text(" \n", encoding="utf-8")
    empty.write_text("\n", encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(source), "--nbest", "2",
                 "--max-extra-len", "4", "--device", "cpu"]) == 0
    index, score, log_prob, text = capsys.readouterr().out.rstrip("\n").split("\t")
    assert main(["score", "--model", str(model_dir), "--input", str(source), "--ref", str(empty)]) == 0
    expected = float(capsys.readouterr().out)
    assert (index, text) == ("0", "") and float(score) == pytest.approx(expected, abs=1e-4) and expected < 0
    assert float(log_prob) == pytest.approx(expected, abs=1e-4)
