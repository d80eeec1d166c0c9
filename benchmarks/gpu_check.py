"""The figures of one GPU check (benchmarks/gpu_check.sh), every one into a JSON file.

    python benchmarks/gpu_check.py throughput --out F.json [--presets small base] [--batch-tokens 3000 16000]
    python benchmarks/gpu_check.py auto RUN_DIR --out F.json      # adds a finished `auto` run's figures

`throughput`: aiayn's training step (`Trainer.train_step`, what `aiayn train` runs: forward, loss,
backward, clipping, Adam) of each preset at each batch size, in fp32 eager and in bf16 compiled
(`aiayn.training.compiled_step`), alternating step by step, the median of `--steps` timed steps.
Each row has target tokens/s and MFU: 6 x N x tokens (N: the encoder's parameters per source
token, the decoder's and the output projection's per target token, as train_throughput.py counts
them) plus the attention's score and value matmuls (3 x 4 x d_model x (encoder layers x B x S^2 +
decoder layers x B x (T^2 + T x S)), forward and backward, padded lengths), against the device's
peak for the dtype: the datasheet's dense figure for a known GPU (`DATASHEET_PEAKS`), else a measured
matmul peak; the JSON and the printout name the peak used. Batches are Multi30k-shaped (lengths
20-30, train_throughput.py's). The bf16 step holds the attention kernels `aiayn.training.precision`
chooses for CUDA (flash / memory-efficient, no cuDNN), as a run does.

`auto`: the test BLEU, precision, batch, expected and reached updates and the validations' share
of the run of an `aiayn train` run (the script's `auto` on Tatoeba en-es), added to the same file.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiayn.core.files import atomic_write_text

if "throughput" in sys.argv[1:2] or __name__ != "__main__":  # the `auto` stage reads JSON only: no torch
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from aiayn.model import ModelConfig, Transformer
    from aiayn.tasks import config_from_dict
    from aiayn.training.compiled_step import compile_loss
    from aiayn.training.device import select_device
    from aiayn.training.loss import translation_loss
    from aiayn.training.precision import attention_context, precision_context
    from aiayn.training.trainer import Trainer
    from train_throughput import make_batches, matmul_peak, model_flops

DATASHEET_PEAKS = {  # dense FLOP/s (no sparsity), SXM parts; fp32 without tensor cores
    "H100": {"fp32": 67e12, "bf16": 989.4e12},
    "H200": {"fp32": 67e12, "bf16": 989.4e12},
    "A100": {"fp32": 19.5e12, "bf16": 312e12},
    "L40S": {"fp32": 91.6e12, "bf16": 362.05e12},
    "L4": {"fp32": 30.3e12, "bf16": 121e12},
}
MODES = (("fp32", "eager"), ("bf16", "compiled"))


def device_peaks(device: torch.device, size: int = 2048) -> dict[str, dict[str, Any]]:
    """The peak FLOP/s of each dtype used for MFU, and where it comes from (a GPU's datasheet, else
    `size` x `size` matmuls measured)."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, peaks in DATASHEET_PEAKS.items():
            if key in name.split():
                return {d: {"flops": f, "source": f"{key} datasheet, dense"} for d, f in peaks.items()}
    return {
        dtype: {"flops": matmul_peak(getattr(torch, name), size=size, device=device.type),
                "source": f"measured torch.mm {size}x{size}"}
        for dtype, name in (("fp32", "float32"), ("bf16", "bfloat16"))
    }


def attention_flops(config: ModelConfig, batch: Any) -> float:
    """Score and value matmuls of every attention layer, forward and backward, padded lengths."""
    rows, source, target = batch.src.size(0), batch.src.size(1), batch.tgt_in.size(1)
    encoder = config.num_encoder_layers * rows * source * source
    decoder = config.num_decoder_layers * rows * (target * target + target * source)
    return 3 * 4 * config.d_model * (encoder + decoder)


def trainer_for(model: Transformer, precision: str, device: torch.device) -> Trainer:
    run = config_from_dict({"train": {"precision": precision, "device": str(device), "warmup": 4000,
                                      "compile": "false", "progress": "none"}})
    return Trainer(run, model, train_data=None, valid_data=None, run_dir=Path(tempfile.mkdtemp()),
                   loss_fn=translation_loss)


def preset_trainers(
    preset: str, device: torch.device, backend: str, vocab: int
) -> dict[tuple[str, str], Trainer]:
    """One Trainer per mode of `MODES`, from the same weights; the compiled one compiles at its
    first step, once for every batch size (its shapes are dynamic)."""
    config = ModelConfig.preset(preset, vocab_size=vocab, dropout=0.1, max_len=128)
    trainers = {}
    for precision, mode in MODES:
        torch.manual_seed(0)
        trainer = trainer_for(Transformer(config), precision, device)
        if mode == "compiled":
            trainer.step_loss = compile_loss(translation_loss, backend, device_type=device.type)
        trainers[(precision, mode)] = trainer
    return trainers


def throughput(trainers: dict[tuple[str, str], Trainer], preset: str, batch_tokens: int, steps: int,
               device: torch.device, peaks: dict[str, dict[str, Any]], vocab: int) -> dict[str, Any]:
    """fp32 eager and bf16 compiled steps of one preset at one batch size, alternating."""
    config = next(iter(trainers.values())).model.config
    batches = make_batches(4, batch_tokens, vocab, seed=0)
    times: dict[tuple[str, str], list[tuple[float, int, float]]] = {key: [] for key in trainers}
    started = time.perf_counter()
    for i in range(steps + 2):  # two untimed steps each: compiling, allocation
        batch = batches[i % len(batches)]
        for key, trainer in trainers.items():
            with precision_context(key[0], device), attention_context(device):
                before = time.perf_counter()
                trainer.train_step([batch])
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                seconds = time.perf_counter() - before
            if i >= 2:
                flops = model_flops(trainer.model, batch) + attention_flops(config, batch)
                times[key].append((seconds, batch.num_targets, flops))
    rows = {}
    for (precision, mode), timed in times.items():
        tokens_per_s = statistics.median(tokens / s for s, tokens, _ in timed)
        flops_per_s = statistics.median(flops / s for s, _, flops in timed)
        peak = peaks[precision]
        rows[f"{precision}_{mode}"] = {
            "tokens_per_s": round(tokens_per_s, 1), "mfu": round(flops_per_s / peak["flops"], 4),
            "peak_tflops": round(peak["flops"] / 1e12, 2), "peak_source": peak["source"],
        }
        mfu, tflops = flops_per_s / peak["flops"], peak["flops"] / 1e12
        print(f"{preset:5} {batch_tokens:6} tokens {precision} {mode:8}: {tokens_per_s:10,.0f} target "
              f"tokens/s, MFU {mfu:.1%} of {tflops:,.1f} TFLOP/s ({peak['source']})", flush=True)
    ratio = rows["bf16_compiled"]["tokens_per_s"] / rows["fp32_eager"]["tokens_per_s"]
    rows["bf16_over_fp32"] = round(ratio, 3)
    rows["seconds"] = round(time.perf_counter() - started, 1)
    return rows


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def run_throughput(args: argparse.Namespace) -> dict[str, Any]:
    device = select_device(args.device)
    peaks = device_peaks(device, args.peak_size)
    figures: dict[str, Any] = {}
    for preset in args.presets:
        trainers = preset_trainers(preset, device, args.backend, args.vocab)
        for batch_tokens in args.batch_tokens:
            figures.setdefault(preset, {})[str(batch_tokens)] = throughput(
                trainers, preset, batch_tokens, args.steps, device, peaks, args.vocab)
        del trainers
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "CPU"
    return {"throughput": figures, "device": {
        "name": name,
        "torch": torch.__version__, "peaks": peaks, "backend": args.backend, "steps": args.steps,
        "command": "python " + " ".join(sys.argv),
    }}


def run_auto(args: argparse.Namespace) -> dict[str, Any]:
    """The figures of a finished `auto` run directory."""
    results = json.loads((args.run_dir / "results.json").read_text())
    rows = [json.loads(line) for line in (args.run_dir / "metrics.jsonl").read_text().splitlines()]
    validation_s = sum(r.get("validation_s", 0.0) for r in rows if r.get("split") == "val")
    train_s = 60 * results["train_minutes"]
    test = results.get("test") or {}
    return {"auto": {
        "test_bleu": test.get("bleu"), "precision": results.get("precision"),
        "auto_settings": results.get("auto_settings"), "expected_updates": results.get("expected_updates"),
        "steps": results["steps"], "train_minutes": results["train_minutes"],
        "tokens_per_s": results.get("tokens_per_s"),
        "validation_share": round(validation_s / max(train_s, 1e-9), 4), "command": args.command,
    }}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    speed = sub.add_parser("throughput", help="fp32 eager and bf16 compiled steps, tokens/s and MFU")
    speed.add_argument("--presets", nargs="+", default=["small", "base"])
    speed.add_argument("--batch-tokens", nargs="+", type=int, default=[3000, 16000])
    speed.add_argument("--steps", type=int, default=10, help="timed steps per mode (median)")
    speed.add_argument("--vocab", type=int, default=8000)
    speed.add_argument("--device", default="auto")
    speed.add_argument("--backend", default="inductor", help="TorchDynamo backend of the compiled step")
    speed.add_argument("--peak-size", type=int, default=2048, help="matmul size of a measured peak")
    auto = sub.add_parser("auto", help="add the figures of a finished `auto` run")
    auto.add_argument("run_dir", type=Path)
    auto.add_argument("--command", default="")
    for stage in (speed, auto):
        stage.add_argument("--out", type=Path, required=True, help="the JSON file (figures are added to it)")
    args = parser.parse_args()
    figures = run_throughput(args) if args.stage == "throughput" else run_auto(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(load(args.out) | figures, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
