"""No NaN ever leaves `aiayn translate`: a control outside its declared range is refused as the command
line is parsed (the repetition penalty 6e-239 printed `"score": NaN`), the controls at the edges of their
ranges give strict JSON, and a non-finite score, should one still come, is a one-line error naming the
options, never printed."""

from __future__ import annotations

import json

import pytest

from aiayn.cli.main import main
from aiayn.core.decoding_choices import FLOAT32_MAX, FLOAT32_TINY
from aiayn.decoding.common import Hypothesis
from aiayn.inference.torch_translator import TorchTranslator

FAST = ["--max-len", "6", "--device", "cpu", "--format", "jsonl", "--scores"]


def strict(line: str) -> dict:
    """A JSON line parsed as strict JSON: NaN, Infinity and -Infinity are refused."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the jsonl output: {line}")

    return json.loads(line, parse_constant=refuse)


def test_the_penalty_that_printed_nan_is_refused_in_one_line(model_dir, capsys):
    code = main(["translate", "--model", str(model_dir), "--text", "ein hund", "--repetition-penalty",
                 "6e-239", *FAST])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--repetition-penalty" in err and "6e-239" in err


@pytest.mark.parametrize("controls", [
    ["--repetition-penalty", repr(FLOAT32_TINY)],
    ["--repetition-penalty", repr(FLOAT32_MAX), "--no-repeat-ngram-size", "1"],
    ["--sample", "--temperature", repr(FLOAT32_MAX), "--seed", "3",
     "--repetition-penalty", repr(FLOAT32_TINY)],
    ["--sample", "--temperature", "1e-45", "--top-p", "1e-9", "--top-k", "1", "--seed", "0"],
    ["--alpha", "10", "--max-output-ratio", "1000", "--prefix", "a", "--repetition-penalty", "1e-30"],
])
def test_controls_at_the_edges_of_their_ranges_give_strict_json(model_dir, capsys, controls):
    code = main(["translate", "--model", str(model_dir), "--text", "ein hund läuft", *FAST, *controls])
    out, err = capsys.readouterr()
    assert code == 0, err
    records = [strict(line) for line in out.splitlines()]
    assert len(records) == 1 and all(score < 0 for score in records[0]["token_scores"])


def test_a_non_finite_score_is_an_error_naming_the_options_and_never_printed(model_dir, capsys, monkeypatch):
    """Planted: the search gives NaN (as the penalty's old arithmetic did)."""
    real = TorchTranslator._search

    def nan_search(self, *args, **kwargs):
        return [[Hypothesis(h.tokens, float("nan")) for h in hyps] for hyps in real(self, *args, **kwargs)]

    monkeypatch.setattr(TorchTranslator, "_search", nan_search)
    code = main(["translate", "--model", str(model_dir), "--text", "ein hund", "--repetition-penalty", "1.5",
                 *FAST])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "repetition_penalty=1.5" in err and "nan" in err and "line 1" in err
