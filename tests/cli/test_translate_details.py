"""`aiayn translate --format jsonl --scores --alignments`: every combination with --nbest on a
tiny model; on the trained dates model the per-token scores sum to `aiayn score` of each output
(beam, greedy, and with a control active), and int8 / compiled models give the same alignments."""

from __future__ import annotations

import json

import pytest

from aiayn.cli.main import main
from aiayn.inference.words import parse_pharaoh
from decoding.conftest import SOURCES

FAST = ["--beam", "3", "--max-len", "3", "--device", "cpu"]
DATES = ["Saturday, 21 November 2026", "21.11.26", "March 3rd, 1999", "", "2 Jan 2001", "12/05/2010",
         "11.11.11", "Friday, 22 February 2022"]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def records(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("nbest", [1, 3])
@pytest.mark.parametrize("details", [[], ["--scores"], ["--alignments"], ["--scores", "--alignments"]])
def test_jsonl_has_one_object_per_output_with_the_fields_asked(model_dir, tmp_path, capsys, nbest, details):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    code, out, err = run(capsys, "translate", "--model", str(model_dir), "--input", str(source), *FAST,
                         "--nbest", str(nbest), "--format", "jsonl", *details)
    assert code == 0, err
    objects = records(out)
    per_line = [1 if not s.strip() else nbest for s in SOURCES]
    assert [(o["line"], o["rank"]) for o in objects] == [
        (i, k) for i, count in enumerate(per_line) for k in range(count)
    ]
    plain = {"line", "rank", "text", "score", "log_prob"}
    for o in objects:
        expected = plain | ({"token_scores", "words", "word_scores"} if "--scores" in details else set())
        expected |= {"alignment"} if "--alignments" in details else set()
        assert set(o) == expected
        if "--scores" in details:
            assert o["log_prob"] == pytest.approx(sum(o["token_scores"]), abs=1e-6)
            assert o["words"] == o["text"].split() and len(o["word_scores"]) == len(o["words"])
            if o["words"]:  # every token but <eos> belongs to a word
                assert sum(o["word_scores"]) == pytest.approx(sum(o["token_scores"][:-1]), abs=1e-4)
        if "--alignments" in details:
            links = parse_pharaoh(o["alignment"])
            assert sorted({t for _, t in links}) == list(range(len(o["text"].split())))
            assert all(0 <= s < len(SOURCES[o["line"]].split()) for s, _ in links)


@pytest.mark.parametrize("flag", ["--scores", "--alignments"])
def test_scores_and_alignments_without_jsonl_are_refused_in_one_line(model_dir, capsys, flag):
    code, out, err = run(capsys, "translate", "--model", str(model_dir), "--text", "ja", *FAST, flag)
    assert code == 2 and out == "" and err.count("\n") == 1 and "--format jsonl" in err


def test_an_unknown_format_is_refused(model_dir, capsys):
    code, out, err = run(capsys, "translate", "--model", str(model_dir), "--text", "ja", "--format", "tsv")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--format: invalid choice: 'tsv'" in err


def translate_jsonl(capsys, tmp_path, model, *options) -> list[dict]:
    source = tmp_path / "dates.txt"
    source.write_text("\n".join(DATES) + "\n", encoding="utf-8")
    code, out, err = run(capsys, "translate", "--model", str(model), "--input", str(source),
                         "--device", "cpu", "--format", "jsonl", *options)
    assert code == 0, err
    return records(out)


def test_dates_model_token_scores_sum_to_aiayn_score(dates_run, tmp_path, capsys):
    """The sum of each output's token scores is `aiayn score --input SRC --ref OUTPUT` (1e-4), for
    beam, greedy, and a control that changes outputs (n-gram blocking): the control steers the
    search, the reported scores stay the model's plain log-probabilities."""
    plain = translate_jsonl(capsys, tmp_path, dates_run, "--scores", "--beam", "4")
    unasked = translate_jsonl(capsys, tmp_path, dates_run, "--beam", "4", "--nbest", "2")  # no --scores
    greedy = translate_jsonl(capsys, tmp_path, dates_run, "--scores", "--beam", "1")
    blocked = translate_jsonl(capsys, tmp_path, dates_run, "--scores", "--beam", "4",
                              "--no-repeat-ngram-size", "1")
    assert [o["text"] for o in plain][:3] == ["2026-11-21", "2026-11-21", "1999-03-03"]
    assert [o["text"] for o in blocked] != [o["text"] for o in plain]
    src = tmp_path / "sources.txt"
    for objects in (plain, greedy, blocked, unasked):
        src.write_text("".join(DATES[o["line"]] + "\n" for o in objects), encoding="utf-8")  # one per output
        ref = tmp_path / "outputs.txt"
        ref.write_text("".join(o["text"] + "\n" for o in objects), encoding="utf-8")
        code, out, err = run(capsys, "score", "--model", str(dates_run), "--input", str(src),
                             "--ref", str(ref), "--device", "cpu")
        assert code == 0, err
        scored = [float(line) for line in out.splitlines()]
        for o, value in zip(objects, scored, strict=True):
            if o["text"]:
                assert o["log_prob"] == pytest.approx(value, abs=1e-4)  # log_prob is `aiayn score`
                if "token_scores" in o:
                    assert len(o["token_scores"]) == len(o["text"]) + 1  # characters, then <eos>
                    assert sum(o["token_scores"]) == pytest.approx(value, abs=1e-4)
    for o in greedy:  # without controls, greedy's own score is the sum of its choices
        assert sum(o["token_scores"]) == pytest.approx(o["score"], abs=1e-4)
    # beam 4's score is log P over the length penalty ((5 + |Y|) / 6) ** 0.6, |Y| with <eos>
    for o in plain:
        if o["text"]:
            penalty = ((5 + len(o["token_scores"])) / 6) ** 0.6
            assert o["score"] == pytest.approx(o["log_prob"] / penalty, abs=1e-4)


def test_dates_model_alignments_are_the_same_under_int8_and_compile(
    dates_run, tmp_path, capsys, shared_kept_steps
):
    from aiayn.runtime.compiled import compiler_available

    eager = translate_jsonl(capsys, tmp_path, dates_run, "--alignments", "--beam", "1")
    assert all(o["alignment"] for o in eager if o["text"])
    variants = [["--quantize", "int8"]] + ([["--compile"]] if compiler_available() else [])
    for variant in variants:
        other = translate_jsonl(capsys, tmp_path, dates_run, "--alignments", "--beam", "1", *variant)
        same_text = [(a, b) for a, b in zip(eager, other, strict=True) if a["text"] == b["text"]]
        assert len(same_text) >= len(DATES) - 1, variant
        assert [a["alignment"] for a, _ in same_text] == [b["alignment"] for _, b in same_text], variant


def test_a_ctranslate2_model_gives_scores_and_refuses_alignments_in_one_line(model_dir, tmp_path, capsys):
    pytest.importorskip("ctranslate2", reason="needs the optional extra 'export'")
    from aiayn.export import export_ctranslate2

    exported = export_ctranslate2(model_dir, tmp_path / "ct2")
    base = ["translate", "--model", str(exported), "--text", "zwei katzen", *FAST, "--format", "jsonl"]
    code, out, err = run(capsys, *base, "--alignments")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "alignments are not available with a CTranslate2 model" in err
    code, out, err = run(capsys, *base, "--scores", "--nbest", "2")
    assert code == 0, err
    assert [len(o["token_scores"]) for o in records(out)] == [len(o["text"]) + 1 for o in records(out)]
