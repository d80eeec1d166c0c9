"""Beam-search speed of one model on each inference runtime: eager, int8 and compiled.

    python benchmarks/runtime_speed.py --model DIR --sentences 200 --out benchmarks/results/runtime_speed.json

Each runtime (`eager`: `aiayn.load(DIR)`, `int8`: `quantize="int8"`, `compiled`: `compile=True`)
translates the first `--sentences` lines of the source file (default: Multi30k
test_2016_flickr, German) with beam `--beam`, once untimed (first calls allocate; the compiled
step compiles its graphs on these shapes) and once timed; sentences/s of the timed run. Only
the public `aiayn.load` API is used, so `ab_compare.py --same-script` can run this file against
an older tree.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

RUNTIMES = {"eager": {}, "int8": {"quantize": "int8"}, "compiled": {"compile": True}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a translation model directory")
    parser.add_argument("--source", type=Path, default=None, help="default: Multi30k test_2016_flickr.de.gz")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help=f"comma-separated: {list(RUNTIMES)}")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    from aiayn import load
    from aiayn.data.corpus import read_lines
    from aiayn.data.paths import data_root

    torch.set_num_threads(args.threads)
    source = args.source or data_root() / "multi30k" / "test_2016_flickr.de.gz"
    sentences = read_lines(source)[: args.sentences]
    result: dict = {}
    for runtime in args.runtimes.split(","):
        translator = load(args.model, "cpu", task="translation", **RUNTIMES[runtime])
        translator.translate(sentences, beam=args.beam)
        start = time.perf_counter()
        translator.translate(sentences, beam=args.beam)
        result[runtime] = {"sent_s": len(sentences) / (time.perf_counter() - start)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
