"""Two systems on one test set: per-sentence wins and losses, and paired bootstrap significance.

The significance test is sacreBLEU's own paired bootstrap resampling (Koehn 2004) through
`sacrebleu.significance.PairedTest`, with the other system as the baseline, so that its
p-values are those of sacreBLEU's command line on the same files:

    sacrebleu REF -i OTHER_HYP MODEL_HYP --paired-bs -m bleu chrf

(same number of resamples, `--paired-bs-n`, default 1000; same seed, `SACREBLEU_SEED`, default
12345). As on that command line, each line loses its trailing whitespace first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sacrebleu
from sacrebleu.significance import PairedTest

BOOTSTRAP_SAMPLES = 1000
"""sacreBLEU's default number of paired bootstrap resamples (`--paired-bs-n`)."""

TIE_MARGIN = 1e-9


def paired_bootstrap(
    references: Sequence[str],
    baseline: Sequence[str],
    system: Sequence[str],
    samples: int = BOOTSTRAP_SAMPLES,
    lowercase: bool = False,
) -> dict[str, dict[str, Any]]:
    """sacreBLEU's paired bootstrap test of `system` against `baseline` for BLEU and chrF.

    Returns per metric ('BLEU', 'chrF'): `baseline` and `system` corpus scores, `p_value` (of the
    system's difference from the baseline arising by chance), the bootstrap `mean` and 95%
    confidence half-width `ci` of each, and sacreBLEU's `signature`.
    """
    refs = [[line.rstrip() for line in references]]
    named = [("baseline", [h.rstrip() for h in baseline]), ("system", [h.rstrip() for h in system])]
    metrics = {"BLEU": sacrebleu.BLEU(lowercase=lowercase), "chrF": sacrebleu.CHRF(lowercase=lowercase)}
    test = PairedTest(named, metrics, refs, test_type="bs", n_samples=samples)
    signatures, scores = test()
    results = {}
    for name, key in zip(("BLEU", "chrF"), [k for k in scores if k != "System"], strict=True):
        base, other = scores[key]  # sacreBLEU names chrF by its beta: 'chrF2'
        results[name] = {
            "baseline": round(float(base.score), 4), "system": round(float(other.score), 4),
            "p_value": float(other.p_value),
            "baseline_mean": _maybe(base.mean), "baseline_ci": _maybe(base.ci),
            "system_mean": _maybe(other.mean), "system_ci": _maybe(other.ci),
            "signature": signatures[key].format(),
        }
    return results


def _maybe(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def wins_and_losses(system: Sequence[float], baseline: Sequence[float]) -> dict[str, int]:
    """How many sentences score higher (`wins`), lower (`losses`) or the same (`ties`) for the
    system than for the baseline."""
    wins = sum(s > b + TIE_MARGIN for s, b in zip(system, baseline, strict=True))
    losses = sum(s < b - TIE_MARGIN for s, b in zip(system, baseline, strict=True))
    return {"wins": wins, "losses": losses, "ties": len(system) - wins - losses}
