"""`aiayn translate` and `aiayn evaluate` show progress on stderr for a long input (plain lines
to a file, no carriage return), and nothing for a short one."""

from __future__ import annotations

import pytest

from aiayn.cli.main import main
from aiayn.core.progress_display import LONG_INPUT_LINES

FAST = ["--beam", "1", "--max-extra-len", "2", "--device", "cpu", "--batch-tokens", "4000"]


@pytest.fixture
def every_chunk(monkeypatch):
    """Plain lines as often as they can come (one per chunk of lines), instead of every 30 s."""
    monkeypatch.setattr("aiayn.core.progress_display.DEFAULT_INTERVAL_S", 0.0)


def progress_lines(err: str, what: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(what)]


def test_translate_reports_a_long_input_and_not_a_short_one(model_dir, tmp_path, capsys, every_chunk):
    lines = LONG_INPUT_LINES + 100
    long_input = tmp_path / "long.txt"
    long_input.write_text("ja\n" * lines, encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(long_input), *FAST,
                 "--chunk-lines", "200"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == lines and "\r" not in err
    shown = progress_lines(err, "translate")
    assert [line.split(" | ")[1] for line in shown] == [
        f"{100 * done / lines:5.1f}% of {lines} lines" for done in (200, 400, 600, 600)
    ]
    assert shown[-1].endswith("(done)")
    short = tmp_path / "short.txt"
    short.write_text("ja\n" * 10, encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(short), *FAST]) == 0
    assert not progress_lines(capsys.readouterr().err, "translate")


def test_evaluate_reports_a_long_input(model_dir, tmp_path, capsys, every_chunk):
    lines = LONG_INPUT_LINES + 1
    source, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    source.write_text("ja\n" * lines, encoding="utf-8")
    ref.write_text("yes\n" * lines, encoding="utf-8")
    evaluate = ["evaluate", "--model", str(model_dir), "--input", str(source), "--ref", str(ref), *FAST]
    assert main(evaluate) == 0
    out, err = capsys.readouterr()
    assert "BLEU" in out and "\r" not in err
    shown = progress_lines(err, "evaluate")
    expected = [f"{p:5.1f}% of {lines} lines" for p in (99.8, 100.0, 100.0)]
    assert [line.split(" | ")[1] for line in shown] == expected
    assert main([*evaluate, "--progress", "none"]) == 0
    assert not progress_lines(capsys.readouterr().err, "evaluate")
