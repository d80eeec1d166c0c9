"""`aiayn explore`: an offline HTML page to browse the attention of a model on sentences.

    aiayn explore --model runs/dates --input dates.txt --out explorer.html
    aiayn explore --model runs/multi30k --input test.de --ref test.en --out explorer.html

Each non-empty line of --input is a source sentence; its target is the model's translation
(beam search), or the matching line of --ref. The page is one file with the weights embedded
(see `aiayn.explorer`); open it in any browser, no server or network needed.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path

from aiayn.cli.arguments import bounded_int, device_option
from aiayn.core.errors import ConfigError, DataError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explore",
        help="write an offline HTML page to browse attention maps",
        description="Write one self-contained HTML page showing every attention weight of the "
        "model on the sentences of --input: choose sentence, attention kind, layer and head.",
    )
    parser.add_argument("--model", required=True, metavar="DIR", help="model directory")
    parser.add_argument("--input", required=True, metavar="FILE", help="source sentences, one per line")
    parser.add_argument(
        "--ref", metavar="FILE", help="target sentences, one per line (default: the model's translations)"
    )
    parser.add_argument("--out", required=True, metavar="FILE", help="the HTML page to write")
    parser.add_argument(
        "--beam", type=bounded_int(1), default=4, help="beam size for the translations (default 4)"
    )
    parser.add_argument(
        "--max-sentences",
        type=bounded_int(1),
        default=100,
        metavar="N",
        help="use the first N non-empty lines only (default 100)",
    )
    parser.add_argument("--title", help="page title (default: the model directory's name)")
    parser.add_argument(
        "--device", default="auto", help="'cpu', 'cuda', 'cuda:1', ... or 'auto' (CUDA when available)"
    )
    parser.set_defaults(func=run)


def read_sentences(path: str, option: str) -> list[tuple[int, str]]:
    """(line number, text) of each line of `path` (UTF-8, .gz ok)."""
    from aiayn.cli.translate import open_input, read_lines

    if not Path(path).is_file():
        raise DataError(f"{option} {path}: file not found")
    with ExitStack() as stack:
        return list(enumerate(read_lines(open_input(path, stack), path), start=1))


def run(args: argparse.Namespace) -> int:
    from aiayn.explorer import write_explorer
    from aiayn.inference import load
    from aiayn.plots.attention_data import attention_examples

    if Path(args.out).suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"--out {args.out}: the page must be an .html file")
    lines = read_sentences(args.input, "--input")
    refs: list[str | None] = [None] * len(lines)
    if args.ref is not None:
        ref_lines = read_sentences(args.ref, "--ref")
        if len(ref_lines) != len(lines):
            raise DataError(
                f"--input {args.input} has {len(lines)} lines but --ref {args.ref} {len(ref_lines)}"
            )
        refs = [text for _, text in ref_lines]
    chosen = [(number, text, ref) for (number, text), ref in zip(lines, refs, strict=True) if text.strip()]
    if not chosen:
        raise DataError(f"--input {args.input}: no non-empty line")
    if len(chosen) > args.max_sentences:
        print(
            f"aiayn explore: using the first {args.max_sentences} of {len(chosen)} sentences "
            "(--max-sentences)",
            file=sys.stderr,
        )
        chosen = chosen[: args.max_sentences]
    translator = load(args.model, device_option(args.device), task="translation")
    examples = attention_examples(
        translator,
        [text for _, text, _ in chosen],
        [ref for _, _, ref in chosen],
        beam=args.beam,
        where=[f"--input {args.input} line {number}" for number, _, _ in chosen],
    )
    config = translator.config
    model = {
        "d_model": config.d_model,
        "num_heads": config.num_heads,
        "num_encoder_layers": config.num_encoder_layers,
        "num_decoder_layers": config.num_decoder_layers,
    }
    title = args.title or f"{Path(args.model).resolve().name} attention explorer"
    path = write_explorer(examples, args.out, title=title, model=model)
    print(f"{path}: {len(examples)} sentence(s); open it in a browser (works offline)")
    return 0
