"""Training throughput: aiayn's full training step against a torch.nn.Transformer reference.

In one process, alternating step by step, at fp32 and bf16 autocast:
- ours: exactly what `aiayn train` runs (`Trainer.train_step`: forward, label-smoothed loss
  on non-pad positions, backward, clipping, Adam step);
- reference: `torch.nn.Transformer` of identical shape, eager, label-smoothed
  `F.cross_entropy`, Adam; both with dropout 0.1.
Batches are Multi30k-shaped (~4,096 target tokens, lengths 20-30, padded). Also measures the
machine's dense matmul peak, and MFU = 6 x (encoder non-embedding params x non-pad source
tokens + (decoder + output projection) params x non-pad target tokens) / time / peak.

    python benchmarks/train_throughput.py [--presets small base] [--steps 8]
    python benchmarks/train_throughput.py --compare-compile [--presets small] [--threads 1]

`--compare-compile` times the eager step against the compiled one (`train.compile: true`,
`aiayn.training.compiled_step`) instead of the reference: two Trainers from the same weights,
alternating step by step, the median of `--steps` timed steps after two untimed ones (the
compiled step compiles in its first), in each of `--precisions`; it records the compile time
and compiled / eager. Results go to benchmarks/results/train_compile.json unless --out.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aiayn.data.batching import make_batch
from aiayn.data.special_tokens import TRAINED_SPECIALS
from aiayn.model import ModelConfig, Transformer
from aiayn.tasks import config_from_dict
from aiayn.training.device import autocast, select_device
from aiayn.training.loss import translation_loss
from aiayn.training.precision import use_float32_attention
from aiayn.training.trainer import Trainer
from reference import ReferenceTransformer, reference_loss

RESULTS = Path(__file__).resolve().parent / "results" / "train_throughput.json"


def matmul_peak(dtype: torch.dtype, size: int = 2048, repeats: int = 10, device="cpu") -> float:
    """Median dense matmul throughput (FLOP/s) of torch.mm at `dtype`."""
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    torch.mm(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        if device != "cpu":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times)


def make_batches(count: int, target_tokens: int, vocab: int, seed: int) -> list:
    rng = random.Random(seed)
    batches = []
    for _ in range(count):
        src, tgt = [], []
        tokens = 0
        while tokens < target_tokens:
            length = rng.randint(20, 30)
            src.append([rng.randrange(4, vocab) for _ in range(rng.randint(20, 30))])
            tgt.append([rng.randrange(4, vocab) for _ in range(length)])
            tokens += length + 1  # + <eos>
        batches.append(make_batch(src, tgt, specials=TRAINED_SPECIALS))  # words: ids past 0..3
    return batches


def model_flops(model: Transformer, batch) -> float:
    """6 x (encoder non-embedding params x source tokens + decoder & projection params x target tokens)."""
    encoder = sum(p.numel() for p in model.encoder.parameters())
    decoder = sum(p.numel() for p in model.decoder.parameters())
    projection = model.output_projection.weight.numel()
    return 6 * (encoder * batch.num_src_tokens + (decoder + projection) * batch.num_targets)


def bench(preset: str, precision: str, steps: int, batches: list, device: torch.device, peak: float) -> dict:
    config = ModelConfig.preset(preset, vocab_size=8000, dropout=0.1, max_len=128)
    torch.manual_seed(0)
    ours = use_float32_attention(Transformer(config))  # as aiayn train builds it
    run = config_from_dict(
        {
            "train": {
                "precision": precision,
                "device": str(device),
                "warmup": 4000,
                "clip_grad_norm": 1.0,
                "label_smoothing": 0.1,
                "progress": "none",
            },
        }
    )
    run_dir = Path(tempfile.mkdtemp())
    trainer = Trainer(run, ours, train_data=None, valid_data=None, run_dir=run_dir, loss_fn=translation_loss)
    reference = ReferenceTransformer(config).to(device)
    ref_optimizer = torch.optim.Adam(reference.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def ours_step(batch):
        trainer.train_step([batch])

    def reference_step(batch):
        batch = batch.to(device)
        with autocast(precision, device):
            loss = reference_loss(reference, batch.src, batch.tgt_in, batch.labels)
        loss.backward()
        ref_optimizer.step()
        ref_optimizer.zero_grad(set_to_none=True)

    times = {"ours": [], "reference": []}
    for i in range(steps + 2):  # two warm-up steps each
        batch = batches[i % len(batches)]
        for name, step in (("ours", ours_step), ("reference", reference_step)):
            start = time.perf_counter()
            step(batch)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if i >= 2:
                times[name].append(
                    (time.perf_counter() - start, batch.num_targets, model_flops(ours, batch))
                )
    result = {}
    for name, rows in times.items():
        result[f"{name}_tok_s"] = statistics.median(tokens / t for t, tokens, _ in rows)
        result[f"{name}_mfu"] = statistics.median(flops / t for t, _, flops in rows) / peak
    out = {
        "ours_tok_s": round(result["ours_tok_s"], 1),
        "reference_tok_s": round(result["reference_tok_s"], 1),
        "ratio": round(result["ours_tok_s"] / result["reference_tok_s"], 3),
        "mfu": round(result["ours_mfu"], 4),
        "reference_mfu": round(result["reference_mfu"], 4),
    }
    print(
        f"{preset:5} {precision:4}: ours {out['ours_tok_s']:8.1f} tok/s  reference "
        f"{out['reference_tok_s']:8.1f} tok/s  ratio {out['ratio']:.2f}  MFU {out['mfu']:.1%} "
        f"(reference {out['reference_mfu']:.1%})",
        flush=True,
    )
    return out


def bench_compile(preset: str, precision: str, steps: int, batches: list, device: torch.device,
                  backend: str) -> dict:
    """Eager against compiled `Trainer.train_step`, alternating; medians of target tokens/s."""
    from aiayn.training.compiled_step import compile_loss

    config = ModelConfig.preset(preset, vocab_size=8000, dropout=0.1, max_len=128)
    trainers = {}
    for mode in ("eager", "compiled"):
        torch.manual_seed(0)
        run = config_from_dict({"train": {"precision": precision, "device": str(device), "warmup": 4000,
                                          "compile": "false", "progress": "none"}})
        trainer = Trainer(run, Transformer(config), train_data=None, valid_data=None,
                          run_dir=Path(tempfile.mkdtemp()), loss_fn=translation_loss)
        if mode == "compiled":
            trainer.step_loss = compile_loss(translation_loss, backend, device_type=device.type)
        trainers[mode] = trainer
    rates: dict[str, list[float]] = {"eager": [], "compiled": []}
    first: dict[str, float] = {}
    for i in range(steps + 2):
        batch = batches[i % len(batches)]
        order = ("eager", "compiled") if i % 2 else ("compiled", "eager")
        for mode in order:
            start = time.perf_counter()
            trainers[mode].train_step([batch])
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            if i == 0:
                first[mode] = seconds
            elif i >= 2:
                rates[mode].append(batch.num_targets / seconds)
    out = {mode: round(statistics.median(r), 1) for mode, r in rates.items()}
    out["compiled_over_eager"] = round(out["compiled"] / out["eager"], 3)
    out["compile_s"] = round(first["compiled"] - first["eager"], 1)
    print(f"{preset:5} {precision:4}: eager {out['eager']:8.1f} tok/s  compiled {out['compiled']:8.1f} tok/s "
          f"ratio {out['compiled_over_eager']:.2f}  (compiling took {out['compile_s']:.0f} s)", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per model (median)")
    parser.add_argument("--target-tokens", type=int, default=4096)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--compare-compile", action="store_true", help="eager against compiled steps")
    parser.add_argument("--backend", default="inductor", help="TorchDynamo backend of --compare-compile")
    parser.add_argument("--profile", action="store_true",
                        help="where an eager step's time goes, by operator (torch.profiler)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = select_device(args.device)
    if args.compare_compile:
        compare_compile(args, device)
        return
    if args.profile:
        profile_steps(args, device)
        return
    args.out = args.out or RESULTS
    peaks = {
        "fp32": matmul_peak(torch.float32, device=device.type),
        "bf16": matmul_peak(torch.bfloat16, device=device.type),
    }
    print(f"matmul peak: fp32 {peaks['fp32'] / 1e9:.0f} GFLOP/s, bf16 {peaks['bf16'] / 1e9:.0f} GFLOP/s")
    batches = make_batches(4, args.target_tokens, 8000, seed=0)
    results: dict = {}
    for preset in args.presets:
        for precision in args.precisions:
            results.setdefault(preset, {})[precision] = bench(
                preset, precision, args.steps, batches, device, peaks[precision]
            )
    results["settings"] = {
        "command": "python " + " ".join(sys.argv),
        "device": str(device),
        "cpu": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "vocab_size": 8000,
        "target_tokens_per_batch": [b.num_targets for b in batches],
        "source_tokens_per_batch": [b.num_src_tokens for b in batches],
        "padded_target_positions": [b.labels.numel() for b in batches],
        "timed_steps": args.steps,
        "dropout": 0.1,
        "matmul_peak_gflops": {k: round(v / 1e9, 1) for k, v in peaks.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm")
ATTENTION = ("_scaled_dot_product",)


def profile_steps(args: argparse.Namespace, device: torch.device) -> None:
    """Self time of each operator over `--steps` eager `Trainer.train_step`s (after two untimed),
    and the shares of the matrix products and attention, which a compiled step leaves as they are."""
    from torch.profiler import profile

    batches = make_batches(4, args.target_tokens, 8000, seed=0)
    for preset in args.presets:
        for precision in args.precisions:
            config = ModelConfig.preset(preset, vocab_size=8000, dropout=0.1, max_len=128)
            torch.manual_seed(0)
            run = config_from_dict({"train": {"precision": precision, "device": str(device), "warmup": 4000,
                                              "compile": "false", "progress": "none"}})
            trainer = Trainer(run, use_float32_attention(Transformer(config)), train_data=None,
                              valid_data=None, run_dir=Path(tempfile.mkdtemp()), loss_fn=translation_loss)
            for batch in batches[:2]:
                trainer.train_step([batch])
            with profile() as prof:
                for i in range(args.steps):
                    trainer.train_step([batches[i % len(batches)]])
            events = prof.key_averages()
            total = sum(e.self_cpu_time_total for e in events) or 1.0
            share = {
                "matrix products": sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS) / total,
                "attention": sum(e.self_cpu_time_total for e in events
                                 if any(a in e.key for a in ATTENTION)) / total,
            }
            print(f"{preset} {precision}: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in share.items()))
            print(events.table(sort_by="self_cpu_time_total", row_limit=20))


def compare_compile(args: argparse.Namespace, device: torch.device) -> None:
    batches = make_batches(4, args.target_tokens, 8000, seed=0)
    results: dict = {}
    for preset in args.presets:
        for precision in args.precisions:
            results.setdefault(preset, {})[precision] = bench_compile(
                preset, precision, args.steps, batches, device, args.backend)
    results["settings"] = {
        "command": "python " + " ".join(sys.argv), "device": str(device),
        "cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
        "torch": torch.__version__, "backend": args.backend, "timed_steps": args.steps,
        "target_tokens_per_batch": [b.num_targets for b in batches],
    }
    out = args.out or RESULTS.with_name("train_compile.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
