"""Corpus BLEU and chrF through sacrebleu (paper Sec. 6.1 reports BLEU).

Scores are computed on detokenized text, cased, with sacrebleu's default `13a`
tokenization, so they are comparable across papers; the *signature* string (e.g.
``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``) records exactly how.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sacrebleu


@dataclass(frozen=True)
class MetricScore:
    """One corpus-level score: `name` ('BLEU' or 'chrF'), `score` (0-100), sacrebleu's
    `signature`, and `details`, sacrebleu's one-line summary (n-gram precisions, BP ...)."""

    name: str
    score: float
    signature: str
    details: str

    def __str__(self) -> str:
        return f"{self.name} = {self.score:.2f}  ({self.signature})"


def _references(hyps: Sequence[str], refs: Sequence[str] | Sequence[Sequence[str]]) -> list[list[str]]:
    """One reference stream (a list of str) or several -> sacrebleu's list of streams."""
    if isinstance(refs, str) or isinstance(hyps, str):
        raise TypeError("hyps and refs must be lists of sentences, not one string")
    single = all(isinstance(ref, str) for ref in refs)
    streams = [list(refs)] if single else [list(stream) for stream in refs]
    for stream in streams:
        if len(stream) != len(hyps):
            raise ValueError(f"{len(hyps)} hypotheses but {len(stream)} references")
    return streams


def corpus_bleu(
    hyps: Sequence[str],
    refs: Sequence[str] | Sequence[Sequence[str]],
    lowercase: bool = False,
    tokenize: str = "13a",
) -> MetricScore:
    """Corpus BLEU (Papineni et al. 2002) of detokenized hypotheses against references.

    Args:
        hyps: one hypothesis per sentence.
        refs: one reference per sentence, or several such lists (multiple references).
        lowercase: case-insensitive BLEU (the signature then says `case:lc`).
        tokenize: sacrebleu tokenizer ('13a' default; 'intl', 'zh', 'char', 'none', ...).
    """
    metric = sacrebleu.BLEU(lowercase=lowercase, tokenize=tokenize)
    result = metric.corpus_score(list(hyps), _references(hyps, refs))
    return MetricScore("BLEU", float(result.score), str(metric.get_signature()), str(result))


def corpus_chrf(
    hyps: Sequence[str],
    refs: Sequence[str] | Sequence[Sequence[str]],
    lowercase: bool = False,
) -> MetricScore:
    """Corpus chrF (Popović 2015): character n-gram F-score, beta 2, sacrebleu defaults."""
    metric = sacrebleu.CHRF(lowercase=lowercase)
    result = metric.corpus_score(list(hyps), _references(hyps, refs))
    return MetricScore("chrF", float(result.score), str(metric.get_signature()), str(result))
