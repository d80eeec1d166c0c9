"""`aiayn train [CONFIG] [--out RUN_DIR | --resume RUN_DIR] [--init-from SOURCE] [--set KEY=VALUE ...]`.

`aiayn train --train-src A --train-tgt B [--valid-src V --valid-tgt W] [--minutes 60]` trains on
your own files: shorthands for `--set data.task=files data.train_src=A data.train_tgt=B
train.max_minutes=60`. Without CONFIG they apply to the built-in recipe for files
(`configs/files.yaml`, every setting `auto`) instead of the `dates` default; with a CONFIG they
override its values (each one replaced is logged). Giving one beside `--set` of the same key is
refused.

`--init-from SOURCE` starts from a trained model (fine-tuning; `aiayn.training.init_from`),
here and in `aiayn lm train` / `aiayn classify train`.

Under `torchrun --nproc_per_node=N -m aiayn train ...` the N processes train one model with
DistributedDataParallel (see `aiayn.training.distributed`); rank 0 prints and writes.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiayn.cli.arguments import finite_float
from aiayn.cli.options import add_set_option
from aiayn.core.errors import ConfigError

if TYPE_CHECKING:
    from aiayn.training.config import RunConfig
    from aiayn.training.task import Task


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a translation model (default: the built-in dates task)",
        description="Train a Transformer. With no CONFIG, trains the built-in `dates` task and "
        "prints its held-out exact-match accuracy.",
    )
    parser.add_argument("config", nargs="?", help="YAML config (default: the built-in dates task)")
    add_run_arguments(parser)
    files = parser.add_argument_group("your own files (without CONFIG: the built-in recipe, all `auto`)")
    for option, (key, what) in FILE_SHORTHANDS.items():
        files.add_argument(option, metavar="MINUTES" if option == "--minutes" else "FILE",
                           type=minutes if option == "--minutes" else str, help=f"{what} ({key})")
    parser.set_defaults(func=run)


minutes = finite_float(0, low_open=True)
"""`--minutes`: a positive number (train.max_minutes' range)."""

FILE_SHORTHANDS = {
    "--train-src": ("data.train_src", "training sources, one sentence a line (plain or .gz)"),
    "--train-tgt": ("data.train_tgt", "training targets, line-aligned with --train-src"),
    "--valid-src": ("data.valid_src", "validation sources (default: a seeded share of the training pairs)"),
    "--valid-tgt": ("data.valid_tgt", "validation targets"),
    "--test-src": ("data.test_src", "test sources (default: the final scores are on the validation set)"),
    "--test-tgt": ("data.test_tgt", "test targets"),
    "--minutes": ("train.max_minutes", "the training time budget in minutes"),
}
"""`aiayn train`'s shorthands for training on files: option -> (the config key it sets, help)."""

log = logging.getLogger(__name__)


def shorthand_overrides(args: argparse.Namespace) -> list[str]:
    """The `--set` overrides the file shorthands stand for (`data.task=files` with any file),
    checked: the two files of a split come together, and none repeats a `--set` key."""
    given = {option: getattr(args, option[2:].replace("-", "_"), None) for option in FILE_SHORTHANDS}
    given = {option: value for option, value in given.items() if value is not None}
    for split in ("train", "valid", "test"):
        if (f"--{split}-src" in given) != (f"--{split}-tgt" in given):
            raise ConfigError(f"--{split}-src and --{split}-tgt must be given together")
    keys = {o.split("=", 1)[0].strip() for o in args.overrides}
    overrides = [f"{FILE_SHORTHANDS[option][0]}={value}" for option, value in given.items()]
    if any(option != "--minutes" for option in given):
        overrides.insert(0, "data.task=files")
    for item in overrides:
        if item.split("=", 1)[0] in keys:
            raise ConfigError(f"give {item.split('=', 1)[0]} by its shorthand or by --set, not both")
    return overrides


def files_config(args: argparse.Namespace, shorthands: list[str]) -> str | Path | None:
    """The config the shorthands apply to: the built-in recipe for files without a CONFIG (when
    they name files); with one, its values they replace are logged."""
    from aiayn.training.config import read_yaml
    from aiayn.translation.settings import files_config_path

    if not args.config:
        return files_config_path() if any(o.startswith("data.") for o in shorthands) else None
    data = read_yaml(args.config)
    for item in shorthands:
        key, value = item.split("=", 1)
        section, name = key.split(".")
        old = (data.get(section) or {}).get(name)
        if old is not None and str(old) not in (value, value.removesuffix(".0")):
            log.warning("%s: %s %r replaced by the command line's %r", args.config, key, old, value)
    return args.config


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
    add_set_option(parser, "train.max_steps=200")
    parser.add_argument(
        "--print-config", action="store_true",
        help="print the effective config (the file, the built-in recipe, --set and the shorthands "
        "applied; checked; every setting left at 'auto' chosen as the run's start-up would, with its "
        "reason on stderr: the data is prepared and the model timed, as in a run's first minute) "
        "as YAML and exit without training or making the run directory",
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
        if "preset" not in given and config.model.preset == "auto":  # the source fixes the size
            config.model.preset = "small"
    return config


def run(args: argparse.Namespace) -> int:
    from aiayn.tasks import default_config_path, load_config
    from aiayn.training.run import train_in_session
    from aiayn.training.run_dir import CONFIG_FILE, check_resumable, default_run_dir
    from aiayn.translation.task import TRANSLATION_TASK

    path = None
    if args.resume is not None:
        check_resume_alone(args, *(option[2:].replace("-", "_") for option in FILE_SHORTHANDS))
        run_dir = args.resume
        check_resumable(run_dir)
        config = load_config(run_dir / CONFIG_FILE, args.overrides)
    else:
        shorthands = shorthand_overrides(args)
        path = files_config(args, shorthands)
        run_dir = args.out or default_run_dir(path or default_config_path())
        config = without_default_model(load_config(path, shorthands + init_from_override(args)), args)
    task = TRANSLATION_TASK
    if config.train.implementation == "paper":
        from aiayn.translation.paper_adapter import paper_task

        task = paper_task(task)
    if args.print_config:
        return print_config(config, task, run_dir)
    session = train_in_session(
        task, config, run_dir, resume=args.resume is not None, overwrite=args.overwrite
    )
    if session.results is None:
        return 130
    if session.is_main:
        print_results(session.results)
        if args.resume is None and path is None:  # the built-in dates recipe: bounded by steps
            print_guard_note(session.results, config)
    return 0


def print_guard_note(results: dict, config: RunConfig) -> None:
    """One line when the clock stopped a run that its steps bound (as the built-in `dates`
    recipe is: 1,500 steps, a guard far out): its figures are of a shorter run."""
    train = config.train
    if train.max_steps is not None and train.max_minutes is not None and results["steps"] < train.max_steps \
            and results["train_minutes"] >= train.max_minutes:
        print(f"note: the clock guard train.max_minutes={train.max_minutes} stopped the run at step "
              f"{results['steps']:,} of {train.max_steps:,}; these figures are of a shorter run")


def print_config(config: RunConfig, task: Task[Any, Any], run_dir: Path) -> int:
    """`--print-config`: the effective config as the run would write it to train_config.yaml.

    Settings left at `auto` (`aiayn.training.auto_settings`) are chosen first as the run's
    start-up would choose them (`aiayn.training.run.choose_settings`: the data prepared or found
    in the cache the run will use, the model timed), each with its reason on stderr; the timed
    ones can come out a little different in the run itself, as two runs' can."""
    from aiayn.training.auto_settings import auto_names

    if auto_names(config):
        from aiayn.training.run import choose_settings

        for name, choice in choose_settings(task, config, Path(run_dir)).items():
            print(f"{name} auto: {choice['reason']}: {choice['value']}", file=sys.stderr)
    print(config.to_yaml(), end="")
    return 0


def print_results(results: dict) -> None:
    test = results.get("test")
    print(
        f"trained {results['steps']} steps in {results['train_minutes']:.2f} min "
        f"({results['tokens_per_s']:,.0f} target tokens/s)"
    )
    for name, chosen in results.get("auto_settings", {}).items():
        print(f"  {name} auto: {chosen['value']} ({chosen['reason']})")
    if not test:
        return
    split = "" if test.get("split", "test") == "test" else " (the validation set: no test set given)"
    print(f"held-out exact match{split}: {test['exact_match']:.2f}%")
    print(f"held-out BLEU: {test['bleu']:.2f}  chrF: {test['chrf']:.2f}  ({test['signature']})")
    for example in results.get("examples", []):
        print(f"  {example['source']!r:45} -> {example['output']!r}")
