"""The evaluation report's data: scores, flags, corpus views and the attention of each sentence.

    outputs = report_outputs(translator, sources, best, seconds)      # report_inputs
    data = build_report(sources, references, outputs, FlagSettings())
    write_report(data, "report.html")                                 # report_page: + report.json

`build_report` returns one JSON-ready dict; the page (`report_page`) embeds it as it is and
`OUT.json` holds the same dict, so a script sees exactly what the page shows:

- `corpus`: BLEU and chrF with their sacreBLEU signatures, the length ratio (BLEU's
  hypothesis/reference 13a token counts), `flag_counts`;
- `flags`: per flag its `description` (the tooltip), `available` and, if not, `note`;
- `sentences`: per line `source`, `hypothesis`, `reference`, `chrf`, `bleu` (sentence scores,
  sacreBLEU, BLEU with effective order), `source_words`, `ratio`, `flags` ({flag: what fired}),
  `unavailable` (flags not computed for this line), `highlight` (source token positions the
  flags point at), `source_tokens`, `target_tokens`, `attention` and `word_scores` ([word,
  log-probability] of each hypothesis word, or None without token scores);
- `attention` of a sentence: the encoder-decoder weights of every layer and head, (L, H, T, S),
  each rounded to a byte (weight * 255), zlib-compressed and base64-encoded (`shape` says
  L, H, T, S), or None; `decode_attention` reads it back:
  `numpy.frombuffer(zlib.decompress(base64.b64decode(a["cross"])), numpy.uint8).reshape(a["shape"]) / 255`;
- `length_buckets`, `ratio_histogram`, `words` (`report_analysis`); `compare` (`report_compare`)
  when a second system is given.

Without references (`aiayn translate --report`) the scores, buckets and words are left out and
the flags that compare with a reference compare with the source instead (see `report_flags`).
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import sacrebleu
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from aiayn.core.errors import DataError
from aiayn.evaluation import report_flags as flags
from aiayn.evaluation.bleu import corpus_bleu, corpus_chrf
from aiayn.evaluation.report_analysis import length_buckets, ratio_histogram, word_accuracy
from aiayn.evaluation.report_compare import BOOTSTRAP_SAMPLES, paired_bootstrap, wins_and_losses
from aiayn.evaluation.report_flags import FLAGS, FlagSettings
from aiayn.evaluation.report_inputs import ModelOutputs, SentenceOutput, display_token

FORMAT_VERSION = 1


def encode_attention(cross: np.ndarray) -> dict[str, Any]:
    """(L, H, T, S) weights in [0, 1] -> {"shape", "cross": base64 of the zlib-compressed bytes
    round(weight * 255)} (peaked attention has many bytes 0: it compresses well)."""
    quantized = np.clip(np.rint(np.asarray(cross, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
    packed = zlib.compress(quantized.tobytes(), 9)
    return {"shape": list(quantized.shape), "cross": base64.b64encode(packed).decode("ascii")}


def decode_attention(attention: dict[str, Any]) -> np.ndarray:
    """The (L, H, T, S) float32 weights of `encode_attention`'s output (to within 1/510)."""
    raw = np.frombuffer(zlib.decompress(base64.b64decode(attention["cross"])), dtype=np.uint8)
    return raw.reshape(attention["shape"]).astype(np.float32) / 255.0


class _Words:
    """13a tokenization (optionally lowercased), as BLEU counts words."""

    def __init__(self, lowercase: bool) -> None:
        self.tokenize, self.lowercase = Tokenizer13a(), lowercase

    def __call__(self, text: str) -> list[str]:
        words = self.tokenize(text.strip()).split()
        return [w.lower() for w in words] if self.lowercase else words


def sentence_flags(
    source: str, reference: str | None, output: SentenceOutput, settings: FlagSettings, words: _Words
) -> tuple[dict[str, str], list[str], list[int], float | None]:
    """The flags of one sentence: ({flag: what fired}, flags unavailable here, source token
    positions to highlight, length ratio)."""
    hyp_words, src_words = words(output.hypothesis), words(source)
    ref_words = words(reference) if reference is not None else None
    fired: dict[str, str] = {}
    unavailable: list[str] = []
    highlight: set[int] = set()
    if output.cross is None:
        unavailable.append("omission")
    else:
        mass = flags.attention_mass(output.cross)
        words_of = flags.token_words(source, output.source_tokens[:-1])
        texts = source.split()
        checked = [any(ch.isalnum() for ch in word) for word in texts]
        dropped = flags.omission(output.cross, settings.omission_threshold, words_of, checked)
        if dropped:
            totals: dict[int, float] = {}
            for j in dropped:
                totals[words_of[j]] = totals.get(words_of[j], 0.0) + float(mass[j])
            fired["omission"] = ", ".join(f"{texts[w]} ({m:.2f})" for w, m in totals.items())
            highlight.update(dropped)
    repeated = flags.repetition(hyp_words, ref_words, settings.repetition_ngram)
    if repeated:
        fired["repetition"] = " | ".join(repeated)
    other = ref_words if ref_words is not None else src_words
    ratio = flags.length_ratio(len(hyp_words), len(other))
    if flags.length(ratio, settings.length_low, settings.length_high):
        fired["length"] = f"ratio {ratio:.2f} ({len(hyp_words)} / {len(other)} tokens)"
    if output.unknown_tokens:
        fired["unknown"] = " ".join(output.unknown_tokens)
        highlight.update(output.source_unknown)
    copied = flags.copy(src_words, hyp_words, ref_words, settings.copy_min_chars)
    if copied:
        fired["copy"] = ", ".join(copied)
        highlight.update(flags.copied_token_positions(source, output.source_tokens[:-1], copied))
    return fired, unavailable, sorted(highlight), ratio


def build_report(
    sources: Sequence[str],
    references: Sequence[str] | None,
    outputs: ModelOutputs,
    settings: FlagSettings | None = None,
    lowercase: bool = False,
    compare: ModelOutputs | Sequence[str] | None = None,
    compare_name: str = "",
    bootstrap_samples: int = BOOTSTRAP_SAMPLES,
    title: str = "aiayn evaluation report",
    constraints: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report's data (module docstring) for a model's `outputs` on `sources`.

    Args:
        sources, references: aligned lines (references None: no scores).
        outputs: the model's translations, tokens and attention (`report_inputs.report_outputs`).
        settings: the flags' thresholds (None: the defaults).
        lowercase: case-insensitive scores (and word matching).
        compare: a second system (its `ModelOutputs`, or its hypotheses); needs references.
        compare_name: what to call the second system.
        bootstrap_samples: resamples of the paired bootstrap test.
        constraints: how the lexical constraints were kept
            (`aiayn.evaluation.constraint_rates.constraint_rates`), shown beside the scores.
    """
    count = len(sources)
    if len(outputs.sentences) != count:
        raise DataError(f"{count} sources but {len(outputs.sentences)} translations")
    if references is not None and len(references) != count:
        raise DataError(f"{count} sources but {len(references)} references")
    if count == 0:
        raise DataError("the report needs at least one sentence")
    settings = settings or FlagSettings()
    words = _Words(lowercase)
    hypotheses = outputs.hypotheses
    with_reference = references is not None
    sentences, ratios = [], []
    chrf_metric = sacrebleu.CHRF(lowercase=lowercase)
    bleu_metric = sacrebleu.BLEU(lowercase=lowercase, effective_order=True)
    for i, (source, output) in enumerate(zip(sources, outputs.sentences, strict=True)):
        reference = references[i] if references is not None else None
        fired, unavailable, highlight, ratio = sentence_flags(source, reference, output, settings, words)
        ratios.append(ratio)
        entry: dict[str, Any] = {
            "id": i, "source": source, "hypothesis": output.hypothesis, "reference": reference,
            "source_words": len(words(source)),
            "ratio": None if ratio is None else round(ratio, 4),
            "flags": fired, "unavailable": unavailable, "highlight": highlight,
            "source_tokens": [display_token(t) for t in output.source_tokens],
            "target_tokens": [display_token(t) for t in output.target_tokens],
            "attention": None if output.cross is None else encode_attention(output.cross),
            "word_scores": None if output.word_scores is None
            else [[word, round(score, 4)] for word, score in output.word_scores],
        }
        if reference is not None:
            entry["chrf"] = round(chrf_metric.sentence_score(output.hypothesis, [reference]).score, 2)
            entry["bleu"] = round(bleu_metric.sentence_score(output.hypothesis, [reference]).score, 2)
        sentences.append(entry)
    descriptions = settings.descriptions(with_reference)
    omission_note = outputs.attention_note
    if omission_note is None and all(s["attention"] is None for s in sentences):
        omission_note = "unavailable: no sentence could be given to the model whole"
    flag_info = {
        name: {"description": descriptions[name],
               "available": not (name == "omission" and omission_note is not None),
               "note": omission_note if name == "omission" else None}
        for name in FLAGS
    }
    corpus: dict[str, Any] = {
        "sentences": count,
        "flag_counts": {
            name: sum(name in s["flags"] for s in sentences) if flag_info[name]["available"] else None
            for name in FLAGS
        },
    }
    data: dict[str, Any] = {
        "format": FORMAT_VERSION, "title": title, "model": outputs.model,
        "attention_note": outputs.attention_note, "settings": asdict(settings) | {"lowercase": lowercase},
        "has_reference": with_reference, "corpus": corpus, "flags": flag_info, "sentences": sentences,
    }
    if constraints is not None:
        corpus["constraints"] = constraints
    if references is not None:
        bleu = corpus_bleu(hypotheses, references, lowercase=lowercase)
        chrf = corpus_chrf(hypotheses, references, lowercase=lowercase)
        hyp_words = [words(h) for h in hypotheses]
        ref_words = [words(r) for r in references]
        reference_tokens = sum(map(len, ref_words))
        corpus.update({
            "bleu": round(bleu.score, 2), "bleu_signature": bleu.signature, "bleu_details": bleu.details,
            "chrf": round(chrf.score, 2), "chrf_signature": chrf.signature,
            "length_ratio": (
                round(sum(map(len, hyp_words)) / reference_tokens, 4) if reference_tokens else None
            ),
        })
        data["length_buckets"] = length_buckets(
            [s["source_words"] for s in sentences], hypotheses, references, lowercase
        )
        data["ratio_histogram"] = ratio_histogram(ratios)
        data["words"] = word_accuracy(hyp_words, ref_words)
        if compare is not None:
            data["compare"] = _comparison(
                references, sentences, compare, compare_name, bootstrap_samples, lowercase
            )
    return data


def _comparison(
    references: Sequence[str], sentences: list[dict[str, Any]], compare: ModelOutputs | Sequence[str],
    name: str, samples: int, lowercase: bool,
) -> dict[str, Any]:
    """The second system's per-sentence scores (added to `sentences`), wins and losses, and the
    paired bootstrap test with it as the baseline."""
    other = compare.hypotheses if isinstance(compare, ModelOutputs) else list(compare)
    if len(other) != len(sentences):
        raise DataError(f"the compared system has {len(other)} lines but the test set {len(sentences)}")
    chrf_metric = sacrebleu.CHRF(lowercase=lowercase)
    bleu_metric = sacrebleu.BLEU(lowercase=lowercase, effective_order=True)
    for sentence, hypothesis, reference in zip(sentences, other, references, strict=True):
        sentence["compare"] = {
            "hypothesis": hypothesis,
            "chrf": round(chrf_metric.sentence_score(hypothesis, [reference]).score, 2),
            "bleu": round(bleu_metric.sentence_score(hypothesis, [reference]).score, 2),
        }
    system = [s["hypothesis"] for s in sentences]
    return {
        "name": name,
        "chrf": wins_and_losses([s["chrf"] for s in sentences], [s["compare"]["chrf"] for s in sentences]),
        "bleu": wins_and_losses([s["bleu"] for s in sentences], [s["compare"]["bleu"] for s in sentences]),
        "significance": paired_bootstrap(references, other, system, samples, lowercase),
        "samples": samples,
        "sacrebleu_command": "sacrebleu REF -i OTHER_HYP MODEL_HYP --paired-bs -m bleu chrf"
        + (f" --paired-bs-n {samples}" if samples != BOOTSTRAP_SAMPLES else "")
        + (" -lc" if lowercase else ""),
    }
