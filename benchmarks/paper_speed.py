"""Training speed of the reference `aiayn.paper` as a ratio of the engine's (`aiayn.model`).

One process, one thread, fp32, the small preset (vocabulary 8,000, dropout 0.1), both models
from the same weights; steps alternate engine / paper on the same Multi30k-shaped synthetic
batches (~1,500 target tokens, lengths 20-30, padded). A step is what `aiayn train` runs:
forward, label-smoothed loss (the engine's `translation_loss`; `paper_adapter.paper_loss` for
train.implementation=paper), backward, gradient clipping, Adam. Reports the median step time of
each and speed ratio = engine median / paper median (below 1: the paper model is slower).

    python benchmarks/paper_speed.py [--steps 200] [--warmup 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aiayn.model import ModelConfig, Transformer
from aiayn.training.loss import translation_loss
from aiayn.training.run import cpu_model
from aiayn.translation.paper_adapter import paper_loss, paper_model
from train_throughput import make_batches

RESULTS = Path(__file__).resolve().parent / "results" / "paper_speed.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="timed steps of each implementation")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps of each first")
    parser.add_argument("--batch-tokens", type=int, default=1500)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = ModelConfig.small(vocab_size=8000, dropout=0.1, max_len=128)
    torch.manual_seed(0)
    engine = Transformer(config).train()
    reference = paper_model(config).train()
    reference.load_state_dict(engine.state_dict())  # the same weights
    models = {"engine": (engine, translation_loss), "paper": (reference, paper_loss)}
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
                  for name, (m, _) in models.items()}  # fmt: skip
    batches = make_batches(8, args.batch_tokens, config.tgt_vocab_size, seed=1)
    times: dict[str, list[float]] = {name: [] for name in models}
    for step in range(args.warmup + args.steps):
        batch = batches[step % len(batches)]
        for name, (model, loss_fn) in models.items():  # alternating: the same machine load for both
            start = time.perf_counter()
            loss, targets = loss_fn(model, batch, 0.1)
            (loss / targets).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizers[name].step()
            optimizers[name].zero_grad(set_to_none=True)
            if step >= args.warmup:
                times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    tokens = statistics.mean(b.num_targets for b in batches)
    result = {
        "command": "python benchmarks/paper_speed.py " + " ".join(sys.argv[1:]),
        "cpu_model": cpu_model(),
        "threads": 1,
        "preset": "small",
        "precision": "fp32",
        "steps": args.steps,
        "target_tokens_per_batch": tokens,
        "median_step_s": medians,
        "target_tokens_per_s": {name: tokens / m for name, m in medians.items()},
        "paper_speed_ratio": medians["engine"] / medians["paper"],
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
