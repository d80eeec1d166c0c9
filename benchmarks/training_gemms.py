"""The matrix products of a training step, through PyTorch's default CPU path and through oneDNN.

    taskset -c 1 python benchmarks/training_gemms.py      # writes benchmarks/results/training_gemms.json

A linear layer's training step makes three products: forward y = x W^T, and in the backward pass
dx = dy W and dW = dy^T x. On a CPU, PyTorch's `torch.mm` / `addmm` run them through its bundled
BLAS (MKL), eager or under `torch.compile` (Inductor's own GEMM templates need constant weights:
inference only). This times each product of the `small` preset's layer shapes (d_model 256,
d_ff 1024, the fused Q/K/V 768, a vocabulary of 8000) at `--rows` token rows, one thread, median
of `--repeats`, through `torch.mm` and through oneDNN (`torch.ops.mkldnn._linear_pointwise` on
plain tensors), in GFLOP/s: what a different kernel path, not a compiler, could give a CPU step.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from pathlib import Path

import torch

from aiayn.core.files import atomic_write_text
from timing import call_seconds  # benchmarks/timing.py, beside this script

RESULTS = Path(__file__).parent / "results" / "training_gemms.json"
SHAPES = [(256, 1024), (1024, 256), (256, 768), (256, 256), (256, 8000)]  # (in, out)


def gflops(fn, flops: float, repeats: int) -> float:
    """GFLOP/s of `fn` doing `flops`, from the median of `repeats` calls."""
    return flops / statistics.median(call_seconds(fn, repeats)) / 1e9


def onednn(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (N, in) @ weight (out, in)^T through oneDNN's matmul primitive."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")


def products(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor) -> list[tuple[str, Callable, Callable]]:
    """(name, through torch.mm, through oneDNN) for a linear layer's three training products."""
    return [
        ("forward", lambda: x @ weight.t(), lambda: onednn(x, weight)),
        ("grad_input", lambda: dy @ weight, lambda: onednn(dy, weight.t())),
        ("grad_weight", lambda: dy.t() @ x, lambda: onednn(dy.t(), x.t())),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096, help="token rows (a 4k-token batch)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from aiayn.runtime.cpu import cpu_info

    results: dict = {"products": []}
    for d_in, d_out in SHAPES:
        x, weight, dy = torch.randn(args.rows, d_in), torch.randn(d_out, d_in), torch.randn(args.rows, d_out)
        flops = 2.0 * args.rows * d_in * d_out
        row = {"in": d_in, "out": d_out}
        for name, default, alternative in products(x, weight, dy):
            torch.testing.assert_close(alternative(), default(), rtol=1e-3, atol=1e-2)  # the same product
            row[name] = {"mm": round(gflops(default, flops, args.repeats), 1),
                         "onednn": round(gflops(alternative, flops, args.repeats), 1)}
        results["products"].append(row)
        print(f"{d_in:5} -> {d_out:5}: " + "  ".join(f"{k} mm {v['mm']:5.1f} oneDNN {v['onednn']:5.1f}"
                                                    for k, v in row.items() if isinstance(v, dict)))
    info = cpu_info()
    results["settings"] = {"rows": args.rows, "repeats": args.repeats, "threads": args.threads,
                           "unit": "GFLOP/s", "torch": torch.__version__, "cpu_model": info.model,
                           "cpu_family": info.family, "cpu_model_number": info.model_number}
    atomic_write_text(args.out, json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
