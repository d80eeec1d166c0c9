"""Which matmul path torch takes on this CPU, and what a user can switch.

    python benchmarks/blas_paths.py          # writes benchmarks/results/blas_paths.json

torch.mm (2048 x 2048, one thread, median of 7) for: fp32 through the bundled MKL; fp32 with
oneDNN's internal bf16/tf32 precision (`torch.backends.mkldnn.matmul.fp32_precision`); true
bf16 (what `train.precision: bf16` autocast runs); and fp32 under MKL's CPU-dispatch
environment variables (each in a fresh process, since MKL reads them at load time).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results" / "blas_paths.json"
SIZE = 2048
ENVIRONMENTS = {
    "MKL_ENABLE_INSTRUCTIONS=AVX512": {"MKL_ENABLE_INSTRUCTIONS": "AVX512"},
    "MKL_DEBUG_CPU_TYPE=5": {"MKL_DEBUG_CPU_TYPE": "5"},
}


def gflops(dtype: torch.dtype = torch.float32, repeats: int = 7) -> float:
    torch.set_num_threads(1)
    a, b = torch.randn(SIZE, SIZE).to(dtype), torch.randn(SIZE, SIZE).to(dtype)
    torch.mm(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return 2 * SIZE**3 / statistics.median(times) / 1e9


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--fp32-only":
        print(gflops())
        return
    result = {"fp32 (MKL)": gflops()}
    for precision in ("bf16", "tf32"):
        torch.backends.mkldnn.matmul.fp32_precision = precision
        result[f"fp32 with mkldnn fp32_precision={precision}"] = gflops()
    torch.backends.mkldnn.matmul.fp32_precision = "ieee"
    result["bf16 (oneDNN)"] = gflops(torch.bfloat16)
    for name, extra in ENVIRONMENTS.items():
        out = subprocess.run([sys.executable, __file__, "--fp32-only"], env=os.environ | extra,
                             capture_output=True, text=True, check=True)
        result[f"fp32 (MKL), {name}"] = float(out.stdout)
    result["fp32 (MKL), again"] = gflops()
    figures = {name: round(value, 1) for name, value in result.items()}
    figures_with_settings = {"gflop_s_one_thread": figures, "torch": torch.__version__,
                             "command": "python benchmarks/blas_paths.py"}
    RESULTS.write_text(json.dumps(figures_with_settings, indent=2) + "\n")
    for name, value in figures.items():
        print(f"{name:45} {value:7.1f} GFLOP/s")


if __name__ == "__main__":
    main()
