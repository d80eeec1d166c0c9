"""`aiayn score`: log P(reference | source) of each sentence pair by forced decoding.

    aiayn score --model runs/multi30k --input test.de --ref test.en

Prints one natural-log probability per line (the target's tokens and `<eos>`, summed). A blank
line (empty or whitespace only) is scored like any other: an empty reference is the `<eos>` step
alone, which is also the score `aiayn translate` gives a blank input line (its empty output).
"""

from __future__ import annotations

import argparse

from aiayn.cli.arguments import device_option
from aiayn.cli.options import add_model_arguments, model_source, read_parallel_files


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "score", help="log-probability of each (source, reference) pair",
        description="Forced decoding: print log P(ref | input) for each line pair.",
    )
    add_model_arguments(parser)
    parser.add_argument("--input", required=True, metavar="FILE", help="source sentences")
    parser.add_argument("--ref", required=True, metavar="FILE", help="target sentences to score")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from aiayn.inference import load

    sources, targets = read_parallel_files(args.input, args.ref)
    translator = load(model_source(args.model), device_option(args.device), task="translation",
                      quantize=args.quantize)
    scores = translator.score(sources, targets, batch_tokens=args.batch_tokens)
    print("".join(f"{score:.4f}\n" for score in scores), end="", flush=True)
    return 0
