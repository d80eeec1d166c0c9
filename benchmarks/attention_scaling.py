"""Table 1 of the paper on this implementation: the time of one self-attention layer
(`aiayn.paper.attention`, O(n^2 * d)) against one position-wise feed-forward layer
(`aiayn.paper.PositionwiseFeedForward`, O(n * d^2)) as the sequence length n doubles.

The paper's claim (Sec. 4): self-attention is faster than a layer that costs O(n * d^2) while n is
smaller than d. Doubling n should about double the feed-forward time and, once the n x n scores
dominate, about quadruple the attention time.

    python benchmarks/attention_scaling.py                       # n = 64 .. 2048, d_model 512
    python benchmarks/attention_scaling.py --lengths 32 64 128 --repeats 3
"""

from __future__ import annotations

import argparse

import torch

from aiayn import paper
from timing import call_seconds  # benchmarks/timing.py, beside this script


def best_seconds(fn, repeats: int) -> float:
    """The fastest of `repeats` calls (the least disturbed by other work on the machine)."""
    return min(call_seconds(fn, repeats))


def measure(lengths: list[int], d_model: int, heads: int, repeats: int) -> list[dict]:
    """One row per length n: seconds for Eq. 1 on (1, heads, n, d_model / heads) queries, keys and
    values, and for the FFN (d_ff = 4 d_model) on (1, n, d_model)."""
    torch.manual_seed(0)
    ffn = paper.PositionwiseFeedForward(d_model, 4 * d_model).eval()
    rows = []
    with torch.inference_mode():
        for n in lengths:
            q, k, v = torch.randn(3, 1, heads, n, d_model // heads).unbind(0)
            x = torch.randn(1, n, d_model)
            rows.append({
                "n": n,
                "attention_ms": 1000 * best_seconds(lambda q=q, k=k, v=v: paper.attention(q, k, v), repeats),
                "ffn_ms": 1000 * best_seconds(lambda x=x: ffn(x), repeats),
            })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = measure(args.lengths, args.d_model, args.heads, args.repeats)
    threads = torch.get_num_threads()
    print(f"d_model {args.d_model}, {args.heads} heads, threads {threads}, best of {args.repeats}")
    print(f"{'n':>6} {'attention ms':>13} {'x prev':>7} {'FFN ms':>9} {'x prev':>7}")
    previous = None
    for row in rows:
        grow_a = f"{row['attention_ms'] / previous['attention_ms']:.1f}" if previous else "-"
        grow_f = f"{row['ffn_ms'] / previous['ffn_ms']:.1f}" if previous else "-"
        print(f"{row['n']:>6} {row['attention_ms']:>13.2f} {grow_a:>7} {row['ffn_ms']:>9.2f} {grow_f:>7}")
        previous = row


if __name__ == "__main__":
    main()
