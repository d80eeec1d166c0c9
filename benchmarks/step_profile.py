"""Where decoding time goes, per kind of operation, in aiayn and in CTranslate2 on the same batches.

    python benchmarks/step_profile.py --model benchmarks/runs/multi30k_de_en --limit 300 --cores 1
    # writes benchmarks/results/step_profile.json

Each engine of `benchmarks/export_speed.py` (aiayn eager, compiled, int8, int8 compiled;
CTranslate2 float32 and int8) decodes the same length-sorted batches (beam `--beam`) in its own
process, pinned to `--cores` with `--threads` threads, under `perf record -e cpu-clock`. Only the
timed part is sampled: the worker switches perf on and off through its control FIFO
(`perf record --control`, `$PERF_CONTROL`), so loading, warming up and compiling are left out.

The one profiler both engines share is the CPU's, so the profile is by symbol, and symbols are
put into kinds of work by name (`KINDS`, first match wins): the matrix products; code generated
at run time that perf cannot name (oneDNN's and CTranslate2's JIT GEMM kernels, in both engines);
attention and softmax; layer norm; Inductor's generated loops; the search's own work (top-k,
gathers); element-wise kernels; memory (allocation, copies, page faults); the Python
interpreter; the framework between them (PyTorch's dispatcher, tensor bookkeeping, autograd's
no-grad checks, pybind11); the OS kernel; the rest. Each kind is reported as its share of the
samples and as seconds of the timed part (share x the worker's CPU time), per sentence, so that
engines compare directly; the 12 heaviest symbols of each engine are kept too.

Needs `perf` (linux-tools) with `perf_event_paranoid` <= 2; a missing `perf` exits with one line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import export_speed  # the harness this reuses: batches, exports, workers
from aiayn.core.files import atomic_write_text

RESULTS = Path(__file__).parent / "results" / "step_profile.json"
KINDS: list[tuple[str, str]] = [
    ("OS kernel", r"\[kernel\.kallsyms\]|\[k\]"),
    ("Inductor's generated loops", r"cpp_fused|torchinductor|kernel_cpp|\.main\.so"),
    ("memory (alloc, copy, page faults)",
     r"malloc|free\b|_int_free|cfree|memset|memcpy|memmove|mmap|munmap|brk|realloc|posix_memalign"
     r"|CPUCachingAllocator|allocate|deallocate"),
    ("matrix products (named)", r"gemm|gemv|brgemm|mkl_blas|sgemm|fbgemm|inner_product|matmul|_ip_|dot_prod"
     r"|PackedGemm|packed_linear|int8_linear|qlinear|linear_dynamic"),
    ("run-time generated code (JIT GEMM kernels)", r"\[unknown\]|\[JIT\]|//anon|jit_"),
    ("attention and softmax", r"softmax|flash_attention|scaled_dot_product|attention"),
    ("layer norm", r"layer_?norm|LayerNorm"),
    ("search (top-k, gather, sort)",
     r"topk|TopK|sort|gather|index_select|argmax|Argmax|beam|index_put|scatter"),
    ("element-wise", r"vectorized|Vectorized|cpu_kernel|binary_op|unary|add_kernel|mul_kernel|copy_kernel|"
     r"fill|where|masked|cat_|\bcat\b|clamp|relu|gelu|exp|log|div|sub_|add_|mul_|primitives::|transpose"),
    ("Python interpreter", r"libpython|python3"),
    ("framework (dispatch, tensor bookkeeping, bindings)",
     r"c10::|at::_ops|at::native|at::Tensor|torch::|pybind|Dispatcher|TensorImpl|intrusive_ptr|"
     r"autograd|THP|libtorch|libc10|dynamo|guard"),
    ("CTranslate2 other", r"ctranslate2|libctranslate2"),
]


def classify(dso: str, symbol: str) -> str:
    """The kind of work of a sample of `symbol` in `dso` (the first `KINDS` pattern that matches)."""
    text = f"{dso} {symbol}"
    for kind, pattern in KINDS:
        if re.search(pattern, text):
            return kind
    return "other"


def parse_report(text: str) -> list[tuple[float, str, str]]:
    """(percent, dso, symbol) rows of `perf report --stdio --no-children --sort dso,sym -t '\\t'`
    (a DSO's name may hold spaces: "[JIT] tid 123")."""
    rows = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0].strip().endswith("%"):
            rows.append((float(fields[0].strip().rstrip("%")), fields[1].strip(), fields[2].strip()))
    return rows


def profile_engine(args: argparse.Namespace, engine: str, batches: Path, ct2: dict, work: Path) -> dict:
    """One worker under perf, sampling its timed part; its kinds of work and heaviest symbols."""
    data, control, ack = work / f"{engine}.perf", work / f"{engine}.ctl", work / f"{engine}.ack"
    for fifo in (control, ack):
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
    prefix = ["perf", "record", "-e", "cpu-clock", "-F", str(args.frequency), "-D", "-1",
              "--control", f"fifo:{control},{ack}", "-o", str(data), "--"]
    result = export_speed.spawn(args, engine, "search", args.beam, batches, ct2, prefix=prefix,
                                env={"PERF_CONTROL": str(control), "PERF_ACK": str(ack)})
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                             "--sort", "dso,sym", "-t", "\t"],
                            capture_output=True, text=True, check=True).stdout
    rows = parse_report(report)
    cpu_s = result["user_s"] + result["sys_s"]
    sentences = sum(len(batch) for batch in json.loads(batches.read_text()))
    kinds: dict[str, float] = {}
    for percent, dso, symbol in rows:
        kind = classify(dso, symbol)
        kinds[kind] = kinds.get(kind, 0.0) + percent
    total = sum(kinds.values()) or 1.0
    return {
        "cpu_s": round(cpu_s, 3),
        "wall_s": round(result["wall_s"], 3),
        "cpu_ms_per_sentence": round(1000 * cpu_s / sentences, 3),
        "kinds": {kind: {"share": round(share / total, 4),
                         "ms_per_sentence": round(1000 * cpu_s * share / total / sentences, 3)}
                  for kind, share in sorted(kinds.items(), key=lambda item: -item[1])},
        "top_symbols": [{"percent": p, "dso": Path(d).name, "symbol": s[:160], "kind": classify(d, s)}
                        for p, d, s in rows[:12]],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a translation model directory")
    parser.add_argument("--source", type=Path, default=None, help="test sources (default Multi30k's)")
    parser.add_argument("--reference", type=Path, default=None, help="their references")
    parser.add_argument("--limit", type=int, default=300, help="first N test sentences")
    parser.add_argument("--engines", default=",".join(export_speed.ENGINES),
                        help=f"comma-separated, from {', '.join(export_speed.ENGINES)}")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cores", default="0")
    parser.add_argument("--batch-sentences", type=int, default=64)
    parser.add_argument("--frequency", type=int, default=1999, help="perf samples per second")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.length = 20  # the workers' equal-work length (unused: search mode)
    if shutil.which("perf") is None:
        sys.exit("step_profile: needs `perf` on the PATH (linux-tools / linux-perf)")
    engines = args.engines.split(",")
    unknown = sorted(set(engines) - set(export_speed.ENGINES))
    if unknown:
        sys.exit(f"step_profile: --engines: unknown {', '.join(unknown)}")

    from aiayn.export import export_ctranslate2

    sources, _ = export_speed.read_test_set(args)
    work = args.work or Path(tempfile.mkdtemp(prefix="step_profile_"))
    work.mkdir(parents=True, exist_ok=True)
    ct2 = {f"ctranslate2_{kind}": export_ctranslate2(args.model, work / f"ct2_{kind}", quant, overwrite=True)
           for kind, quant in (("float32", None), ("int8", "int8")) if f"ctranslate2_{kind}" in engines}
    batches = work / "batches.json"
    batches.write_text(json.dumps(export_speed.make_batches(args.model, sources, args.batch_sentences)))
    profiles = {}
    for engine in engines:
        profiles[engine] = profile_engine(args, engine, batches, ct2, work)
        kinds = profiles[engine]["kinds"]
        print(f"{engine}: {profiles[engine]['cpu_ms_per_sentence']:.2f} CPU ms/sentence; "
              + "; ".join(f"{k} {v['ms_per_sentence']:.2f}" for k, v in list(kinds.items())[:6]), flush=True)

    import ctranslate2
    import torch

    results = {
        "engines": profiles,
        "settings": {
            "sentences": len(sources), "beam": args.beam, "alpha": args.alpha, "threads": args.threads,
            "cores": args.cores, "batch_sentences": args.batch_sentences, "frequency": args.frequency,
            "model": str(args.model), "torch": torch.__version__, "ctranslate2": ctranslate2.__version__,
            "cpu": export_speed.cpu_info(),
            "command": "python benchmarks/step_profile.py "
            + shlex.join(argv if argv is not None else sys.argv[1:]),
        },
    }
    atomic_write_text(args.out, json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return results


if __name__ == "__main__":
    main()
