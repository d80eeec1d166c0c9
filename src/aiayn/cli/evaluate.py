"""`aiayn evaluate`: translate a test set and report BLEU, chrF and decoding speed.

    aiayn evaluate --model runs/multi30k --input test.de --ref test.en

BLEU and chrF come from sacrebleu on detokenized, cased text (13a tokenization), printed
with sacrebleu's signature so that the numbers can be compared and reproduced.

`--report OUT.html` also writes the evaluation report (per-sentence scores and flags, the
attention of each sentence; `--compare` another system): see `aiayn.cli.report_arguments`.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from aiayn.cli.constraint_files import line_constraints
from aiayn.cli.options import (
    add_compile_argument,
    add_model_arguments,
    add_progress_argument,
    add_search_arguments,
    evaluate,
    model_names,
    model_source,
    one_line,
    read_parallel_files,
)
from aiayn.cli.report_arguments import add_report_arguments, check_report_arguments
from aiayn.cli.translate import constraint_source
from aiayn.core.errors import ConfigError, DataError

if TYPE_CHECKING:
    pass


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate", help="BLEU and chrF of a model on a test set",
        description="Translate --input, score against --ref with sacrebleu, report speed.",
    )
    add_model_arguments(parser)
    add_compile_argument(parser)
    parser.add_argument("--input", required=True, metavar="FILE", help="source sentences")
    parser.add_argument("--ref", required=True, metavar="FILE", help="reference translations")
    add_search_arguments(parser)
    parser.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU and chrF")
    parser.add_argument("--output", metavar="FILE", help="also save the hypotheses here")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON here")
    add_progress_argument(parser)
    add_report_arguments(parser, with_reference=True)
    from aiayn.cli.constraint_files import add_constraint_arguments

    add_constraint_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from aiayn.core.files import atomic_write_text

    check_report_arguments(args)
    sources, references = read_parallel_files(args.input, args.ref)
    constraints = line_constraints(args, sources, args.input)
    if constraints is not None:
        args.phrases = constraints.chunk(0, len(sources))
    try:
        translator, result = evaluate(args.model, args, sources, references)
    except ConfigError as error:  # "line N: ..." from the constraints' checks
        if constraints is None or not str(error).startswith("line "):
            raise
        raise DataError(f"{constraint_source(args)}: {error}") from None
    print(result.summary())
    if args.output:
        atomic_write_text(args.output, "".join(one_line(h) + "\n" for h in result.hypotheses))
    if args.json:
        figures = result.to_dict() | {
            "model": model_source(args.model), "input": args.input, "ref": args.ref, "beam": args.beam,
            "alpha": args.alpha, "max_len_extra": args.max_len, "lowercase": args.lowercase,
            "device": str(translator.device),
        }
        atomic_write_text(args.json, json.dumps(figures, indent=2) + "\n")
    if args.report is not None:
        from aiayn.cli.report_arguments import write_report_files
        from aiayn.evaluation.report_inputs import report_outputs

        outputs = report_outputs(translator, sources, result.translations, result.seconds)
        write_report_files(args, sources, references, outputs, f"{model_names(args.model)}: {args.input}",
                           constraints=result.constraints)
    return 0
