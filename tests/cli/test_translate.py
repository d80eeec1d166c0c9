"""`aiayn translate / evaluate / score` end to end on a tiny model directory."""

import io
import json

import pytest

from aiayn.cli.main import main
from aiayn.inference import load
from decoding.conftest import SOURCES, TARGETS

FAST = ["--beam", "2", "--max-len", "3", "--device", "cpu"]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_translate_file_keeps_line_alignment(model_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "translate", "--model", str(model_dir), "--input", str(source), *FAST)
    assert code == 0
    lines = out.split("\n")[:-1]
    assert len(lines) == len(SOURCES) and lines[2] == ""
    # --output writes the same lines; small chunks change nothing
    target = tmp_path / "out.txt"
    code, out2, _ = run(capsys, "translate", "--model", str(model_dir), "--input", str(source),
                        "--output", str(target), "--chunk-lines", "2", *FAST)
    assert code == 0 and out2 == ""
    assert target.read_text(encoding="utf-8") == out


def test_translate_stdin_and_text(model_dir, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("zwei katzen\n\nja\n"))
    code, out, _ = run(capsys, "translate", "--model", str(model_dir), *FAST)
    assert code == 0 and len(out.split("\n")[:-1]) == 3
    first = out.split("\n")[0]
    code, out, _ = run(capsys, "translate", "--model", str(model_dir), "--text", "zwei katzen", *FAST)
    assert code == 0 and out == first + "\n"


def test_translate_nbest_format(model_dir, capsys):
    code, out, _ = run(capsys, "translate", "--model", str(model_dir), "--text", "ja", "--beam", "3",
                       "--nbest", "3", "--max-len", "2", "--device", "cpu")
    assert code == 0
    rows = [line.split("\t") for line in out.split("\n")[:-1]]
    assert 1 <= len(rows) <= 3
    assert all(len(r) == 4 and r[0] == "0" for r in rows)  # index, score, log_prob, text
    scores = [float(r[1]) for r in rows]
    assert scores == sorted(scores, reverse=True)
    translator = load(str(model_dir), "cpu")
    log_probs = translator.score(["ja"] * len(rows), [r[3] for r in rows])
    assert [float(r[2]) for r in rows] == pytest.approx(log_probs, abs=1e-4)


def test_evaluate_prints_bleu_chrf_signature_and_speed(model_dir, tmp_path, capsys):
    source, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    ref.write_text("\n".join(TARGETS) + "\n", encoding="utf-8")
    figures, hyps = tmp_path / "eval.json", tmp_path / "hyp.txt"
    code, out, _ = run(capsys, "evaluate", "--model", str(model_dir), "--input", str(source),
                       "--ref", str(ref), "--json", str(figures), "--output", str(hyps), *FAST)
    assert code == 0
    assert "BLEU" in out and "chrF" in out and "tok:13a" in out and "sentences/s" in out
    data = json.loads(figures.read_text())
    assert {"bleu", "chrf", "bleu_signature", "sentences_per_second", "tokens_per_second"} <= set(data)
    assert data["sentences"] == len(SOURCES)
    assert len(hyps.read_text(encoding="utf-8").split("\n")[:-1]) == len(SOURCES)


def test_score_prints_one_log_probability_per_line(model_dir, tmp_path, capsys):
    source, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    ref.write_text("\n".join(TARGETS) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "score", "--model", str(model_dir), "--input", str(source),
                       "--ref", str(ref), "--device", "cpu")
    assert code == 0
    values = [float(v) for v in out.split()]
    assert len(values) == len(SOURCES) and all(v < 0 for v in values)


@pytest.mark.parametrize("command", ["evaluate", "score"])
def test_bad_input_files_are_named(model_dir, tmp_path, capsys, command):
    source, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    source.write_text("a\nb\n", encoding="utf-8")
    ref.write_text("a\n", encoding="utf-8")
    code, _, err = run(capsys, command, "--model", str(model_dir), "--input", str(source), "--ref", str(ref))
    assert code == 2 and "src.txt has 2 lines but" in err and "ref.txt has 1" in err
    missing = tmp_path / "missing.txt"
    code, _, err = run(capsys, command, "--model", str(model_dir), "--input", str(missing), "--ref", str(ref))
    assert code == 2 and "missing.txt" in err


def test_translate_errors(model_dir, tmp_path, capsys):
    code, _, err = run(capsys, "translate", "--model", str(model_dir), "--input", str(tmp_path / "nope.txt"))
    assert code == 2 and "nope.txt" in err
    code, _, err = run(capsys, "translate", "--model", str(tmp_path), "--text", "ja")
    assert code == 2 and "config.json" in err
    code, _, err = run(capsys, "translate", "--model", str(model_dir), "--text", "ja", "--nbest", "5")
    assert code == 2 and "--nbest" in err
