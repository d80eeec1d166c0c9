"""`aiayn average RUN_DIR --last N --out MODEL_DIR`: checkpoint averaging (Sec. 6.1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.arguments import bounded_int
from aiayn.training.checkpoint import average_checkpoints


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("average", help="average the weights of the last N checkpoints")
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument(
        "--last", type=bounded_int(1), default=5, help="how many of the newest checkpoints (default 5)"
    )
    parser.add_argument("--out", type=Path, required=True, metavar="MODEL_DIR")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    chosen = average_checkpoints(args.run_dir, args.last, args.out)
    names = ", ".join(path.name for path in chosen)
    print(f"averaged {len(chosen)} checkpoints ({names}) into {args.out}")
    return 0
