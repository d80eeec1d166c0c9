"""PyTorch's two fused int8 CPU kernels, FBGEMM's and oneDNN's, on a decoder's shapes.

`aiayn.runtime.int8.PackedInt8` packs each int8 weight slice for both and runs a call on oneDNN's
when rows x output features reach `LARGE_PRODUCT`, on FBGEMM's below; this times both kernels
(`quantized::linear_dynamic`, one process, alternating, medians) on the shapes a decoder's step
and its encoder multiply, and says for each which one the rule picks and which one is faster:

    taskset -c 0 python benchmarks/int8_kernels.py --threads 1 --json benchmarks/results/int8_kernels.json

The defaults are the Multi30k and Tatoeba models' (d_model 256, d_ff 1024, a vocabulary of
8,000) with 1 to 256 decoder rows (beam 4's 64 sentences) and 1,600 encoder rows (64 sentences
of 25 tokens). Both kernels quantize the input per call; how far each is from the float32
product, and how many output values differ between them (and by how much), are recorded too.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from aiayn.core.files import atomic_write_text
from aiayn.runtime.cpu import cpu_info
from aiayn.runtime.int8 import LARGE_PRODUCT, PackedInt8, quantize_rows
from aiayn.runtime.operators import reduce_range
from timing import call_seconds  # benchmarks/timing.py, beside this script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="256x8000,256x768,256x256,256x1024,1024x256",
                        help="in x out features of the linear layers")
    parser.add_argument("--rows", default="1,4,16,64,128,256,1600", help="rows of the input")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds; medians reported")
    parser.add_argument("--calls", type=int, default=10, help="timed calls per round")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows_list = [int(r) for r in args.rows.split(",")]
    results = []
    for shape in args.shapes.split(","):
        in_features, out_features = (int(n) for n in shape.split("x"))
        float_weight, bias = torch.randn(out_features, in_features) * 0.05, torch.randn(out_features) * 0.1
        weight, scale = quantize_rows(float_weight)
        packed = PackedInt8(weight, scale.view(-1), bias)
        if packed.large is None:
            raise SystemExit("int8_kernels: this PyTorch has no oneDNN int8 kernel beside FBGEMM's")
        for rows in rows_list:
            x = torch.randn(rows, in_features)
            kernels = {"fbgemm": packed.small, "onednn": packed.large}
            times: dict[str, list[float]] = {name: [] for name in kernels}
            for _ in range(args.rounds):
                for name, weights in kernels.items():
                    def call(weights=weights, x=x):
                        return torch.ops.quantized.linear_dynamic(x, weights, reduce_range())
                    times[name].append(statistics.median(call_seconds(call, args.calls)))
            outputs = {name: torch.ops.quantized.linear_dynamic(x, w, reduce_range())
                       for name, w in kernels.items()}
            exact = torch.nn.functional.linear(x, float_weight, bias)
            apart = (outputs["fbgemm"] - outputs["onednn"]).abs()
            us = {name: statistics.median(t) * 1e6 for name, t in times.items()}
            picked = "onednn" if rows * out_features >= LARGE_PRODUCT else "fbgemm"
            faster = min(us, key=us.get)
            row = {"in": in_features, "out": out_features, "rows": rows,
                   "fbgemm_us": round(us["fbgemm"], 1), "onednn_us": round(us["onednn"], 1),
                   "onednn_over_fbgemm": round(us["onednn"] / us["fbgemm"], 3),
                   "picked": picked, "faster": faster,
                   "picked_over_faster": round(us[picked] / us[faster], 3),
                   "max_output_difference": float(apart.max()),
                   "share_of_values_differing_by_over_1e-4": float((apart > 1e-4).float().mean()),
                   "fbgemm_max_error_against_float32": float((outputs["fbgemm"] - exact).abs().max()),
                   "onednn_max_error_against_float32": float((outputs["onednn"] - exact).abs().max()),
                   "largest_float32_output": float(exact.abs().max())}
            results.append(row)
            print(f"{in_features:5d}x{out_features:<5d} rows {rows:5d}  fbgemm {us['fbgemm']:9.1f} us  "
                  f"onednn {us['onednn']:9.1f} us  "
                  f"picked {picked:6s} (x{row['picked_over_faster']:.2f} the faster)")
    if args.json:
        info = cpu_info()
        record = {"cpu_model": info.model,
                  "cpu_flags_vnni": bool({"avx512_vnni", "avx_vnni"} & info.flags),
                  "threads": args.threads, "torch": torch.__version__, "large_product": LARGE_PRODUCT,
                  "statistic": f"median of {args.rounds} rounds, each the median of {args.calls} calls",
                  "command": "python benchmarks/int8_kernels.py " + " ".join(
                      f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                      if k != "json" and v is not None),
                  "results": results}
        atomic_write_text(args.json, json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
