"""`aiayn import`: bring a model trained elsewhere in, the reverse of `aiayn export`.

    aiayn import huggingface Helsinki-NLP/opus-mt-en-de --out models/en-de
    aiayn import huggingface ./gpt2-dir --out models/gpt2

SOURCE is a Transformers directory (`MarianMTModel` or `GPT2LMHeadModel`) or a Hub name
(downloaded; offline, a one-line error). The result is an aiayn model directory: translate,
evaluate, serve or fine-tune it (`aiayn train --init-from DIR`). Needs aiayn[export].
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        help="import a Marian (OPUS-MT) or GPT-2 model from Hugging Face Transformers",
        description="Write an aiayn model directory from another library's checkpoint (needs aiayn[export]).",
    )
    sources = parser.add_subparsers(dest="source_kind", metavar="KIND", required=True)
    hf = sources.add_parser(
        "huggingface", help="a MarianMTModel or GPT2LMHeadModel (directory or Hub name)",
        description="Convert a Transformers MarianMTModel (OPUS-MT translation) or GPT2LMHeadModel (language "
        "model), from a local directory or a Hub name, into an aiayn model directory that translate, "
        "evaluate, lm generate and serve read (needs aiayn[export]).",
    )
    hf.add_argument("source", metavar="SOURCE", help="Transformers model directory or Hub name")
    hf.add_argument("--out", required=True, metavar="DIR", help="aiayn model directory to write")
    hf.add_argument("--overwrite", action="store_true", help="replace an existing DIR")
    hf.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from aiayn.formats.hf_format import import_huggingface

    out = import_huggingface(args.source, args.out, args.overwrite)
    print(f"aiayn model directory written to {out}")
    return 0
