"""Reading labelled TSV files: examples, and bad input named by file and line."""

import gzip

import pytest

from aiayn.classify.tsv import label_names, read_tsv
from aiayn.core.errors import DataError


def write(tmp_path, content: bytes, name="data.tsv"):
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_reads_examples_skipping_blank_lines(tmp_path):
    path = write(tmp_path, b"great film\tpos\r\n\nawful  \t neg \nmeh, fine\tpos")
    assert read_tsv(path) == [("great film", "pos"), ("awful  ", "neg"), ("meh, fine", "pos")]
    assert label_names(read_tsv(path), str(path)) == ["neg", "pos"]
    packed = tmp_path / "data.tsv.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert read_tsv(packed) == read_tsv(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"a\tpos\nno tab here\nc\tneg\n", r"data.tsv: line 2: expected 2 tab-separated columns .* got 1"),
        (b"a\tpos\textra\n", r"data.tsv: line 1: expected 2 tab-separated columns .* got 3"),
        (b"a\tpos\n  \tneg\n", r"data.tsv: line 2: the text .* is empty"),
        (b"a\tpos\nb\t \n", r"data.tsv: line 2: the label .* is empty"),
        (b"a\tpos\nb\tneg\nbad \xe9 byte\tpos\n", r"data.tsv: line 3 is not valid UTF-8"),
        (b"", r"data.tsv: the TSV file is empty"),
        (b"\n\n", r"data.tsv: the TSV file is empty"),
    ],
)
def test_bad_files_are_named_with_their_line(tmp_path, content, message):
    with pytest.raises(DataError, match=message):
        read_tsv(write(tmp_path, content))


def test_unknown_labels_and_single_labels_are_errors(tmp_path):
    path = write(tmp_path, b"a\tpos\nb\tmaybe\n", "valid.tsv")
    with pytest.raises(DataError, match=r"valid.tsv: line 2: label 'maybe' does not occur"):
        read_tsv(path, labels={"pos", "neg"})
    with pytest.raises(DataError, match="at least 2 distinct labels"):
        label_names([("a", "pos"), ("b", "pos")], "train.tsv")
    with pytest.raises(DataError, match="not found"):
        read_tsv(tmp_path / "missing.tsv")
