"""Labelled text for classification from two-column TSV files.

Format: UTF-8 (optionally gzip), one example per line, `text<TAB>label`; lines end with `\\n`
or `\\r\\n`; blank lines are skipped; there is no header line. Spaces around the label are
stripped; the text is kept as it is. Bad input raises `DataError` naming the file and the
1-based line: a line without exactly one tab, an empty text or label, invalid UTF-8, a label
that the training file does not have; a file with no examples is an error as well.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from aiayn.core.errors import DataError
from aiayn.data.corpus import read_lines

Example = tuple[str, str]  # (text, label)


def read_tsv(path: str | Path, labels: Collection[str] | None = None) -> list[Example]:
    """The (text, label) examples of a TSV file; with `labels`, any other label is an error."""
    lines = read_lines(path, allow_empty=True)
    examples: list[Example] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataError(
                f"{path}: line {number}: expected 2 tab-separated columns (text<TAB>label), "
                f"got {len(columns)}"
            )
        text, label = columns[0], columns[1].strip()
        if not text.strip():
            raise DataError(f"{path}: line {number}: the text (first column) is empty")
        if not label:
            raise DataError(f"{path}: line {number}: the label (second column) is empty")
        if labels is not None and label not in labels:
            raise DataError(
                f"{path}: line {number}: label {label!r} does not occur in the training data "
                f"(labels: {', '.join(sorted(labels))})"
            )
        examples.append((text, label))
    if not examples:
        raise DataError(f"{path}: the TSV file is empty (expected lines text<TAB>label)")
    return examples


def label_names(examples: list[Example], origin: str) -> list[str]:
    """The sorted distinct labels of the training examples (at least two)."""
    names = sorted({label for _, label in examples})
    if len(names) < 2:
        raise DataError(f"{origin}: a classifier needs at least 2 distinct labels, found {names}")
    return names
