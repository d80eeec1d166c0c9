"""`aiayn train [CONFIG] [--out RUN_DIR | --resume RUN_DIR] [--set section.key=value ...]`.

Under `torchrun --nproc_per_node=N -m aiayn train ...` the N processes train one model with
DistributedDataParallel (see `aiayn.training.distributed`); rank 0 prints and writes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiayn.training.config import load_config
from aiayn.training.run_dir import CONFIG_FILE, default_run_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a translation model (default: the built-in dates task)",
        description="Train a Transformer. With no CONFIG, trains the built-in `dates` task and "
        "prints its held-out exact-match accuracy.",
    )
    parser.add_argument("config", nargs="?", help="YAML config (default: the built-in dates task)")
    add_run_arguments(parser)
    parser.set_defaults(func=run)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """--out, --resume, --overwrite and --set (for `aiayn train`, `lm train`, `classify train`)."""
    parser.add_argument("--out", type=Path, help="run directory (default: runs/<name>-<time>)")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue this run directory")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out directory")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config field, e.g. --set train.max_steps=200 (repeatable)",
    )


def train_in_session(
    train: Callable[..., dict], config: Any, run_dir: Path, resume: bool, overwrite: bool
) -> tuple[dict | None, bool, Path]:
    """Run `train(config, run_dir, resume=, overwrite=, dist=)` alone or under torchrun.

    Every rank agrees on rank 0's `run_dir` (one timestamped default). Returns (results, this
    process is rank 0, run_dir); results is None when SIGINT/SIGTERM stopped the run.
    """
    from aiayn.training.distributed import broadcast_object, distributed_session
    from aiayn.training.trainer import StopRequested

    with distributed_session(config.train.device, config.train.dist_backend) as dist:
        run_dir = Path(broadcast_object(str(run_dir), dist))
        if dist.is_main:
            print(f"run directory: {run_dir}", file=sys.stderr)
        try:
            results = train(config, run_dir, resume=resume, overwrite=overwrite, dist=dist)
        except StopRequested:
            results = None
    return results, dist.is_main, run_dir


def run(args: argparse.Namespace) -> int:
    from aiayn.training.run import run_training

    if args.resume is not None:
        if args.config or args.out:
            print("aiayn train: --resume takes its config and directory from RUN_DIR", file=sys.stderr)
            return 2
        run_dir = args.resume
        config = load_config(run_dir / CONFIG_FILE, args.overrides)
    else:
        run_dir = args.out or default_run_dir(args.config)
        config = load_config(args.config, args.overrides)
    resume = args.resume is not None
    results, is_main, _ = train_in_session(run_training, config, run_dir, resume, args.overwrite)
    if results is None:
        return 130
    if is_main:
        print_results(results)
    return 0


def print_results(results: dict) -> None:
    test = results.get("test")
    print(
        f"trained {results['steps']} steps in {results['train_minutes']:.2f} min "
        f"({results['tokens_per_s']:,.0f} target tokens/s)"
    )
    if not test:
        return
    print(f"held-out exact match: {test['exact_match']:.2f}%")
    print(f"held-out BLEU: {test['bleu']:.2f}  chrF: {test['chrf']:.2f}  ({test['signature']})")
    for example in results.get("examples", []):
        print(f"  {example['source']!r:45} -> {example['output']!r}")
