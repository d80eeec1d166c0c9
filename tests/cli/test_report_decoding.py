"""`--report` does not change the translation: `aiayn translate` and `aiayn evaluate` print the
same lines with and without it, for every decoding option, on the trained `dates` model
(`dates_run`, tests/shared_dates.py); the report shows those lines and the attention of the
loaded model (int8 included) over the tokens it produced."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import aiayn
from aiayn.cli.main import main
from aiayn.evaluation.report import decode_attention
from aiayn.runtime.compiled import compiler_available

SOURCES = [
    "Saturday, 21 November 2026",
    "13th of may 1974",
    "",
    "3 Jan 2001",
    "Tuesday, 5 August 1969",
    "07/12/1999",
]
REFERENCES = ["2026-11-21", "1974-05-13", "", "2001-01-03", "1969-08-05", "1999-12-07"]
LONG = "Saturday, 21 November 2026 " * 4  # over the model's 72 positions

OPTIONS = {
    "beam": [],
    "greedy": ["--beam", "1"],
    "prefix": ["--prefix", "1999"],
    "sample temperature": ["--sample", "--seed", "7", "--temperature", "2"],
    "sample top-k": ["--sample", "--seed", "7", "--top-k", "3", "--temperature", "3"],
    "sample top-p": ["--sample", "--seed", "11", "--top-p", "0.8", "--temperature", "3"],
    "no-repeat-ngram": ["--no-repeat-ngram-size", "1"],
    "repetition penalty": ["--repetition-penalty", "3"],
    "max output ratio": ["--max-output-ratio", "0.3"],
    "max len": ["--max-len", "3"],
    "int8": ["--quantize", "int8"],
}


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def translate(dates_run, src, tmp_path, options, report: bool, capsys) -> tuple[int, list[str], str]:
    """Exit status, output lines and stderr of `aiayn translate` (with `--report` or not)."""
    out = tmp_path / ("with.txt" if report else "without.txt")
    argv = ["translate", "--model", str(dates_run), "--device", "cpu", "--input", str(src),
            "--output", str(out), *options]
    if report:
        argv += ["--report", str(tmp_path / "report.html")]
    status = main(argv)
    err = capsys.readouterr().err
    return status, out.read_text(encoding="utf-8").splitlines() if out.exists() else [], err


def report_data(tmp_path) -> dict:
    return json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", OPTIONS)
def test_translate_prints_the_same_lines_with_and_without_report(dates_run, tmp_path, capsys, case):
    options = OPTIONS[case]
    src = write(tmp_path / "src.txt", [*SOURCES, LONG])
    status, without, _ = translate(dates_run, src, tmp_path, options, False, capsys)
    assert status == 0 and len(without) == len(SOURCES) + 1
    status, with_report, _ = translate(dates_run, src, tmp_path, options, True, capsys)
    assert status == 0
    assert with_report == without
    sentences = report_data(tmp_path)["sentences"]
    assert [s["hypothesis"] for s in sentences] == without  # the report shows what was printed
    if case == "prefix":  # the option is in effect on both paths
        assert all(line.startswith("1999") for line, source in zip(without, SOURCES, strict=False) if source)
    if case == "max output ratio":  # one character a token; the long line is cut to 71 tokens
        for line, source in zip(without, [*SOURCES, LONG[:71]], strict=True):
            assert len(line) <= math.ceil(0.3 * (len(source) + 1))
    if case == "int8":
        assert_attention_is_the_int8_models(dates_run, sentences[0])


def assert_attention_is_the_int8_models(dates_run, sentence: dict) -> None:
    """The report's attention is a teacher-forced pass of the int8 model over its own output."""
    translator = aiayn.load(dates_run, "cpu", task="translation", quantize="int8")
    config = translator.model.config
    src = [*translator.tokenizers.source.encode(SOURCES[0]), config.eos_id]
    tgt = [config.bos_id, *translator.tokenizers.target.encode(sentence["hypothesis"])]
    with torch.no_grad():
        maps = translator.network.eval().attention_maps(torch.tensor([src]), torch.tensor([tgt]))
    expected = torch.stack([m[0] for m in maps.cross]).numpy()  # (L, H, T, S)
    np.testing.assert_allclose(decode_attention(sentence["attention"]), expected, atol=0.5 / 255 + 1e-6)


def test_translate_long_line_error_and_nbest_are_the_same_with_report(dates_run, tmp_path, capsys):
    src = write(tmp_path / "src.txt", [*SOURCES, LONG])
    results = [translate(dates_run, src, tmp_path, ["--on-long-line", "error"], report, capsys)
               for report in (False, True)]
    for status, _, err in results:
        assert status == 2 and "line 7 has" in err and len(err.strip().splitlines()) == 1
    assert results[0][2] == results[1][2]
    status, _, err = translate(dates_run, src, tmp_path, ["--nbest", "2"], True, capsys)
    assert status == 2 and "leave out --nbest" in err  # the report shows one translation per line


@pytest.mark.skipif(not compiler_available(), reason="compiling needs a C++ compiler on the PATH")
def test_compiled_translate_prints_the_same_lines_with_report(dates_run, tmp_path, capsys, shared_kept_steps):
    src = write(tmp_path / "src.txt", SOURCES[:2])
    options = ["--compile", "--beam", "2"]
    status, without, _ = translate(dates_run, src, tmp_path, options, False, capsys)
    assert status == 0
    assert translate(dates_run, src, tmp_path, options, True, capsys)[:2] == (0, without)
    assert report_data(tmp_path)["sentences"][0]["attention"] is not None


@pytest.mark.parametrize("options", [[], ["--quantize", "int8", "--beam", "2"]], ids=["float", "int8"])
def test_evaluate_gives_the_same_hypotheses_and_bleu_with_report(dates_run, tmp_path, capsys, options):
    src, ref = write(tmp_path / "src.txt", SOURCES), write(tmp_path / "ref.txt", REFERENCES)
    figures = []
    for report in ([], ["--report", str(tmp_path / "report.html")]):
        json_file = tmp_path / "figures.json"
        argv = ["evaluate", "--model", str(dates_run), "--device", "cpu", "--input", str(src), "--ref",
                str(ref), "--output", str(tmp_path / "hyp.txt"), "--json", str(json_file), *options, *report]
        assert main(argv) == 0
        capsys.readouterr()
        data = json.loads(json_file.read_text(encoding="utf-8"))
        figures.append((data["bleu"], data["chrf"], (tmp_path / "hyp.txt").read_text(encoding="utf-8")))
    assert figures[0] == figures[1]
    report = report_data(tmp_path)
    assert [s["hypothesis"] for s in report["sentences"]] == figures[0][2].splitlines()
    assert report["corpus"]["bleu"] == pytest.approx(figures[0][0])
    if "int8" in options:
        assert_attention_is_the_int8_models(dates_run, report["sentences"][0])
