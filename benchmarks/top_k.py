"""The k best of each row: `aiayn.decoding.top_k.row_top_k` against `torch.topk`, and its chunk size.

Beam search takes the 2K best of R = sentences x K rows of V log-probabilities at every step
(greedy search the best one); this times both ways on those shapes, in one process,
alternating, and reports medians:

    taskset -c 0 python benchmarks/top_k.py --threads 1 --json benchmarks/results/top_k.json

`--chunks` times other chunk sizes too (the module's `CHUNK` is the one the search uses).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

import aiayn.decoding.top_k as top_k
from aiayn.core.files import atomic_write_text
from aiayn.runtime.cpu import cpu_info
from timing import call_seconds  # benchmarks/timing.py, beside this script


def median_us(function, repeats: int) -> float:
    """Median microseconds of `repeats` calls (after one)."""
    return statistics.median(call_seconds(function, repeats)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="64,256", help="R: rows of scores (sentences x beams)")
    parser.add_argument("--vocab", default="8000,16000,32000", help="V: columns")
    parser.add_argument("--k", default="1,8", help="k: 8 is beam 4's 2K, 1 greedy search's")
    parser.add_argument("--chunks", default="32,64,128", help="chunk sizes to time besides none")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    default_chunk, rows_out = top_k.CHUNK, []
    for rows in map(int, args.rows.split(",")):
        for vocab in map(int, args.vocab.split(",")):
            scores = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(0)).log_softmax(1)
            for k in map(int, args.k.split(",")):
                def reference(scores=scores, k=k):
                    return scores.max(dim=1) if k == 1 else scores.topk(k, dim=1)

                row = {"rows": rows, "vocab": vocab, "k": k, "torch_us": median_us(reference, args.repeats)}
                for chunk in map(int, args.chunks.split(",")):
                    top_k.CHUNK = chunk
                    row[f"chunk_{chunk}_us"] = median_us(
                        lambda scores=scores, k=k: top_k.row_top_k(scores, k), args.repeats
                    )
                top_k.CHUNK = default_chunk
                row["speedup_at_default_chunk"] = round(row["torch_us"] / row[f"chunk_{default_chunk}_us"], 2)
                rows_out.append(row)
                print(json.dumps({key: round(v, 1) if isinstance(v, float) else v for key, v in row.items()}))
    if args.json:
        info = cpu_info()
        record = {"cpu_model": info.model, "threads": args.threads, "torch": torch.__version__,
                  "default_chunk": default_chunk, "statistic": "median", "rows": rows_out}
        atomic_write_text(args.json, json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
