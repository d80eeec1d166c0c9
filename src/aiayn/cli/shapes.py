"""`aiayn shapes`: build an untrained model of a preset, run one forward pass on random token
ids, and print its parameter count and tensor shapes (what `aiayn demo` did; `make demo` trains
the `dates` model instead)."""

from __future__ import annotations

import argparse

from aiayn.cli.arguments import bounded_int


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "shapes", help="an untrained preset model's parameter count and tensor shapes (one forward pass)"
    )
    parser.add_argument("--preset", default="small", choices=["tiny", "small", "base", "big"],
                        help="the sizes (Table 3's base and big; default small)")
    parser.add_argument("--vocab-size", type=bounded_int(5, 1_000_000), default=8000,
                        help="source and target vocabulary size (default 8000)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from aiayn.model import ModelConfig, Transformer

    config = ModelConfig.preset(args.preset, vocab_size=args.vocab_size)
    model = Transformer(config).eval()
    src = torch.randint(4, args.vocab_size, (2, 11))
    tgt_in = torch.randint(4, args.vocab_size, (2, 7))
    with torch.no_grad():
        logits = model(src, tgt_in)
    params = sum(p.numel() for p in model.parameters())
    print(f"preset {args.preset}: {params:,} parameters")
    print(f"src {tuple(src.shape)} + tgt_in {tuple(tgt_in.shape)} -> logits {tuple(logits.shape)}")
    return 0
