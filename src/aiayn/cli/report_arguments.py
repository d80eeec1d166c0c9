"""The `--report` options of `aiayn evaluate` and `aiayn translate` (the evaluation report).

    aiayn evaluate --model runs/de_en --input test.de --ref test.en --report report.html
    aiayn evaluate ... --report report.html --compare runs/de_en_old     # or --compare-hyp old.hyp
    aiayn translate --model runs/de_en --input test.de --report report.html

`--report OUT.html` writes the page and `OUT.json` (see `aiayn.evaluation.report`). The flags'
thresholds are options; their defaults are `FlagSettings`'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from aiayn.cli.arguments import bounded_int, finite_float
from aiayn.core.errors import ConfigError
from aiayn.evaluation.report_flags import FlagSettings

DEFAULTS = FlagSettings()


def _band(text: str) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH (e.g. 0.6,1.5), got {text!r}") from None
    if not 0 <= low < high < float("inf"):
        raise argparse.ArgumentTypeError(f"need 0 <= LOW < HIGH (finite), got {text!r}")
    return low, high


def add_report_arguments(parser: argparse.ArgumentParser, with_reference: bool) -> None:
    """--report and the flags' thresholds; with a reference also --compare, --compare-hyp and
    --bootstrap-samples."""
    group = parser.add_argument_group("evaluation report")
    group.add_argument("--report", metavar="OUT.html",
                       help="write an offline HTML report (sentences, flags, attention) and OUT.json")
    group.add_argument("--omission-threshold", type=finite_float(0, 1000), metavar="MASS",
                       default=DEFAULTS.omission_threshold,
                       help="omission flag: a source word whose total cross-attention over the output "
                       f"(mean of layers and heads) is below MASS (default {DEFAULTS.omission_threshold:g})")
    group.add_argument("--repetition-ngram", type=bounded_int(1), metavar="N",
                       default=DEFAULTS.repetition_ngram,
                       help="repetition flag: an n-gram of N+ words repeated in the hypothesis "
                       f"more often than in the reference (default {DEFAULTS.repetition_ngram})")
    group.add_argument("--length-band", type=_band, metavar="LOW,HIGH",
                       default=(DEFAULTS.length_low, DEFAULTS.length_high),
                       help="length flag: hypothesis/reference length (13a tokens; /source without "
                       "reference) outside LOW..HIGH "
                       f"(default {DEFAULTS.length_low:g},{DEFAULTS.length_high:g})")
    group.add_argument("--copy-min-chars", type=bounded_int(1), metavar="N", default=DEFAULTS.copy_min_chars,
                       help="copy flag: source words of N+ letters found untranslated in the hypothesis "
                       f"(default {DEFAULTS.copy_min_chars})")
    if with_reference:
        other = group.add_mutually_exclusive_group()
        other.add_argument("--compare", metavar="OTHER_MODEL_DIR",
                           help="compare with another model (translated with the same settings)")
        other.add_argument("--compare-hyp", metavar="FILE", help="compare with another system's output lines")
        group.add_argument("--bootstrap-samples", type=bounded_int(1), metavar="N", default=1000,
                           help="paired bootstrap resamples, as sacrebleu --paired-bs-n (default 1000)")


def flag_settings(args: argparse.Namespace) -> FlagSettings:
    low, high = args.length_band
    return FlagSettings(args.omission_threshold, args.repetition_ngram, low, high, args.copy_min_chars)


def check_report_arguments(args: argparse.Namespace) -> None:
    """One-line errors for report options that cannot work, before any model is loaded."""
    from aiayn.evaluation.report_page import check_report_path

    if args.report is not None:
        check_report_path(args.report)
    elif getattr(args, "compare", None) or getattr(args, "compare_hyp", None):
        raise ConfigError("--compare and --compare-hyp need --report OUT.html")


def write_report_files(
    args: argparse.Namespace, sources: Sequence[str], references: Sequence[str] | None, outputs, title: str,
    constraints: dict | None = None,
) -> None:
    """Build the report of `outputs` (with the compared system, if any, and the constraints' keep
    rate, if decoded with constraints) and write it."""
    from aiayn.cli.options import evaluate, read_parallel_files
    from aiayn.evaluation.report import build_report
    from aiayn.evaluation.report_inputs import report_outputs
    from aiayn.evaluation.report_page import write_report

    compare, name = None, ""
    if getattr(args, "compare", None) and references is not None:  # the same decoding as the model's
        other, result = evaluate(args.compare, args, list(sources), list(references))
        compare = report_outputs(other, sources, result.translations, result.seconds, attention=False)
        name = args.compare
    elif getattr(args, "compare_hyp", None):
        _, compare = read_parallel_files(args.input, args.compare_hyp)
        name = args.compare_hyp
    if outputs.attention_note is not None:
        print(f"aiayn: omission flag and attention view {outputs.attention_note}", file=sys.stderr)
    data = build_report(
        sources, references, outputs, flag_settings(args), lowercase=getattr(args, "lowercase", False),
        compare=compare, compare_name=name, bootstrap_samples=getattr(args, "bootstrap_samples", 1000),
        title=title, constraints=constraints,
    )
    page, data_file = write_report(data, args.report)
    if "compare" in data:
        for metric, result in data["compare"]["significance"].items():
            print(f"{metric} {result['system']:.2f} vs {result['baseline']:.2f} ({name}): "
                  f"p = {result['p_value']:.4f} (paired bootstrap, {args.bootstrap_samples} resamples)")
    print(f"report: {page} and {data_file}; open the page in a browser (works offline)", file=sys.stderr)
