"""How well translations kept their lexical constraints (`aiayn evaluate --constraints`,
`benchmarks/constraints.py`).

An included phrase is *kept* when it occurs in the detokenized output (as a substring: the
constraint is on tokens, and `▁dog` is also the start of `dogs`); an excluded phrase *appears*
when it occurs as a whole word (not inside a longer word: word-level blocking stops the word,
not every string that contains it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def whole_word(phrase: str, text: str) -> bool:
    """Whether `phrase` occurs in `text` with no word character right before or after it."""
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def constraint_rates(
    outputs: Sequence[str], include: Sequence[Sequence[str]], exclude: Sequence[Sequence[str]],
    met: Sequence[bool],
) -> dict:
    """The JSON-ready figures: phrases to include and how many were kept (`keep_rate`), lines
    flagged `constraints_met: false`, excluded phrases and how many appear (`exclude_rate`)."""
    wanted = sum(len(p) for p in include)
    kept = sum(phrase in text for text, phrases in zip(outputs, include, strict=True) for phrase in phrases)
    avoided = sum(len(p) for p in exclude)
    appeared = sum(
        whole_word(phrase, text) for text, phrases in zip(outputs, exclude, strict=True) for phrase in phrases
    )
    return {
        "include_phrases": wanted,
        "include_kept": kept,
        "keep_rate": kept / wanted if wanted else None,
        "lines_with_include": sum(bool(p) for p in include),
        "lines_unmet": sum(not m for m in met),
        "exclude_phrases": avoided,
        "exclude_appeared": appeared,
        "exclude_rate": appeared / avoided if avoided else None,
    }


def rates_summary(rates: dict) -> str:
    """One line for `aiayn evaluate`'s summary."""
    parts = []
    if rates["include_phrases"]:
        parts.append(f"{rates['include_kept']}/{rates['include_phrases']} phrases to include kept "
                     f"(keep rate {rates['keep_rate']:.1%}; {rates['lines_unmet']} line(s) "
                     "constraints_met false)")
    if rates["exclude_phrases"]:
        parts.append(f"{rates['exclude_appeared']}/{rates['exclude_phrases']} excluded phrases appear")
    return "constraints: " + ("; ".join(parts) or "none")
