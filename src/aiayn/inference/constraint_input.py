"""Constraint phrases as text -> token ids of the target vocabulary (`SentenceConstraints`).

A phrase is tokenized by the model's target tokenizer as it appears inside a sentence (after a
space): with a tokenizer that marks word starts only after a space (byte-level BPE), that form
differs from the phrase alone at the start of a text, and an *included* phrase takes the
in-sentence form; with a Metaspace BPE or SentencePiece vocabulary the two are the same.

An *excluded* phrase is blocked at word level: every segmentation of each of its forms into
pieces of the vocabulary (its canonical tokens, and e.g. `▁Hu nd` for `▁Hund`) is blocked as
a token sequence, since a model can spell a word in pieces other than the tokenizer's own;
the last piece may also run on past the word into punctuation (a Metaspace BPE vocabulary
learns pieces such as `▁background.`). A sequence is blocked wherever it occurs, so a word
that continues a blocked sequence (`▁Hund e`, "Hunde") is blocked too.
Up to `MAX_SEGMENTATIONS` per form, fewest pieces first (a long word has more segmentations
than can be blocked; the rest, spellings of many short pieces, are left open, and byte
fallback tokens spelling a character in bytes are not pieces here).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from aiayn.core.errors import ConfigError
from aiayn.decoding.common import output_length_limit
from aiayn.decoding.constraints import SentenceConstraints, any_constraints
from aiayn.decoding.controls import Controls

MAX_SEGMENTATIONS = 64


class PhraseEncoder:
    """Tokenizes the constraint phrases of one target tokenizer (`Tokenizer` or SentencePiece)."""

    def __init__(self, tokenizer: object) -> None:
        self.tokenizer = tokenizer
        self._pieces: dict[str, int] | None = None
        self._sorted: list[str] = []
        self.forms = lru_cache(maxsize=4096)(self._forms)
        self.segmentations = lru_cache(maxsize=4096)(self._segmentations)

    @property
    def pieces(self) -> dict[str, int]:
        """Token string -> id of the whole vocabulary (built once)."""
        if self._pieces is None:
            tokenizer = self.tokenizer
            pieces: dict[str, int] = {}
            for i in range(tokenizer.vocab_size):  # type: ignore[attr-defined]
                if i not in tokenizer.specials.ids:  # type: ignore[attr-defined]
                    pieces.setdefault(tokenizer.id_to_token(i), i)  # type: ignore[attr-defined]
            self._pieces = pieces
            self._sorted = sorted(pieces)
        return self._pieces

    def _closing(self, rest: str) -> list[int]:
        """The pieces that start with `rest` and go on with a character that ends a word."""
        pieces = self.pieces
        found = []
        for string in self._sorted[bisect.bisect_left(self._sorted, rest) :]:
            if not string.startswith(rest):
                break
            if len(string) > len(rest) and not (string[len(rest)].isalnum() or string[len(rest)] == "_"):
                found.append(pieces[string])
        return found

    def _forms(self, phrase: str) -> tuple[tuple[int, ...], ...]:
        """The in-sentence token ids of `phrase` first, then its form at the start of a text
        when different."""
        encode = self.tokenizer.encode  # type: ignore[attr-defined]
        alone = tuple(encode(phrase))
        spaced = tuple(encode(" " + phrase))
        if len(spaced) >= len(alone) and spaced[len(spaced) - len(alone) :] == alone:
            return (alone,)  # the same tokens after a space (a leading marker token dropped)
        return (spaced, alone)

    def _segmentations(self, ids: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        """Every split of the pieces' concatenated strings into vocabulary pieces, fewest
        pieces first, at most `MAX_SEGMENTATIONS` (the tokenizer's own `ids` always among them)."""
        text = "".join(self.tokenizer.id_to_token(i) for i in ids)  # type: ignore[attr-defined]
        pieces = self.pieces
        longest = max((len(p) for p in pieces), default=1)
        # ways[i]: segmentations of text[i:], each a tuple of ids, fewest pieces first
        ways: list[list[tuple[int, ...]]] = [[] for _ in range(len(text))] + [[()]]
        for i in range(len(text) - 1, -1, -1):
            found = [(piece,) for piece in self._closing(text[i:])]
            for j in range(i + 1, min(len(text), i + longest) + 1):
                piece = pieces.get(text[i:j])
                if piece is not None:
                    found.extend((piece, *rest) for rest in ways[j])
            found.sort(key=len)
            ways[i] = found[: MAX_SEGMENTATIONS * 4]
        result = [ids] + [w for w in ways[0] if w != ids]
        return tuple(result[:MAX_SEGMENTATIONS])

    def include(self, phrase: str, where: str) -> tuple[int, ...]:
        """The token ids an output must contain for `phrase`."""
        return self.forms(self._checked(phrase, where))[0]

    def exclude(self, phrase: str, where: str) -> list[tuple[int, ...]]:
        """Every token sequence blocked for `phrase` (see the module docstring)."""
        blocked: list[tuple[int, ...]] = []
        for form in self.forms(self._checked(phrase, where)):
            blocked.extend(s for s in self.segmentations(form) if s not in blocked)
        return blocked

    def _checked(self, phrase: str, where: str) -> str:
        if not isinstance(phrase, str):
            raise ConfigError(f"{where}: a phrase must be a string, got {type(phrase).__name__}")
        ids = self.tokenizer.encode(phrase) if phrase.strip() else []  # type: ignore[attr-defined]
        unk = self.tokenizer.specials.unk_id  # type: ignore[attr-defined]
        if not ids:
            raise ConfigError(f"{where}: the phrase {phrase!r} has no tokens")
        if all(i == unk for i in ids):
            raise ConfigError(f"{where}: the phrase {phrase!r} is only unknown tokens for this model")
        return phrase

    def sentence(self, include: Sequence[str], exclude: Sequence[str], where: str) -> SentenceConstraints:
        """The constraints of one sentence, from its phrases (`where` names it in errors)."""
        wanted: list[tuple[int, ...]] = []
        for phrase in include:
            ids = self.include(phrase, where)
            if ids not in wanted:
                wanted.append(ids)
        blocked: list[tuple[int, ...]] = []
        for phrase in exclude:
            blocked.extend(s for s in self.exclude(phrase, where) if s not in blocked)
        for ids in wanted:
            if any(_contains(ids, b) for b in blocked):
                raise ConfigError(f"{where}: an included phrase contains an excluded one")
        return SentenceConstraints(tuple(wanted), tuple(blocked))


def _contains(tokens: Sequence[int], part: Sequence[int]) -> bool:
    n = len(part)
    return any(tuple(tokens[i : i + n]) == tuple(part) for i in range(len(tokens) - n + 1))


def per_text(
    values: Sequence[Sequence[str] | None] | None, count: int, name: str
) -> list[Sequence[str]]:
    """One phrase list per text from the `include` / `exclude` argument (None: none)."""
    if values is None:
        return [() for _ in range(count)]
    if isinstance(values, str) or len(values) != count:
        given = "a str" if isinstance(values, str) else f"{len(values)} lists"
        raise ConfigError(f"{name} needs one list of phrases per text ({count}), got {given}")
    lists = []
    for i, phrases in enumerate(values):
        if phrases is None:
            phrases = ()
        if isinstance(phrases, str):
            raise ConfigError(f"{name}[{i}] must be a list of phrases, got a str")
        lists.append(phrases)
    return lists


def sentence_constraints(
    encoder: PhraseEncoder, max_len: int, include: Sequence[Sequence[str]], exclude: Sequence[Sequence[str]],
    sources: Sequence[Sequence[int]], prefixes: Sequence[Sequence[int]] | None, max_len_extra: int,
    max_output_ratio: float | None, line_numbers: Sequence[int],
) -> list[SentenceConstraints]:
    """The `SentenceConstraints` of each source (its token ids), each checked to fit its output
    length limit, which grows by its constraint tokens up to the model's `max_len`."""
    found = []
    for n, (source, line) in enumerate(zip(sources, line_numbers, strict=True)):
        c = encoder.sentence(include[n], exclude[n], f"line {line}")
        limit = output_length_limit(len(source) + 1, max_len_extra, None, None, max_output_ratio)
        limit = min(limit + c.include_tokens, max_len)
        needed = c.include_tokens + (len(prefixes[n]) if prefixes else 0)
        if needed > limit:
            raise ConfigError(
                f"line {line}: the constraints (and prefix) have {needed} tokens; its output "
                f"length limit is {limit} tokens (the model's max_len is {max_len})"
            )
        found.append(c)
    return found


def text_constraints(
    translator: Any, include: Sequence[Sequence[str] | None] | None,
    exclude: Sequence[Sequence[str] | None] | None, texts: Sequence[str], todo: list[int],
    encoded: list[list[int]], prefixes: list[list[int]] | None, max_len_extra: int, beam: int,
    controls: Controls, line_numbers: Sequence[int],
) -> list[SentenceConstraints] | None:
    """The `SentenceConstraints` of the texts `todo` of a `TranslatorBase` call (None when no
    text has one), after the runtime's `_check_constraints`."""
    includes = per_text(include, len(texts), "include")
    excludes = per_text(exclude, len(texts), "exclude")
    if not any(includes) and not any(excludes):
        return None
    translator._check_constraints(any(includes), any(excludes), beam, controls)
    encoder = translator.__dict__.setdefault("_phrase_encoder", PhraseEncoder(translator.tokenizers.target))
    found = sentence_constraints(
        encoder, translator.config.max_len, [includes[i] for i in todo], [excludes[i] for i in todo], encoded,
        prefixes, max_len_extra, controls.max_output_ratio, line_numbers,
    )
    return found if any_constraints(found) else None
