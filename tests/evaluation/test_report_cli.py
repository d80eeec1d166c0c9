"""`aiayn evaluate --report` and `aiayn translate --report` end to end on a tiny model (and its
CTranslate2 export), and their one-line errors on bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

import aiayn
from aiayn.cli.main import main
from aiayn.evaluation.report import decode_attention

SOURCES = ["ein hund läuft", "zwei katzen", "ein ☃ hund"]
REFERENCES = ["a dog runs", "two cats", "a dog"]


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path):
    return write(tmp_path / "src.txt", SOURCES), write(tmp_path / "ref.txt", REFERENCES)


def run_fails(argv, capsys) -> str:
    """Run the CLI, expect exit status 2 and one error line without a traceback; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_evaluate_writes_page_and_json_with_the_models_attention(tiny_model, files, tmp_path, capsys):
    src, ref = files
    out = tmp_path / "report.html"
    argv = [
        "evaluate",
        "--model",
        str(tiny_model),
        "--input",
        str(src),
        "--ref",
        str(ref),
        "--device",
        "cpu",
        "--report",
        str(out),
        "--beam",
        "2",
        "--max-len",
        "5",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    page = out.read_text(encoding="utf-8")
    assert "default-src 'none'" in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert f"BLEU {data['corpus']['bleu']:.2f}" in printed
    assert [s["source"] for s in data["sentences"]] == SOURCES
    assert [s["reference"] for s in data["sentences"]] == REFERENCES
    assert "unknown" in data["sentences"][2]["flags"]  # '☃' is not in the character vocabulary
    # the hypotheses are the model's beam output, and the attention is its own on them
    translator = aiayn.load(tiny_model, "cpu", task="translation")
    assert [s["hypothesis"] for s in data["sentences"]] == translator.translate(
        SOURCES, beam=2, max_len_extra=5
    )
    sentence = data["sentences"][0]
    src_ids = [*translator.tokenizers.source.encode(SOURCES[0]), translator.model.config.eos_id]
    tgt_ids = [translator.model.config.bos_id, *translator.tokenizers.target.encode(sentence["hypothesis"])]
    import torch

    translator.model.eval()
    maps = translator.model.attention_maps(torch.tensor([src_ids]), torch.tensor([tgt_ids]))
    expected = torch.stack([m[0] for m in maps.cross]).numpy()  # (L, H, T, S)
    np.testing.assert_allclose(decode_attention(sentence["attention"]), expected, atol=0.5 / 255 + 1e-6)


def test_translate_report_without_reference(tiny_model, files, tmp_path, capsys):
    src, _ = files
    out, hyp = tmp_path / "t.html", tmp_path / "t.hyp"
    argv = [
        "translate",
        "--model",
        str(tiny_model),
        "--input",
        str(src),
        "--output",
        str(hyp),
        "--device",
        "cpu",
        "--report",
        str(out),
        "--max-len",
        "5",
    ]
    assert main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert not data["has_reference"] and "bleu" not in data["corpus"]
    assert hyp.read_text(encoding="utf-8").splitlines() == [s["hypothesis"] for s in data["sentences"]]


def test_ctranslate2_model_marks_attention_unavailable(tiny_model, files, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    from aiayn.export.ctranslate2 import export_ctranslate2

    ct2 = export_ctranslate2(tiny_model, tmp_path / "ct2")
    src, ref = files
    out = tmp_path / "ct2.html"
    argv = [
        "evaluate",
        "--model",
        str(ct2),
        "--input",
        str(src),
        "--ref",
        str(ref),
        "--report",
        str(out),
        "--omission-threshold",
        "0.5",
        "--max-len",
        "5",
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "omission flag and attention view unavailable: a CTranslate2 model" in err
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert data["flags"]["omission"]["available"] is False
    assert "CTranslate2" in data["flags"]["omission"]["note"]
    assert all(s["attention"] is None and s["unavailable"] == ["omission"] for s in data["sentences"])
    assert "unknown" in data["sentences"][2]["flags"]  # the text flags still work


def test_bad_input_gives_one_line_errors(tiny_model, files, tmp_path, capsys):
    src, ref = files
    base = ["evaluate", "--model", str(tiny_model), "--device", "cpu"]
    short = write(tmp_path / "short.txt", REFERENCES[:2])
    err = run_fails(
        [*base, "--input", str(src), "--ref", str(short), "--report", str(tmp_path / "r.html")], capsys
    )
    assert "has 3 lines but" in err and "short.txt has 2" in err
    empty = write(tmp_path / "empty.txt", [])
    err = run_fails(
        [*base, "--input", str(empty), "--ref", str(empty), "--report", str(tmp_path / "r.html")], capsys
    )
    assert "empty" in err
    err = run_fails(
        [*base, "--input", str(src), "--ref", str(ref), "--report", str(tmp_path / "r.txt")], capsys
    )
    assert ".html" in err
    err = run_fails([*base, "--input", str(src), "--ref", str(ref), "--compare-hyp", str(ref)], capsys)
    assert "need --report" in err
    err = run_fails(
        [
            *base,
            "--input",
            str(src),
            "--ref",
            str(ref),
            "--report",
            str(tmp_path / "r.html"),
            "--compare-hyp",
            str(short),
        ],
        capsys,
    )
    assert "short.txt has 2" in err
    err = run_fails(
        [
            "translate",
            "--model",
            str(tiny_model),
            "--input",
            str(empty),
            "--report",
            str(tmp_path / "t.html"),
        ],
        capsys,
    )
    assert "no lines" in err
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "r.json").exists()
