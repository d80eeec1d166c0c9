"""`aiayn average RUN_DIR (--last N | --tail 20%) --out MODEL_DIR`: checkpoint averaging (Sec. 6.1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.arguments import bounded_int
from aiayn.core.errors import ConfigError
from aiayn.core.settings import parse_share


def share(value: str) -> float:
    """`--tail`'s argument: a share of the run such as '20%'."""
    try:
        share = parse_share("--tail", value)
    except ConfigError:
        share = None
    if share is None:
        raise argparse.ArgumentTypeError(f"must be a share of the run in (0%, 100%], e.g. 20%, got {value!r}")
    return share


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "average", help="average the weights of the last N checkpoints",
        description="Average the weights of a run's checkpoints into one model directory, as the paper "
        "does for its results (Sec. 6.1: the last 5 checkpoints for the base model, 20 for big). "
        "The checkpoints are the newest --last N of RUN_DIR, or those written in the last --tail "
        "share of the run's budget; MODEL_DIR is a model directory like a run's own, which "
        "translate, evaluate and serve read.",
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                        help="a training run directory (aiayn train --out RUN_DIR) with its checkpoints")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--last", type=bounded_int(1), default=5, help="how many of the newest checkpoints (default 5)"
    )
    which.add_argument(
        "--tail",
        type=share,
        metavar="SHARE%",
        help="instead: the checkpoints of the last SHARE of the run's budget (e.g. 20%%), by the "
        "progress each checkpoint records",
    )
    parser.add_argument("--out", type=Path, required=True, metavar="MODEL_DIR",
                        help="the model directory to write: the averaged weights with the run's "
                        "config and tokenizer")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from aiayn.training.checkpoint import average_checkpoints

    chosen = average_checkpoints(args.run_dir, args.last, args.out, tail=args.tail)
    names = ", ".join(path.name for path in chosen)
    print(f"averaged {len(chosen)} checkpoints ({names}) into {args.out}")
    return 0
