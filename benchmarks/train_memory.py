"""Resident memory and system-time share of training steps, with each memory fix switched off in turn.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/train_memory.py --steps 60 [--precision bf16]

The Multi30k recipe (`configs/multi30k_de_en.yaml`, its BPE tokenizer trained once, up front)
trains `--steps` steps in each of these variants, each in a process of its own (the settings
are per process) and all at the same time, so that they share the machine's load:

    before              glibc's malloc as it comes, oneDNN's caches as they come, and the loss
                        over the whole (N, V) logits: what `aiayn train` did before issue 18
    after               what `aiayn train` does now (`aiayn.training.memory`, projected loss)
    no_malloc_tuning    after, with glibc's malloc as it comes
    no_cache_caps       after, with oneDNN's caches as they come
    whole_logits        after, with the loss over the whole logits

Every `--every` steps each process records its VmRSS, peak RSS and user/system CPU time (from
`getrusage`). Written to `--json` (default benchmarks/results/train_memory.json) and printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("before", "after", "no_malloc_tuning", "no_cache_caps", "whole_logits")


def rss_gb() -> float:
    status = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")) / 2**20


def whole_logits_loss(model, batch, smoothing):
    """The translation loss as it was: (N, V) logits, then label-smoothed cross-entropy."""
    from aiayn.data.special_tokens import PAD_ID
    from aiayn.training.loss import label_smoothed_nll

    keep = batch.labels != PAD_ID
    logits = model(batch.src, batch.tgt_in, output_mask=keep)
    return label_smoothed_nll(logits, batch.labels[keep], smoothing), batch.num_targets


def child(args: argparse.Namespace) -> None:
    """One variant: apply its settings, then train and sample."""
    from aiayn.training import memory

    variant = args.child
    if variant not in ("before", "no_malloc_tuning"):
        memory.tune_malloc()
    if variant not in ("before", "no_cache_caps"):
        memory.cap_onednn_caches()
    import torch

    from aiayn.data.tokenizer import TokenizerPair
    from aiayn.model import Transformer
    from aiayn.tasks import load_config
    from aiayn.training.loss import translation_loss
    from aiayn.training.precision import use_float32_attention
    from aiayn.training.trainer import Trainer
    from aiayn.translation.data import prepare_data
    from aiayn.translation.task import build_model_config

    torch.set_num_threads(args.threads)
    # The dropout the recipe chooses on a fast machine (`auto` times the machine first).
    overrides = [f"train.precision={args.precision}", "train.validation_metric=loss", "model.dropout=0.3"]
    config = load_config(REPO / "configs" / "multi30k_de_en.yaml", overrides)
    tokenizers = TokenizerPair.load(args.tokenizer)
    data = prepare_data(config.data, tokenizers)
    torch.manual_seed(config.train.seed)
    model = use_float32_attention(Transformer(build_model_config(config, tokenizers)))  # as aiayn train
    loss_fn = whole_logits_loss if variant in ("before", "whole_logits") else translation_loss
    trainer = Trainer(config, model, data.train, None, Path(tempfile.mkdtemp()), loss_fn=loss_fn)
    trainer.precision = args.precision
    batches = trainer._batches()
    start, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    rows = []
    for step in range(1, args.steps + 1):
        trainer.train_step([next(batches)])
        if step % args.every == 0:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            user, system = usage.ru_utime - start.ru_utime, usage.ru_stime - start.ru_stime
            rows.append({
                "step": step, "rss_gb": round(rss_gb(), 3), "peak_rss_gb": round(usage.ru_maxrss / 2**20, 3),
                "user_s": round(user, 2), "sys_s": round(system, 2),
                "sys_time_fraction": round(system / max(user + system, 1e-9), 4),
                "minor_faults": usage.ru_minflt - start.ru_minflt,
                "wall_s": round(time.perf_counter() - started, 1), "load": round(os.getloadavg()[0], 2),
            })
    Path(args.json).write_text(json.dumps(rows))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per variant")
    parser.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "train_memory.json")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from aiayn.runtime.cpu import cpu_model
    from aiayn.tasks import load_config
    from aiayn.translation.data import prepare_data

    work = Path(tempfile.mkdtemp())
    config = load_config(REPO / "configs" / "multi30k_de_en.yaml")
    prepare_data(config.data).tokenizers.save(work)  # BPE once, for every variant
    load_start = os.getloadavg()
    processes = {
        variant: subprocess.Popen([
            sys.executable, __file__, "--child", variant, "--tokenizer", str(work), "--json",
            str(work / f"{variant}.json"), "--steps", str(args.steps), "--every", str(args.every),
            "--threads", str(args.threads), "--precision", args.precision,
        ])
        for variant in args.variants
    }
    for variant, process in processes.items():
        if process.wait() != 0:
            raise SystemExit(f"variant {variant} failed")
    rows = {variant: json.loads((work / f"{variant}.json").read_text()) for variant in args.variants}
    summary = {}
    for variant, samples in rows.items():
        last, early = samples[-1], samples[min(1, len(samples) - 1)]
        summary[variant] = {
            "rss_gb": last["rss_gb"], "peak_rss_gb": last["peak_rss_gb"],
            "rss_growth_gb": round(last["rss_gb"] - early["rss_gb"], 3),
            "sys_time_fraction": last["sys_time_fraction"],
            "user_s_per_step": round(last["user_s"] / last["step"], 3),
        }
        print(f"{variant:17} " + "  ".join(f"{k} {v}" for k, v in summary[variant].items()))
    figures = {
        "command": "python benchmarks/train_memory.py " + " ".join(sys.argv[1:]),
        "cpu_model": cpu_model(), "precision": args.precision, "threads": args.threads, "steps": args.steps,
        "load_average_start": load_start, "load_average_end": os.getloadavg(),
        "summary": summary, "samples": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
