"""`aiayn train [CONFIG] [--out RUN_DIR | --resume RUN_DIR] [--init-from SOURCE] [--set KEY=VALUE ...]`.

`--init-from SOURCE` starts from a trained model (fine-tuning; `aiayn.training.init_from`),
here and in `aiayn lm train` / `aiayn classify train`.

Under `torchrun --nproc_per_node=N -m aiayn train ...` the N processes train one model with
DistributedDataParallel (see `aiayn.training.distributed`); rank 0 prints and writes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from aiayn.errors import ConfigError

if TYPE_CHECKING:
    from aiayn.training.config import RunConfig


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
        "--init-from", metavar="SOURCE",
        help="start from this model (weights, settings, tokenizer): an aiayn model directory, a Transformers "
        "directory (MarianMTModel, GPT2LMHeadModel) or a Hub name; optimizer and schedule start fresh",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config field, e.g. --set train.max_steps=200 (repeatable)",
    )


def check_resume_alone(args: argparse.Namespace, *task_options: str) -> None:
    """`--resume RUN_DIR` reads its config and directory from RUN_DIR: refuse a CONFIG, --out,
    or any of `task_options` (attribute names of `args`) given beside it."""
    given = [name for name in ("config", "out", "init_from", *task_options) if getattr(args, name, None)]
    if given:
        shown = ", ".join("CONFIG" if n == "config" else "--" + n.replace("_", "-") for n in given)
        raise ConfigError(f"--resume takes its config and directory from RUN_DIR; drop {shown}")


def init_from_override(args: argparse.Namespace) -> list[str]:
    """The `--set` overrides with `--init-from SOURCE` as `train.init_from` (kept in the run's
    train_config.yaml, so that `--resume` finds it)."""
    if not getattr(args, "init_from", None):
        return list(args.overrides)
    if any(o.strip().startswith("train.init_from=") for o in args.overrides):
        raise ConfigError("give --init-from or --set train.init_from=..., not both")
    return [*args.overrides, f"train.init_from={args.init_from}"]


def without_default_model(config: RunConfig, args: argparse.Namespace) -> RunConfig:
    """With `--init-from` and no CONFIG, the built-in config's model section does not apply (the
    settings come from the source); `--set model.KEY=...` still does, and is checked against it."""
    if getattr(args, "init_from", None) and not args.config:
        keys = [o.split("=", 1)[0].strip() for o in args.overrides]
        given = {key[len("model."):] for key in keys if key.startswith("model.")}
        config.model.overrides = {k: v for k, v in config.model.overrides.items() if k in given}
    return config


def run(args: argparse.Namespace) -> int:
    from aiayn.training.config import load_config
    from aiayn.training.run import train_in_session
    from aiayn.training.run_dir import CONFIG_FILE, default_run_dir
    from aiayn.translation.task import TRANSLATION_TASK

    if args.resume is not None:
        check_resume_alone(args)
        run_dir = args.resume
        config = load_config(run_dir / CONFIG_FILE, args.overrides)
    else:
        run_dir = args.out or default_run_dir(args.config)
        config = without_default_model(load_config(args.config, init_from_override(args)), args)
    session = train_in_session(
        TRANSLATION_TASK, config, run_dir, resume=args.resume is not None, overwrite=args.overwrite
    )
    if session.results is None:
        return 130
    if session.is_main:
        print_results(session.results)
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
