"""`aiayn translate` on hostile input: every input either translates, one output line per
input line (empty lines give empty lines, over-long lines are truncated with a warning), or
fails with the project's error message (exit 2); never a traceback."""

from __future__ import annotations

import gzip
import logging

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aiayn.cli.main import main

from .conftest import make_model_dir

MAX_LEN = 16  # the model's positional table: lines of more than 15 tokens are truncated
FAST = ["--beam", "1", "--max-len", "2", "--device", "cpu"]
BOM = b"\xef\xbb\xbf"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model_dir(tmp_path_factory.mktemp("model"), max_len=MAX_LEN)


def translate(capsys, model_dir, path, *extra: str) -> tuple[int, str, str]:
    code = main(["translate", "--model", str(model_dir), "--input", str(path), *FAST, *extra])
    captured = capsys.readouterr()
    assert code in (0, 2)
    assert "Traceback" not in captured.err
    if code == 2:
        assert captured.err.startswith("aiayn translate: error: "), captured.err
    return code, captured.out, captured.err


def input_lines(data: bytes) -> list[str]:
    """The lines the translator should see: split on `\\n` only, `\\r\\n` and a BOM removed."""
    text = data.removeprefix(BOM).decode("utf-8")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def output_lines(out: str) -> list[str]:
    assert out == "" or out.endswith("\n")
    return out.split("\n")[:-1]


line_text = st.one_of(
    st.text(alphabet="einhudlaftzwkr äöAB", max_size=30),
    st.text(max_size=20),  # anything: NUL, U+2028, combining marks, surrogate-free unicode
    st.sampled_from(["", " ", "\t", "\x00", "\x00\x00abc", "\u2028", "\x85", "\x0c", "\x1c", "a\rb"]),
    st.just("ein " * 400),
)


@st.composite
def input_files(draw) -> bytes:
    lines = [draw(line_text).encode("utf-8") for _ in range(draw(st.integers(0, 8)))]
    newline = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = newline.join(lines)
    if lines and draw(st.booleans()):
        data += newline  # or no final newline
    if draw(st.integers(0, 9)) == 0:
        data = BOM + data
    if data and draw(st.integers(0, 5)) == 0:  # some invalid UTF-8 somewhere
        cut = draw(st.integers(0, len(data)))
        data = data[:cut] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + data[cut:]
    return data


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=input_files())
@example(data=b"")
@example(data=BOM)
@example(data=b"\n\n\n")
@example(data=b"ein hund\r\n\r\nzwei katzen")
@example(data=b"\x00\x00\x00")
@example(data=b"a" * 100_000)
@example(data=b"ok\n\xff\xfe\n")
@example(data=b"\x1f\x8b\x08\x00 not really gzip\n")
def test_translate_any_input_keeps_alignment_or_fails_cleanly(model_dir, tmp_path, capsys, data):
    path = tmp_path / "input.txt"
    path.write_bytes(data)
    code, out, err = translate(capsys, model_dir, path)
    if data.startswith(b"\x1f\x8b"):  # looks like gzip, is not
        assert code == 2 and "cannot read input" in err and str(path) in err
        return
    try:
        expected = input_lines(data)
    except UnicodeDecodeError:
        assert code == 2 and "is not valid UTF-8" in err and str(path) in err
        return
    assert code == 0, err
    outputs = output_lines(out)
    assert len(outputs) == len(expected)
    for source, output in zip(expected, outputs, strict=True):
        if not source.strip():
            assert output == ""


def test_crlf_and_missing_final_newline_change_nothing(model_dir, tmp_path, capsys):
    sentences = [b"ein hund", b"", b"zwei katzen", b"  ", b"ja"]
    outputs = []
    for name, data in {
        "lf": b"\n".join(sentences) + b"\n",
        "crlf": b"\r\n".join(sentences) + b"\r\n",
        "no-final-newline": b"\n".join(sentences),
        "bom": BOM + b"\n".join(sentences) + b"\n",
        "gzip": gzip.compress(b"\n".join(sentences) + b"\n"),
    }.items():
        path = tmp_path / f"{name}.txt"
        path.write_bytes(data)
        code, out, _ = translate(capsys, model_dir, path)
        assert code == 0
        outputs.append(out)
    assert all(out == outputs[0] for out in outputs)
    lines = output_lines(outputs[0])
    assert len(lines) == 5 and lines[1] == "" and lines[3] == ""


def test_long_line_is_truncated_with_a_warning_naming_its_line(model_dir, tmp_path, capsys, caplog):
    path = tmp_path / "input.txt"
    path.write_bytes(b"\n\nein hund\n" + b"zwei katzen " * 1000 + b"\n")
    with caplog.at_level(logging.WARNING, logger="aiayn"):
        code, out, _ = translate(capsys, model_dir, path)
    assert code == 0 and len(output_lines(out)) == 4
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["source line 4 has 12000 tokens; truncated to 15 (the model's max_len is 16)"]


def test_long_line_with_on_long_line_error_names_file_and_line(model_dir, tmp_path, capsys):
    path = tmp_path / "input.txt"
    path.write_bytes(b"ein hund\n\n" + b"x" * 40 + b"\nja\n")
    code, out, err = translate(capsys, model_dir, path, "--on-long-line", "error")
    assert code == 2 and out == ""
    assert f"aiayn translate: error: {path}: source line 3 has 40 tokens; the model takes at most 15" in err
    code, out, _ = translate(capsys, model_dir, path, "--on-long-line", "truncate")
    assert code == 0 and len(output_lines(out)) == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "{tmp}/missing.txt"], "input file not found"),
        (["--input", "{tmp}"], "input file not found"),
        (["--text", "ein hund", "--output", "{tmp}/file/out.txt"], "cannot write --output"),
        (["--text", "ein hund", "--nbest", "3"], "--nbest must be between 1 and --beam"),
        (["--text", "ein hund", "--chunk-lines", "0"], "argument --chunk-lines: must be an integer >= 1"),
    ],
)
def test_bad_arguments_are_clear_errors(model_dir, tmp_path, capsys, argv, message):
    (tmp_path / "file").write_text("a regular file")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = main(["translate", "--model", str(model_dir), *FAST, *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("text", ["", "\x00", "ein " * 500, "a\nb", "\u2028x"])
def test_text_argument_gives_one_line(model_dir, capsys, text):
    code = main(["translate", "--model", str(model_dir), *FAST, "--text", text])
    out = capsys.readouterr().out
    assert code == 0 and len(output_lines(out)) == 1
