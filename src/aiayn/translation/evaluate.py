"""Evaluate a translation model on a test set: decode, then BLEU and chrF, and speed.

This is what `aiayn evaluate` runs, and what training calls for validation BLEU:

    evaluate_translation(TorchTranslator(model, tokenizers), sources, references, beam=4, alpha=0.6)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiayn.evaluation.bleu import MetricScore, corpus_bleu, corpus_chrf
from aiayn.evaluation.constraint_rates import constraint_rates, rates_summary
from aiayn.inference.interface import DEFAULT_BATCH_TOKENS, Translation, Translator


@dataclass
class TranslationEvaluation:
    """BLEU and chrF of the best hypotheses, plus decoding speed.

    `generated_tokens` counts target tokens of the best hypotheses (without `<eos>`);
    `seconds` is the wall time of tokenizing, decoding and detokenizing; `translations` are
    the best hypotheses with their scores and token ids (what `aiayn evaluate --report` shows).
    """

    bleu: MetricScore
    chrf: MetricScore
    hypotheses: list[str]
    sentences: int
    generated_tokens: int
    seconds: float
    translations: list[Translation] = field(default_factory=list)
    constraints: dict | None = None
    """`aiayn.evaluation.constraint_rates.constraint_rates`, when decoded with constraints."""

    @property
    def sentences_per_second(self) -> float:
        return self.sentences / self.seconds if self.seconds > 0 else float("inf")

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """The figures as a JSON-ready dict (without the hypotheses)."""
        return {
            "bleu": self.bleu.score,
            "bleu_signature": self.bleu.signature,
            "bleu_details": self.bleu.details,
            "chrf": self.chrf.score,
            "chrf_signature": self.chrf.signature,
            "sentences": self.sentences,
            "generated_tokens": self.generated_tokens,
            "seconds": self.seconds,
            "sentences_per_second": self.sentences_per_second,
            "tokens_per_second": self.tokens_per_second,
        } | ({} if self.constraints is None else {"constraints": self.constraints})

    def summary(self) -> str:
        """Human-readable lines: BLEU, chrF (each with its signature), speed."""
        return "\n".join([
            f"BLEU {self.bleu.score:.2f}  {self.bleu.signature}",
            f"  {self.bleu.details}",
            f"chrF {self.chrf.score:.2f}  {self.chrf.signature}",
            f"speed {self.sentences_per_second:.1f} sentences/s, {self.tokens_per_second:.1f} tokens/s "
            f"({self.sentences} sentences, {self.generated_tokens} tokens, {self.seconds:.2f} s)",
        ] + ([] if self.constraints is None else [rates_summary(self.constraints)]))


PROGRESS_CHUNK = 500
"""Sentences decoded at a time when `evaluate_translation` reports progress."""


def evaluate_translation(
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[str],
    beam: int = 4,
    alpha: float = 0.6,
    max_len_extra: int = 50,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    lowercase: bool = False,
    token_scores: bool = False,
    on_progress: Callable[[int], None] | None = None,
    include: Sequence[Sequence[str]] | None = None,
    exclude: Sequence[Sequence[str]] | None = None,
) -> TranslationEvaluation:
    """Translate `sources` and score them against `references` (detokenized, sacrebleu 13a).

    Args:
        translator: any `aiayn.inference.Translator`: `TorchTranslator(model, tokenizers)`
            or `aiayn.load(DIR)`.
        sources, references: aligned sentences (same count).
        beam, alpha, max_len_extra, batch_tokens: decoding settings (`Translator.translate`).
        lowercase: case-insensitive BLEU and chrF.
        token_scores: fill each translation's `token_scores` (for the report).
        on_progress: called with the number of sentences translated so far, after each chunk of
            `PROGRESS_CHUNK` (the sentences are then decoded chunk by chunk; without it, at once).
        include, exclude: per source, phrases to include / exclude (`Translator.translate`);
            the result's `constraints` then says how many were kept.
    """
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources but {len(references)} references")
    start = time.perf_counter()
    step = len(sources) if on_progress is None else PROGRESS_CHUNK
    phrases = {} if include is None and exclude is None else {"include": include, "exclude": exclude}
    nbests = []
    for first in range(0, len(sources), max(step, 1)):
        chunk = slice(first, first + step)
        nbests += translator.translate_nbest(
            sources[chunk], 1, beam, alpha, max_len_extra, batch_tokens, line_offset=first,
            token_scores=token_scores, **{k: None if v is None else v[chunk] for k, v in phrases.items()},
        )
        if on_progress is not None:
            on_progress(len(nbests))
    best = [hyps[0] for hyps in nbests]
    hypotheses = [translation.text for translation in best]
    seconds = time.perf_counter() - start
    return TranslationEvaluation(
        bleu=corpus_bleu(hypotheses, references, lowercase=lowercase),
        chrf=corpus_chrf(hypotheses, references, lowercase=lowercase),
        hypotheses=hypotheses,
        sentences=len(sources),
        generated_tokens=sum(len(translation.tokens) for translation in best),
        seconds=seconds,
        translations=best,
        constraints=None if include is None and exclude is None else constraint_rates(
            hypotheses, include or [[] for _ in sources], exclude or [[] for _ in sources],
            [t.constraints_met for t in best],
        ),
    )

