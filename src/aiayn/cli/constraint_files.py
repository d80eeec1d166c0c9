"""The constraint files of `aiayn translate` and `aiayn evaluate`: `--constraints FILE` (JSON
lines, one object per input line) and `--glossary FILE` (TSV: source term, target term).

    {"include": ["Hund"], "exclude": ["Köter"]}     # line 1 must contain "Hund", avoid "Köter"
    {}                                               # line 2: none

A glossary entry applies to exactly the input lines whose source contains its source term as
a whole word (not inside a longer word; case-sensitive unless `--glossary-ignore-case`): its
target term is then a phrase to include. Every error names the file and the line and stops
the command before anything is written (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.core.errors import DataError

KEYS = ("include", "exclude")


def add_constraint_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("lexical constraints (docs/constraints.md)")
    group.add_argument("--constraints", metavar="FILE",
                       help='JSON lines, one per input line: {"include": [...], "exclude": [...]} ({}: none)')
    group.add_argument("--glossary", metavar="FILE",
                       help="TSV of source term<TAB>target term: the target term must appear in the "
                       "translation of each line whose source holds the term as a whole word")
    group.add_argument("--glossary-ignore-case", action="store_true",
                       help="match the glossary's source terms regardless of case")


@dataclass(frozen=True)
class GlossaryEntry:
    source: str
    target: str


@dataclass
class LineConstraints:
    """The phrases of each input line, and the glossary entries applied to it."""

    include: list[list[str]] = field(default_factory=list)
    exclude: list[list[str]] = field(default_factory=list)
    glossary: list[list[GlossaryEntry]] | None = None

    def __len__(self) -> int:
        return len(self.include)

    def chunk(self, start: int, stop: int) -> dict:
        """The `include` / `exclude` keyword arguments of lines start .. stop - 1."""
        return {"include": self.include[start:stop], "exclude": self.exclude[start:stop]}


def _lines(path: str) -> list[str]:
    from aiayn.data.corpus import decode_utf8  # not at the top: `aiayn.data` imports torch

    file = Path(path)
    if not file.is_file():
        raise DataError(f"{path}: file not found")
    text = decode_utf8(file.read_bytes(), path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise DataError(f"{path}: the file is empty")
    return [line.removesuffix("\r") for line in lines]


def _phrases(value: object, path: str, number: int, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise DataError(f"{path}: line {number}: {key!r} must be a list of strings")
    for phrase in value:
        if not phrase.strip():
            raise DataError(f"{path}: line {number}: an empty {key} phrase")
    return value


def read_constraints(path: str) -> tuple[list[list[str]], list[list[str]]]:
    """The include and exclude phrases of each line of a constraints file."""
    include, exclude = [], []
    for number, line in enumerate(_lines(path), start=1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(
                f"{path}: line {number} is not JSON ({error.msg}); {{}} means no constraints"
            ) from None
        if not isinstance(entry, dict):
            raise DataError(f"{path}: line {number} must be a JSON object, as {{\"include\": [\"...\"]}}")
        unknown = sorted(set(entry) - set(KEYS))
        if unknown:
            raise DataError(f"{path}: line {number}: unknown key(s) {unknown}; known: {list(KEYS)}")
        include.append(_phrases(entry.get("include", []), path, number, "include"))
        exclude.append(_phrases(entry.get("exclude", []), path, number, "exclude"))
    return include, exclude


def read_glossary(path: str) -> list[GlossaryEntry]:
    """The entries of a glossary TSV (blank lines skipped)."""
    entries = []
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise DataError(
                f"{path}: line {number} must be 'source term<TAB>target term', got {len(fields)} field(s)"
            )
        entries.append(GlossaryEntry(fields[0].strip(), fields[1].strip()))
    if not entries:
        raise DataError(f"{path}: no glossary entries")
    return entries


def glossary_matches(
    entries: list[GlossaryEntry], sources: list[str], ignore_case: bool
) -> list[list[GlossaryEntry]]:
    """The entries whose source term occurs in each source as a whole word."""
    flags = re.IGNORECASE if ignore_case else 0
    patterns = [re.compile(rf"(?<!\w){re.escape(e.source)}(?!\w)", flags) for e in entries]
    return [[e for e, p in zip(entries, patterns, strict=True) if p.search(s)] for s in sources]


def line_constraints(args: argparse.Namespace, sources: list[str], input_name: str) -> LineConstraints | None:
    """The constraints of every source line from --constraints and --glossary (None: neither)."""
    if args.constraints is None and args.glossary is None:
        return None
    result = LineConstraints([[] for _ in sources], [[] for _ in sources])
    if args.constraints is not None:
        include, exclude = read_constraints(args.constraints)
        if len(include) != len(sources):
            raise DataError(
                f"{args.constraints}: {len(include)} lines, but {input_name} has {len(sources)}: give one "
                "object per input line ({} for none)"
            )
        result.include, result.exclude = include, exclude
    if args.glossary is not None:
        applied = glossary_matches(read_glossary(args.glossary), sources, args.glossary_ignore_case)
        result.glossary = applied
        for phrases, entries in zip(result.include, applied, strict=True):
            phrases.extend(e.target for e in entries if e.target not in phrases)
    return result


def check_phrases(translator: object, constraints: LineConstraints, name: str) -> None:
    """Tokenize every phrase before anything is decoded: a phrase the model cannot spell stops
    the command naming its file and line."""
    from aiayn.core.errors import ConfigError
    from aiayn.inference.constraint_input import PhraseEncoder

    encoder = PhraseEncoder(translator.tokenizers.target)  # type: ignore[attr-defined]
    pairs = zip(constraints.include, constraints.exclude, strict=True)
    for number, (include, exclude) in enumerate(pairs, start=1):
        try:
            encoder.sentence(include, exclude, f"line {number}")
        except ConfigError as error:
            raise DataError(f"{name}: {error}") from None
