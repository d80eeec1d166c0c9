"""The evaluation report's flags: pure functions that say what may be wrong with one translation.

Each flag reads the model's own output (its best beam hypothesis and, for *omission*, the
encoder-decoder attention of Sec. 3.2.3 that produced it) and, where there is one, the
reference:

- omission: source words (their tokens together; words without a letter or digit left out)
  whose total cross-attention mass over the whole output (every decoder position, mean over
  layers and heads) stays below `omission_threshold`;
- repetition: an n-gram (n >= `repetition_ngram`, in words) the hypothesis has more than once
  and more often than the reference; also a word repeated back to back ("the the");
- length: hypothesis/reference length (sacreBLEU 13a tokens; the source without a reference)
  outside [`length_low`, `length_high`];
- unknown: source or hypothesis tokens that are the vocabulary's unknown token or byte-fallback
  pieces (`<0xE2>`): text the model could not see as words;
- copy: source words (with at least `copy_min_chars` letters) found untranslated in the
  hypothesis but not in the reference.

A flag a model cannot give (omission without attention, e.g. a CTranslate2 model) is
"unavailable", never silently absent.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

FLAGS = ("omission", "repetition", "length", "unknown", "copy")

_BYTE_FALLBACK = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
_PIECE_MARKS = "▁Ġ#"  # word-start marks of Metaspace / byte-level BPE, WordPiece continuation


@dataclass(frozen=True)
class FlagSettings:
    """The thresholds of the flags (the CLI options of `aiayn evaluate --report` set them)."""

    omission_threshold: float = 0.2
    repetition_ngram: int = 2
    length_low: float = 0.6
    length_high: float = 1.5
    copy_min_chars: int = 4

    def descriptions(self, with_reference: bool = True) -> dict[str, str]:
        """One sentence per flag that says when it fires (the page's tooltips)."""
        against = "reference" if with_reference else "source"
        return {
            "omission": (
                "a source word (its tokens together) received less than "
                f"{self.omission_threshold:g} of cross-attention in total over the whole output "
                "(mean over layers and heads): the model may have dropped it"
            ),
            "repetition": (
                f"a {self.repetition_ngram}-gram or longer occurs more than once in the hypothesis"
                + (" and more often than in the reference" if with_reference else "")
                + ", or a word is repeated back to back"
            ),
            "length": (
                f"hypothesis/{against} length (13a tokens) is below {self.length_low:g} "
                f"or above {self.length_high:g}"
            ),
            "unknown": "a source or output token is the unknown token or a byte-fallback piece",
            "copy": (
                f"a source word of {self.copy_min_chars}+ letters appears untranslated in the hypothesis"
                + (" but not in the reference" if with_reference else "")
            ),
        }


def attention_mass(cross: np.ndarray) -> np.ndarray:
    """Total attention each source position receives over the output.

    Args:
        cross: encoder-decoder attention (L, H, T, S) or (T, S) (T = `<bos>` + output tokens,
            S = source tokens + `<eos>`); each query row sums to 1.
    Returns:
        (S,) the column sums of the mean over layers and heads (they add up to T).
    """
    weights = np.asarray(cross, dtype=np.float64)
    if weights.ndim == 4:
        weights = weights.mean(axis=(0, 1))
    if weights.ndim != 2:
        raise ValueError(f"cross-attention must be (L, H, T, S) or (T, S), got shape {weights.shape}")
    return weights.sum(axis=0)


def omission(
    cross: np.ndarray,
    threshold: float,
    words: Sequence[int] | None = None,
    checked: Sequence[bool] | None = None,
) -> list[int]:
    """Source token positions of the words whose `attention_mass` together is below `threshold`.

    Args:
        cross: (L, H, T, S) or (T, S) encoder-decoder attention; the last key is `<eos>`, never flagged.
        threshold: the least total attention a word must receive.
        words: the word index of each source token but `<eos>` (S - 1 of them, see `token_words`);
            None: each token is a word.
        checked: per word, whether it may be flagged (None: all).
    """
    mass = attention_mass(cross)[:-1]
    words = list(words) if words is not None else list(range(len(mass)))
    word_mass: dict[int, float] = {}
    for j, word in enumerate(words):
        word_mass[word] = word_mass.get(word, 0.0) + float(mass[j])
    dropped = {w for w, m in word_mass.items() if m < threshold and (checked is None or checked[w])}
    return [j for j, word in enumerate(words) if word in dropped]


def token_words(text: str, tokens: Sequence[str]) -> list[int]:
    """The index of the whitespace-separated word of `text` that each token lies in (a token not
    found in the text, such as `<unk>`, goes with the word of the token before it)."""
    starts = [m.start() for m in re.finditer(r"\S+", text)]
    words, word = [], 0
    for span in token_spans(text, tokens):
        if span is not None:
            word = max(0, sum(start <= span[0] for start in starts) - 1)
        words.append(word)
    return words


def _ngrams(words: Sequence[str], n: int) -> Counter:
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def repetition(hypothesis: Sequence[str], reference: Sequence[str] | None, ngram: int) -> list[str]:
    """Repeated n-grams of the hypothesis (words), as text, longest first.

    An n-gram with n >= `ngram` counts when it occurs more than once and more often than in the
    reference (without a reference: more than once); a word right after itself counts too, unless
    the reference has the same pair. N-grams inside a longer reported one are not repeated.
    """
    found: list[tuple[str, ...]] = []
    for n in range(len(hypothesis) - 1, max(ngram, 1) - 1, -1):
        hyp_counts = _ngrams(hypothesis, n)
        ref_counts = _ngrams(reference, n) if reference is not None else Counter()
        for gram, count in hyp_counts.items():
            if count > 1 and count > ref_counts[gram] and not any(_inside(gram, f) for f in found):
                found.append(gram)
    ref_pairs = _ngrams(reference, 2) if reference is not None else Counter()
    for first, second in pairwise(hypothesis):
        pair = (first, second)
        if first == second and not ref_pairs[pair] and not any(_inside(pair, f) for f in found):
            found.append(pair)
    return [" ".join(gram) for gram in found]


def _inside(small: tuple[str, ...], big: tuple[str, ...]) -> bool:
    n = len(small)
    return any(big[i : i + n] == small for i in range(len(big) - n + 1))


def length_ratio(hypothesis_length: int, other_length: int) -> float | None:
    """hypothesis / reference (or source) length; None when the other is empty."""
    return hypothesis_length / other_length if other_length > 0 else None


def length(ratio: float | None, low: float, high: float) -> bool:
    """True when the length ratio lies outside [low, high]."""
    return ratio is not None and not low <= ratio <= high


def is_unknown_token(token: str, token_id: int, unk_id: int | None) -> bool:
    """True for the unknown token and for byte-fallback pieces (`<0x41>`)."""
    return (unk_id is not None and token_id == unk_id) or bool(_BYTE_FALLBACK.match(token))


def unknown(tokens: Sequence[str], ids: Sequence[int], unk_id: int | None) -> list[int]:
    """Positions of unknown or byte-fallback tokens in one token sequence."""
    return [i for i, (t, k) in enumerate(zip(tokens, ids, strict=True)) if is_unknown_token(t, k, unk_id)]


def copy(
    source: Sequence[str], hypothesis: Sequence[str], reference: Sequence[str] | None, min_chars: int
) -> list[str]:
    """Source words (at least `min_chars` letters) present in the hypothesis and absent from the
    reference (without a reference: present in the hypothesis), in source order, once each."""
    hyp, ref = set(hypothesis), set(reference or ())
    found: list[str] = []
    for word in source:
        letters = sum(ch.isalpha() for ch in word)
        if letters >= min_chars and word in hyp and word not in ref and word not in found:
            found.append(word)
    return found


def token_spans(text: str, tokens: Sequence[str]) -> list[tuple[int, int] | None]:
    """Where each token lies in `text` as (start, end) characters, found left to right; None for a
    token whose text is not found there (special, unknown or byte-fallback tokens)."""
    spans: list[tuple[int, int] | None] = []
    position = 0
    for token in tokens:
        piece = token.strip(_PIECE_MARKS) or token
        start = text.find(piece, position) if piece else -1
        if start < 0 or _BYTE_FALLBACK.match(token):
            spans.append(None)
            continue
        spans.append((start, start + len(piece)))
        position = start + len(piece)
    return spans


def copied_token_positions(text: str, tokens: Sequence[str], copied_words: Sequence[str]) -> list[int]:
    """Positions of the source tokens that lie inside an occurrence of a copied word in the
    source `text` (to highlight them)."""
    covered: set[int] = set()
    for word in copied_words:
        for match in re.finditer(re.escape(word), text):
            covered.update(range(match.start(), match.end()))
    return [
        j for j, span in enumerate(token_spans(text, tokens))
        if span is not None and span[1] > span[0] and all(c in covered for c in range(*span))
    ]
