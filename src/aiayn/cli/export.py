"""`aiayn export`: take a trained model to another runtime, computing the same function.

    aiayn export ctranslate2 --model runs/multi30k --out runs/multi30k-ct2 [--quantization int8]
    aiayn export huggingface --model runs/multi30k --out runs/multi30k-hf

A CTranslate2 export runs with `ctranslate2.Translator` / `Generator`, and with aiayn itself:
`aiayn translate --model runs/multi30k-ct2` (also evaluate, score, lm generate) decodes with
CTranslate2. A Hugging Face export loads with `AutoModelForSeq2SeqLM` (translation) or
`AutoModelForCausalLM` (language models) and `AutoTokenizer`. Both need the optional extra
`export` (pip install 'aiayn[export]'). A CTranslate2 directory has a README.txt with a
ready Python snippet; the project README shows both runtimes.
"""

from __future__ import annotations

import argparse

from aiayn.core.decoding_choices import EXPORT_QUANTIZATIONS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a model to CTranslate2 or Hugging Face Transformers",
        description="Write a model directory in another runtime's format (needs aiayn[export]).",
    )
    targets = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    for name, help_text in (
        ("ctranslate2", "a CTranslate2 model (translation models and language models)"),
        ("huggingface", "a Hugging Face Transformers model + tokenizer"),
    ):
        target = targets.add_parser(name, help=help_text, description=help_text)
        target.add_argument("--model", required=True, metavar="DIR", help="aiayn model directory")
        target.add_argument("--out", required=True, metavar="OUT", help="directory to write")
        target.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
        if name == "ctranslate2":
            target.add_argument("--quantization", choices=EXPORT_QUANTIZATIONS, default=None,
                                help="weight type (default: float32)")
        else:
            target.add_argument("--push-to-hub", metavar="NAME",
                                help="then upload OUT to the Hugging Face Hub as NAME (user/model)")
        target.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.target == "ctranslate2":
        from aiayn.export.ctranslate2 import export_ctranslate2

        out = export_ctranslate2(args.model, args.out, args.quantization, args.overwrite)
        print(f"CTranslate2 model written to {out} (see {out}/README.txt)")
    else:
        from aiayn.export.huggingface import export_huggingface

        out = export_huggingface(args.model, args.out, args.overwrite)
        print(f"Hugging Face model written to {out} (model card: {out}/README.md)")
        if args.push_to_hub:
            from aiayn.export.huggingface import push_to_hub

            print(f"uploaded to {push_to_hub(out, args.push_to_hub)}")
    return 0
