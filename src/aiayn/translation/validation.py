"""Validation decoding that cannot eat the run's budget: a time cap and a length cap.

BLEU at every validation decodes up to `train.bleu_max_sentences` validation sources inside the
training run, and each second it takes is a second not trained. Two caps keep it small:

- **length**: a model far from converged repeats tokens until its output length limit, so an
  output costs the limit, not the reference's length. The limit here is the source length +
  `train.bleu_max_len_extra` tokens; at 'auto' that is read off the references being decoded:
  the `LENGTH_QUANTILE`th percentile of (reference - source) tokens, plus `LENGTH_MARGIN`, at
  most `MAX_LEN_EXTRA` (the paper's "input length + 50", Sec. 6.1, the limit of every other
  decoding). An output stopped there by this cap, where source + 50 would have let it go on,
  counts as cut by the length cap.
- **time**: the `Trainer` gives each validation the seconds it may take
  (`train.bleu_time_share` of the training time so far, less what earlier validations took:
  `aiayn.training.trainer`). The sources are decoded in their order, the first `MIN_SENTENCES`
  whatever the allowance, then `CHUNK_SENTENCES` at a time; before each chunk its time is
  predicted from the rate so far, and decoding stops where it would pass the allowance. BLEU and exact match
  are then those of the sentences decoded (the first n, the same first n at every validation
  that decodes n).

Each cap that bit logs one line saying so; `bleu_sentences` in the validation record says how
many sentences the scores are over.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiayn.decoding.common import output_length_limit
from aiayn.evaluation.bleu import corpus_bleu
from aiayn.inference.interface import DEFAULT_BATCH_TOKENS, Translator

log = logging.getLogger(__name__)

MAX_LEN_EXTRA = 50
"""The output length limit everywhere else: source + 50 tokens (Sec. 6.1); no cap is above it."""

LENGTH_QUANTILE, LENGTH_MARGIN = 99.0, 5
"""'auto' length cap: the 99th percentile of (reference - source) tokens, plus 5 tokens."""

MIN_SENTENCES = 200
"""Sentences always decoded, whatever the time allowance (fewer give too noisy a BLEU; as
`aiayn.training.auto_rules.MIN_BLEU_SENTENCES`)."""

CHUNK_SENTENCES = 300
"""Sentences decoded between two looks at the time allowance (after the first `MIN_SENTENCES`):
enough for full decoding batches, whose sentences are sorted by length within a chunk."""


def reference_len_extra(source_lengths: Sequence[int], reference_lengths: Sequence[int]) -> int:
    """The 'auto' length cap: tokens an output may have beyond its source, from the pairs'
    token counts (source and reference, `<eos>` included or not alike; blank sources skipped)."""
    differences = [r - s for s, r in zip(source_lengths, reference_lengths, strict=True) if s > 0]
    if not differences:
        return MAX_LEN_EXTRA
    quantile = float(np.percentile(differences, LENGTH_QUANTILE))
    return min(MAX_LEN_EXTRA, max(0, math.ceil(quantile)) + LENGTH_MARGIN)


@dataclass
class CappedDecoding:
    """What `decode_within_caps` decoded, and which caps bit."""

    hypotheses: list[str]  # of the first `len(hypotheses)` sources
    sentences: int  # sources asked for
    max_len_extra: int
    length_cut: int  # outputs stopped by the length cap where source + 50 would have gone on
    seconds: float
    allowance_s: float | None

    @property
    def time_cut(self) -> bool:
        return len(self.hypotheses) < self.sentences


def decode_within_caps(
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[str],
    *,
    beam: int,
    max_len_extra: int | str = "auto",
    allowance_s: float | None = None,
    alpha: float = 0.6,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    timer: Callable[[], float] = time.perf_counter,
) -> CappedDecoding:
    """Decode `sources` in order within the length cap (`max_len_extra`, 'auto': by
    `references`) and the time allowance (`allowance_s` seconds, None: no limit)."""
    source_lengths = translator.count_tokens(sources)  # tokens + <eos>; 0 for a blank source
    if max_len_extra == "auto":
        encoded = translator.tokenizers.target.encode_batch(list(references))
        reference_lengths = [len(ids) + 1 for ids in encoded]
        max_len_extra = reference_len_extra(source_lengths, reference_lengths)
    extra = int(max_len_extra)
    started = timer()
    hypotheses: list[str] = []
    length_cut = 0
    while len(hypotheses) < len(sources):
        done = len(hypotheses)
        size = MIN_SENTENCES if done == 0 else CHUNK_SENTENCES
        if done >= MIN_SENTENCES and allowance_s is not None:
            spent = timer() - started
            if spent + spent / done * min(size, len(sources) - done) > allowance_s:
                break
        chunk = slice(done, done + size)
        found = translator.translate_nbest(
            sources[chunk], 1, beam, alpha, extra, batch_tokens, line_offset=done)
        for translation, length in zip((hyps[0] for hyps in found), source_lengths[chunk], strict=True):
            hypotheses.append(translation.text)
            if length and extra < MAX_LEN_EXTRA:
                limit = output_length_limit(length, extra, None, translator.config.max_len)
                wider = output_length_limit(length, MAX_LEN_EXTRA, None, translator.config.max_len)
                if len(translation.tokens) >= limit and wider > limit:
                    length_cut += 1
    return CappedDecoding(hypotheses, len(sources), extra, length_cut, timer() - started, allowance_s)


def capped_validation_metrics(
    translator: Translator,
    pairs: Sequence[tuple[str, str]],
    *,
    beam: int,
    max_len_extra: int | str = "auto",
    allowance_s: float | None = None,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    timer: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """BLEU and exact match of validation decoding within the caps (`decode_within_caps`), over
    the sentences decoded (`bleu_sentences`); logs one line per cap that bit."""
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    decoded = decode_within_caps(
        translator, sources, references, beam=beam, max_len_extra=max_len_extra,
        allowance_s=allowance_s, batch_tokens=batch_tokens, timer=timer,
    )
    count = len(decoded.hypotheses)
    if decoded.time_cut:
        log.info(
            "validation decoding stopped at its time cap: %d of %d sentences in %.1f s (allowance %.1f s, "
            "train.bleu_time_share)", count, decoded.sentences, decoded.seconds, decoded.allowance_s or 0.0,
        )
    if decoded.length_cut:
        log.info(
            "validation decoding: %d of %d outputs stopped at the length cap (source + %d tokens, "
            "train.bleu_max_len_extra)", decoded.length_cut, count, decoded.max_len_extra,
        )
    kept = references[:count]
    matches = sum(h == r for h, r in zip(decoded.hypotheses, kept, strict=True))
    return {
        "bleu": corpus_bleu(decoded.hypotheses, kept).score,
        "exact_match": 100.0 * matches / max(count, 1),
        "bleu_sentences": float(count),
    }
