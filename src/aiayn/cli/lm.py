"""`aiayn lm`: train a decoder-only language model on any text file, and sample from it.

    aiayn lm train --text notes.txt                     # the shakespeare_char settings on notes.txt
    aiayn lm train configs/shakespeare_char.yaml        # the config names its text file
    aiayn lm train --text novel.txt --tokenizer gpt2    # GPT-2's tokenizer (Hub name or tokenizer.json)
    aiayn lm train --resume runs/shakespeare_char-...   # continue a run
    aiayn lm generate --model runs/shakespeare_char-... --text "ROMEO:" --max-new-tokens 300

A relative text path (from `--text` or `data.text_file`) is read from the working directory
when it exists there, else from the data root (`$AIAYN_DATA_DIR`, by default `../shared/data`
beside the repository).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiayn.cli.arguments import bounded_int, device_option, number_type
from aiayn.cli.train import (
    add_run_arguments,
    check_resume_alone,
    init_from_override,
    print_config,
    without_default_model,
)
from aiayn.core.decoding_choices import GENERATE_TOP_K, SEED, TEMPERATURE, TOP_P
from aiayn.core.errors import ConfigError
from aiayn.training.run_dir import CONFIG_FILE, check_resumable, default_run_dir

if TYPE_CHECKING:
    from aiayn.training.config import RunConfig

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
DEFAULT_CONFIG = CONFIGS / "shakespeare_char.yaml"


def load_task_config(
    path: Path, defaults: dict[str, Any], set_fields: dict[str, Any], overrides: list[str]
) -> RunConfig:
    """Read a YAML config; fill in `defaults` (data fields not in the file), replace
    `set_fields` (data fields from command-line options), apply `--set` overrides, validate.
    Errors name the config file."""
    from aiayn.tasks import apply_overrides, config_from_dict
    from aiayn.training.config import read_yaml

    data = read_yaml(path)
    try:
        section = dict(data.get("data") or {})
        for key, value in defaults.items():
            section.setdefault(key, value)
        data["data"] = section | set_fields
        return config_from_dict(apply_overrides(data, list(overrides)))
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lm",
        help="train a language model on a text file, or generate text with one",
        description="Decoder-only (GPT-style) language models on any UTF-8 text file.",
    )
    commands = parser.add_subparsers(dest="lm_command", metavar="SUBCOMMAND", required=True)

    train = commands.add_parser(
        "train",
        help="train on a text file (default config: configs/shakespeare_char.yaml)",
        description="Train a character-level or byte-level BPE language model; the last "
        "data.valid_fraction of the text (10% by default) is held out for validation.",
    )
    train.add_argument("config", nargs="?", type=Path, help="YAML config (default: shakespeare_char)")
    train.add_argument("--text", metavar="FILE", help="the UTF-8 text file (replaces data.text_file)")
    add_tokenizer_argument(train)
    add_run_arguments(train)
    train.set_defaults(func=run_train)

    generate = commands.add_parser(
        "generate",
        help="sample text from a trained language model, streamed as it is produced",
        description="Continue --text (default: start from <bos>) with sampled tokens.",
    )
    generate.add_argument("--model", required=True, type=Path, metavar="DIR",
                          help="model directory, or a CTranslate2 export (aiayn export ctranslate2)")
    generate.add_argument("--text", default="", help="the prompt (default: none)")
    generate.add_argument(
        "--max-new-tokens", type=bounded_int(0), default=500, metavar="N", help="default 500"
    )
    generate.add_argument(
        "--temperature", type=number_type(TEMPERATURE), default=0.8, help="0 = greedy (default 0.8)"
    )
    generate.add_argument(
        "--top-k", type=number_type(GENERATE_TOP_K), default=None, metavar="K", help="sample from the K best"
    )
    generate.add_argument(
        "--top-p",
        type=number_type(TOP_P),
        default=None,
        metavar="P",
        help="nucleus sampling mass, in (0, 1]",
    )
    generate.add_argument("--seed", type=number_type(SEED), default=None,
                          help="random seed (default: random)")
    generate.add_argument("--device", default="auto", help="'cpu', 'cuda', ... or 'auto'")
    generate.set_defaults(func=run_generate)


def add_tokenizer_argument(parser: argparse.ArgumentParser) -> None:
    """--tokenizer (for `lm train` and `classify train`): replaces data.tokenizer."""
    parser.add_argument(
        "--tokenizer",
        metavar="SPEC",
        help="a kind to train (char, byte_bpe, bpe), a Hugging Face tokenizer.json or a directory "
        "holding one, or a Hub name such as gpt2 (needs internet the first time); replaces "
        "data.tokenizer. Name its special tokens with --set data.special_tokens='{bos: ..., eos: ...}'",
    )


def run_train(args: argparse.Namespace) -> int:
    from aiayn.lm.run import LM_TASK
    from aiayn.tasks import load_config
    from aiayn.training.run import train_in_session

    if args.resume is not None:
        check_resume_alone(args, "text", "tokenizer")
        run_dir = args.resume
        check_resumable(run_dir)
        config = load_config(run_dir / CONFIG_FILE, args.overrides)
    else:
        path = args.config or DEFAULT_CONFIG
        name = args.config or (Path(f"lm-{Path(args.text).stem}") if args.text else DEFAULT_CONFIG)
        run_dir = args.out or default_run_dir(name)
        set_fields = {"text_file": args.text} if args.text else {}
        if args.tokenizer:
            set_fields["tokenizer"] = args.tokenizer
        config = load_task_config(path, {"task": "text"}, set_fields, init_from_override(args))
        config = without_default_model(config, args)
    if args.print_config:
        return print_config(config, LM_TASK, run_dir)
    session = train_in_session(
        LM_TASK, config, run_dir, resume=args.resume is not None, overwrite=args.overwrite
    )
    if session.results is None:
        return 130
    if not session.is_main:
        return 0
    results = session.results
    loss = results["val_loss"]
    shown = f"; validation loss {loss:.4f} nats/token" if loss is not None else ""
    print(
        f"trained {results['steps']} steps in {results['train_minutes']:.2f} min "
        f"({results['tokens_per_s']:,.0f} tokens/s, {results['params']:,} parameters){shown}"
    )
    print(f"model directory: {session.run_dir}")
    print(f"sample:\n{results['sample']}")
    return 0


def run_generate(args: argparse.Namespace) -> int:
    from aiayn.inference import load

    generator = load(args.model, device_option(args.device), task="lm")
    pieces = generator.generate_stream(
        args.text, args.max_new_tokens, args.temperature, args.top_k, args.top_p, args.seed
    )
    sys.stdout.write(args.text)
    sys.stdout.flush()
    for piece in pieces:
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0
