"""`aiayn demo`: build a model from a preset, run one forward pass, print shapes and size."""

from __future__ import annotations

import argparse

from aiayn.cli.arguments import bounded_int


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="build a preset model and run a forward pass")
    parser.add_argument("--preset", default="small", choices=["tiny", "small", "base", "big"])
    parser.add_argument("--vocab-size", type=bounded_int(5, 1_000_000), default=8000)
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
