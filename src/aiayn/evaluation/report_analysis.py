"""Corpus views of the evaluation report, as compare-mt (Neubig et al. 2019) draws them.

- `length_buckets`: corpus BLEU and chrF of the sentences grouped by source length (words);
- `ratio_histogram`: how many sentences have each hypothesis/reference length ratio;
- `word_accuracy`: how often the model gets each target word right (clipped matches, as
  BLEU's unigram counts, give precision and recall; their F-measure per word), by the word's
  frequency in the references, and the words it gets right most and least often.

Words are sacreBLEU's 13a tokens, the tokens BLEU counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import sacrebleu

LENGTH_EDGES = (5, 10, 15, 20, 30, 40)
"""Upper bounds (words, inclusive) of the source-length buckets; the last bucket is open."""

FREQUENCY_EDGES = (1, 2, 3, 4, 9, 99, 999)
"""Upper bounds of compare-mt's frequency buckets: 1, 2, 3, 4, 5-9, 10-99, 100-999, 1000+."""

RATIO_STEP = 0.1
RATIO_MAX = 2.0


def _bucket_labels(edges: Sequence[int], first: int) -> list[str]:
    labels, low = [], first
    for high in edges:
        labels.append(str(high) if high == low else f"{low}-{high}")
        low = high + 1
    return [*labels, f"{low}+"]


def _bucket(value: int, edges: Sequence[int]) -> int:
    return next((i for i, high in enumerate(edges) if value <= high), len(edges))


def length_buckets(
    source_lengths: Sequence[int], hypotheses: Sequence[str], references: Sequence[str], lowercase: bool
) -> list[dict[str, Any]]:
    """Per non-empty source-length bucket: label, sentence count, corpus BLEU and chrF."""
    labels = _bucket_labels(LENGTH_EDGES, 1)
    members: dict[int, list[int]] = {}
    for i, n in enumerate(source_lengths):
        members.setdefault(_bucket(max(n, 1), LENGTH_EDGES), []).append(i)
    bleu, chrf = sacrebleu.BLEU(lowercase=lowercase), sacrebleu.CHRF(lowercase=lowercase)
    rows = []
    for b in sorted(members):
        hyps = [hypotheses[i] for i in members[b]]
        refs = [[references[i] for i in members[b]]]
        rows.append({
            "label": labels[b], "sentences": len(hyps),
            "bleu": round(bleu.corpus_score(hyps, refs).score, 2),
            "chrf": round(chrf.corpus_score(hyps, refs).score, 2),
        })
    return rows


def ratio_histogram(ratios: Sequence[float | None]) -> list[dict[str, Any]]:
    """Counts of length ratios in bins of `RATIO_STEP` from 0 up to `RATIO_MAX` (the last bin
    holds everything above); sentences without a ratio (empty reference) are left out."""
    bins = round(RATIO_MAX / RATIO_STEP)
    counts = [0] * (bins + 1)
    for ratio in ratios:
        if ratio is not None:
            counts[min(int(ratio / RATIO_STEP + 1e-9), bins)] += 1
    labels = [f"{i * RATIO_STEP:.1f}" for i in range(bins)] + [f"{RATIO_MAX:.1f}+"]
    return [{"label": label, "count": count} for label, count in zip(labels, counts, strict=True)]


def word_accuracy(
    hypothesis_words: Sequence[Sequence[str]], reference_words: Sequence[Sequence[str]], shown: int = 15
) -> dict[str, Any]:
    """Target-word F-measure by reference frequency bucket, and the `shown` best and worst words
    (among the words the references use twice or more, if any).

    Per sentence a word matches min(count in hypothesis, count in reference) times; a word's
    precision is matches / its hypothesis count, recall matches / its reference count.
    """
    matches: Counter = Counter()
    in_hyp: Counter = Counter()
    in_ref: Counter = Counter()
    for hyp, ref in zip(hypothesis_words, reference_words, strict=True):
        hyp_counts, ref_counts = Counter(hyp), Counter(ref)
        in_hyp.update(hyp_counts)
        in_ref.update(ref_counts)
        matches.update({w: min(c, ref_counts[w]) for w, c in hyp_counts.items() if ref_counts[w]})
    labels = _bucket_labels(FREQUENCY_EDGES, 1)
    totals = [[0, 0, 0, 0] for _ in labels]  # words, matches, hypothesis count, reference count
    for word in set(in_ref) | set(in_hyp):
        row = totals[_bucket(in_ref[word], FREQUENCY_EDGES)] if in_ref[word] else None
        if row is None:
            continue  # a word the references never use: it lowers precision only (shown as such)
        row[0] += 1
        row[1] += matches[word]
        row[2] += in_hyp[word]
        row[3] += in_ref[word]
    buckets = []
    for label, (words, match, hyp, ref) in zip(labels, totals, strict=True):
        if words:
            precision, recall = (match / hyp if hyp else 0.0), match / ref
            buckets.append({"label": label, "words": words, "precision": round(precision, 4),
                            "recall": round(recall, 4), "f": round(_f(precision, recall), 4)})
    scored = []
    for word in in_ref:
        precision = matches[word] / in_hyp[word] if in_hyp[word] else 0.0
        recall = matches[word] / in_ref[word]
        scored.append({"word": word, "reference_count": in_ref[word], "hypothesis_count": in_hyp[word],
                       "f": round(_f(precision, recall), 4)})
    frequent = [s for s in scored if s["reference_count"] >= 2] or scored
    ranked = sorted(frequent, key=lambda s: (-s["f"], -s["reference_count"], s["word"]))
    count = min(shown, (len(ranked) + 1) // 2)  # few words: the two lists share none
    best = ranked[:count]
    worst = sorted(ranked[count:], key=lambda s: (s["f"], -s["reference_count"], s["word"]))[:shown]
    unused = sorted(((w, c) for w, c in in_hyp.items() if not in_ref[w]), key=lambda x: (-x[1], x[0]))
    return {"buckets": buckets, "best": best, "worst": worst,
            "never_in_reference": [{"word": w, "hypothesis_count": c} for w, c in unused[:shown]]}


def _f(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
