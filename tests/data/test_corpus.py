"""Corpus files: plain and gzip, line endings, errors naming the file, pair filtering."""

import gzip
import os
from pathlib import Path

import pytest

from aiayn.core.errors import DataError
from aiayn.data import data_root, filter_pairs, read_lines, read_parallel
from aiayn.data.paths import repo_root

LINES = ["Ein Hund läuft.", "", "  Zwei Männer  ", "Café – 日本"]


def write(path: Path, data: bytes, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("name,gz", [("a.txt", False), ("a.de", False), ("a.de.gz", True)])
def test_read_lines_plain_and_gzip(tmp_path, name, gz):
    path = write(tmp_path / name, ("\n".join(LINES) + "\n").encode(), gz=gz)
    assert read_lines(path) == LINES


def test_gzip_detected_by_magic_bytes_without_suffix(tmp_path):
    path = write(tmp_path / "corpus.txt", b"one\ntwo\n", gz=True)
    assert read_lines(path) == ["one", "two"]


def test_crlf_and_missing_final_newline(tmp_path):
    path = write(tmp_path / "crlf.txt", "a b\r\n\r\nc\u2028d\x0ce\r\nlast".encode())
    # Only "\n" ends a line: U+2028 and form feeds stay inside it, keeping files aligned.
    assert read_lines(path) == ["a b", "", "c\u2028d\x0ce", "last"]


def test_byte_order_mark_is_dropped(tmp_path):
    assert read_lines(write(tmp_path / "bom.txt", b"\xef\xbb\xbfhi\nthere\n")) == ["hi", "there"]


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = write(tmp_path / "bad.de.gz", b"ok\nstill ok\nbroken \xff here\nok\n", gz=True)
    with pytest.raises(DataError, match=r"bad\.de\.gz: line 3 "):
        read_lines(path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataError, match=r"missing\.txt"):
        read_lines(tmp_path / "missing.txt")
    empty = write(tmp_path / "empty.txt", b"")
    with pytest.raises(DataError, match=r"empty\.txt"):
        read_lines(empty)
    assert read_lines(empty, allow_empty=True) == []
    assert read_lines(write(tmp_path / "blank.txt", b"\n")) == [""]  # one empty line


def test_corrupt_gzip_names_file(tmp_path):
    path = write(tmp_path / "trunc.gz", gzip.compress(b"hello\n" * 100)[:20])
    with pytest.raises(DataError, match=r"trunc\.gz"):
        read_lines(path)


def test_read_parallel(tmp_path):
    src = write(tmp_path / "x.de", b"eins\nzwei\n")
    tgt = write(tmp_path / "x.en.gz", b"one\r\ntwo", gz=True)
    assert read_parallel(src, tgt) == [("eins", "one"), ("zwei", "two")]


def test_read_parallel_length_mismatch_names_both_files_and_counts(tmp_path):
    src = write(tmp_path / "train.de", b"a\nb\nc\n")
    tgt = write(tmp_path / "train.en", b"a\nb\n")
    with pytest.raises(DataError) as err:
        read_parallel(src, tgt)
    message = str(err.value)
    assert "train.de" in message and "train.en" in message
    assert "3 lines" in message and "2 lines" in message


def test_filter_pairs_counts_and_log_line():
    pairs = [
        ([5, 6], [7]),
        ([], [7]),
        ([5], []),
        ([5] * 4, [7]),
        ([5], [7] * 4),
        ([5] * 3, [7] * 3),
    ]
    kept, stats = filter_pairs(pairs, max_len=3, origin="train.de")
    assert kept == [([5, 6], [7]), ([5] * 3, [7] * 3)]
    assert (stats.total, stats.empty, stats.too_long, stats.kept) == (6, 2, 2, 2)
    assert stats.kept_indices == [0, 5]
    assert stats.describe().startswith(
        "dropped 2 empty pairs and 2 pairs longer than 3 tokens from train.de"
    )


def test_filter_text_pairs_whitespace_is_empty_and_no_limit():
    kept, stats = filter_pairs([("a", " \t"), ("abc" * 50, "x")], max_len=None, origin="f")
    assert kept == [("abc" * 50, "x")] and stats.empty == 1 and stats.too_long == 0
    _, stats = filter_pairs([("a", "b"), ("abcd", "b")], max_len=3, origin="f")
    assert "dropped 0 empty pairs and 1 pair longer than 3 tokens" in stats.describe()


def test_filter_pairs_nothing_left_names_origin():
    with pytest.raises(DataError, match=r"corpus\.gz"):
        filter_pairs([("", "x"), ("long", "x")], max_len=2, origin="corpus.gz")
    with pytest.raises(DataError, match=r"corpus\.gz"):
        filter_pairs([], max_len=2, origin="corpus.gz")


def test_data_root_env_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv("AIAYN_DATA_DIR", str(tmp_path))
    assert data_root() == tmp_path
    monkeypatch.delenv("AIAYN_DATA_DIR")
    root = repo_root()
    assert root is not None and (root / "pyproject.toml").is_file()
    assert data_root() == (root / ".." / "shared" / "data").resolve()
    assert os.path.isabs(data_root())
