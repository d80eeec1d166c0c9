"""`aiayn classify`: train an encoder-only sequence classifier, and classify texts with it.

    aiayn classify train                                   # the built-in brackets task
    aiayn classify train --tsv train.tsv --valid-tsv valid.tsv
    aiayn classify predict --model runs/brackets-... --text "(][)"
    aiayn classify predict --model runs/brackets-... --input texts.txt

TSV files hold one `text<TAB>label` example per line. `predict` prints `label<TAB>probability`
for each text (`--input`: one text per line, in input order).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.lm import CONFIGS, add_tokenizer_argument, load_task_config
from aiayn.cli.options import add_progress_argument
from aiayn.cli.train import (
    add_run_arguments,
    check_resume_alone,
    init_from_override,
    print_config,
    without_default_model,
)
from aiayn.core.errors import ConfigError
from aiayn.training.run_dir import CONFIG_FILE, check_resumable, default_run_dir

DEFAULT_CONFIG = CONFIGS / "brackets.yaml"
TSV_CONFIG = CONFIGS / "classify_tsv.yaml"  # the default with --tsv


PREDICT_CHUNK = 500
"""Texts classified (and printed) at a time by `classify predict`."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "classify",
        help="train a text classifier (encoder-only), or classify texts with one",
        description="Encoder-only sequence classification: the built-in brackets task or TSV files.",
    )
    commands = parser.add_subparsers(dest="classify_command", metavar="SUBCOMMAND", required=True)

    train = commands.add_parser(
        "train",
        help="train a classifier (default: the built-in balanced-brackets task)",
        description="Train an encoder-only classifier; prints the held-out accuracy.",
    )
    train.add_argument(
        "config",
        nargs="?",
        type=Path,
        help="YAML config (default: configs/brackets.yaml, or configs/classify_tsv.yaml with --tsv)",
    )
    train.add_argument("--tsv", metavar="TRAIN.tsv", help="training examples, text<TAB>label per line")
    train.add_argument(
        "--valid-tsv", metavar="VALID.tsv", help="validation examples (default: hold out data.valid_fraction)"
    )
    add_tokenizer_argument(train)
    add_run_arguments(train)
    train.set_defaults(func=run_train)

    predict = commands.add_parser(
        "predict",
        help="print the label and its probability for each text",
        description="Classify --text or each line of --input; prints label<TAB>probability.",
    )
    predict.add_argument("--model", required=True, type=Path, metavar="DIR", help="model directory")
    source = predict.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", metavar="FILE", help="texts to classify, one per line")
    source.add_argument("--text", help="one text to classify")
    predict.add_argument("--device", default="auto", help="'cpu', 'cuda', ... or 'auto'")
    add_progress_argument(predict)
    predict.set_defaults(func=run_predict)


def run_train(args: argparse.Namespace) -> int:
    from aiayn.classify.run import CLASSIFY_TASK
    from aiayn.tasks import load_config
    from aiayn.training.run import train_in_session

    if args.resume is not None:
        check_resume_alone(args, "tsv", "valid_tsv", "tokenizer")
        run_dir = args.resume
        check_resumable(run_dir)
        config = load_config(run_dir / CONFIG_FILE, args.overrides)
    else:
        if args.valid_tsv and not args.tsv:
            raise ConfigError("--valid-tsv needs --tsv")
        set_fields = {"task": "tsv", "train_tsv": args.tsv, "valid_tsv": args.valid_tsv} if args.tsv else {}
        if args.tokenizer:
            set_fields["tokenizer"] = args.tokenizer
        name = args.config or (Path(f"classify-{Path(args.tsv).stem}") if args.tsv else DEFAULT_CONFIG)
        run_dir = args.out or default_run_dir(name)
        path = args.config or (TSV_CONFIG if args.tsv else DEFAULT_CONFIG)
        config = load_task_config(path, {"task": "brackets"}, set_fields, init_from_override(args))
        config = without_default_model(config, args)
    if args.print_config:
        return print_config(config, CLASSIFY_TASK, run_dir)
    session = train_in_session(
        CLASSIFY_TASK, config, run_dir, resume=args.resume is not None, overwrite=args.overwrite
    )
    if session.results is None:
        return 130
    if not session.is_main:
        return 0
    results = session.results
    print(
        f"trained {results['steps']} steps in {results['train_minutes']:.2f} min "
        f"({results['params']:,} parameters)"
    )
    for split in ("valid", "test"):
        if results[f"{split}_accuracy"] is not None:
            print(
                f"{'validation' if split == 'valid' else 'held-out test'} accuracy: "
                f"{results[f'{split}_accuracy']:.2f}%"
            )
    print(f"model directory: {session.run_dir}")
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from aiayn.classify.predict import Classifier, check_texts
    from aiayn.core.progress_display import LineProgress
    from aiayn.data.corpus import read_lines
    from aiayn.training.device import select_device

    classifier = Classifier.load(args.model, device=select_device(args.device))
    if args.text is not None:
        texts, origin = [args.text], "--text"
    else:
        texts, origin = read_lines(args.input), args.input
    check_texts(texts, origin)  # the whole input first: nothing printed for a bad one
    with LineProgress(len(texts), "classify", args.progress) as progress:
        for first in range(0, len(texts), PREDICT_CHUNK):  # printed chunk by chunk, progress after each
            for prediction in classifier.predict(texts[first : first + PREDICT_CHUNK], origin, first + 1):
                print(f"{prediction.label}\t{prediction.probability:.4f}")
            progress.advance(min(first + PREDICT_CHUNK, len(texts)))
    return 0
