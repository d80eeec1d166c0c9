"""How much of the packed training pass's speed comes from packing the feed-forward sub-layers alone.

Three training steps (`Trainer.train_step`: forward, label-smoothed loss, backward, clipping,
Adam) on the same Multi30k-shaped batches as `train_throughput.py`, alternating step by step,
each model with the same initial weights:

- padded: the stacks run on the padded (B, T, D) states; only the output projection and the
  loss skip padding (`hidden[output_mask]`), as before the packed pass existed;
- ffn: as padded, but every feed-forward sub-layer (LayerNorm, FFN, dropout, residual) packs
  its input to the (N, D) real tokens and unpacks its output: packing confined to the
  feed-forward sub-layers and the loss, attention and the stacks see one shape;
- packed: the packed pass of `aiayn.model.packing` (states packed between attention calls).

`share` = (ffn - padded) / (packed - padded) in tokens per second: the part of the packed
pass's gain that packing the feed-forward sub-layers and the loss alone keeps. Each figure is
the median over rounds of each round's median step; the variants take turns step by step. The
figures per second of the thread's CPU time (`cpu`) hold on a shared machine, where wall-clock
time (`wall`, also reported) includes waiting for a core.

    python benchmarks/packing_share.py --steps 6 --rounds 3 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_compare import cpu_model
from aiayn.model import ModelConfig, PackedLayout, Transformer
from aiayn.tasks import config_from_dict
from aiayn.training.loss import projected_label_smoothed_nll, translation_loss
from aiayn.training.trainer import Trainer
from train_throughput import make_batches

RESULTS = Path(__file__).resolve().parent / "results" / "packing_share.json"


class PackedFeedForwardSublayer(nn.Module):
    """A feed-forward `SublayerConnection` run on the real tokens of `layouts[side]` only."""

    def __init__(self, inner: nn.Module, layouts: dict[str, PackedLayout], side: str) -> None:
        super().__init__()
        self.inner, self.layouts, self.side = inner, layouts, side

    def forward(self, x: Tensor, sublayer: nn.Module) -> Tensor:
        layout = self.layouts[self.side]
        return layout.unpack(self.inner(layout.pack(x), sublayer))  # (B, T, D) -> (N, D) -> (B, T, D)


def padded_loss(model: Transformer, batch, smoothing: float) -> tuple[Tensor, int]:
    """The stacks padded; projection and loss at the non-pad targets only."""
    output_mask = batch.labels != batch.pad_id
    hidden = model(batch.src, batch.tgt_in, return_hidden=True)[output_mask]  # (N, D)
    weight, labels = model.output_projection.weight, batch.labels[output_mask]
    return projected_label_smoothed_nll(hidden, weight, labels, smoothing), batch.num_targets


def ffn_packed(model: Transformer, layouts: dict[str, PackedLayout]) -> None:
    """Wrap the feed-forward sub-layers of `model` to pack with `layouts`, set before each pass."""
    for layer in model.encoder.layers:
        layer.feed_forward_sublayer = PackedFeedForwardSublayer(layer.feed_forward_sublayer, layouts, "src")
    for layer in model.decoder.layers:
        layer.feed_forward_sublayer = PackedFeedForwardSublayer(layer.feed_forward_sublayer, layouts, "tgt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per variant and round (median)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (median of the rounds' medians)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    batches = make_batches(4, 4096, 8000, seed=0)
    config = ModelConfig.preset(args.preset, vocab_size=8000, dropout=0.1, max_len=128)
    run = config_from_dict(
        {"train": {"precision": args.precision, "device": "cpu", "warmup": 4000, "clip_grad_norm": 1.0,
                   "label_smoothing": 0.1, "progress": "none"}}
    )  # fmt: skip
    trainers: dict[str, Trainer] = {}
    layouts: dict[str, PackedLayout] = {}

    def ffn_loss(model: Transformer, batch, smoothing: float) -> tuple[Tensor, int]:
        layouts["src"] = PackedLayout.from_padding_mask(batch.src != batch.pad_id)
        layouts["tgt"] = PackedLayout.from_padding_mask(batch.tgt_in != batch.pad_id)
        return padded_loss(model, batch, smoothing)

    for name in ("padded", "ffn", "packed"):
        torch.manual_seed(0)
        model = Transformer(config)
        if name == "ffn":
            ffn_packed(model, layouts)
        loss_fn = {"padded": padded_loss, "ffn": ffn_loss, "packed": translation_loss}[name]
        trainers[name] = Trainer(
            run, model, train_data=None, valid_data=None, run_dir=Path(tempfile.mkdtemp()), loss_fn=loss_fn
        )
    names = list(trainers)
    for i in range(2):  # two warm-up steps each
        for name in names:
            trainers[name].train_step([batches[i % len(batches)]])
    rounds: list[dict[str, dict[str, float]]] = []
    for _ in range(args.rounds):
        wall: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        for i in range(args.steps):
            batch = batches[i % len(batches)]
            for name in names[i % 3 :] + names[: i % 3]:  # each variant first, second and third in turn
                start_wall, start_cpu = time.perf_counter(), time.thread_time()
                trainers[name].train_step([batch])
                cpu[name].append(batch.num_targets / (time.thread_time() - start_cpu))
                wall[name].append(batch.num_targets / (time.perf_counter() - start_wall))
        rounds.append({kind: {name: statistics.median(values[name]) for name in names}
                       for kind, values in (("cpu", cpu), ("wall", wall))})  # fmt: skip
    result: dict = {}
    for kind in ("cpu", "wall"):  # tokens per second of this thread's CPU time, and of wall-clock time
        tok_s = {name: statistics.median(r[kind][name] for r in rounds) for name in names}
        gain = tok_s["packed"] - tok_s["padded"]
        share = (tok_s["ffn"] - tok_s["padded"]) / gain if gain else float("nan")
        result[kind] = {
            "tok_s": {name: round(value, 1) for name, value in tok_s.items()},
            "speedup_over_padded": {n: round(tok_s[n] / tok_s["padded"], 3) for n in ("ffn", "packed")},
            "share": round(share, 3),
            "rounds": [{name: round(r[kind][name], 1) for name in names} for r in rounds],
        }
    result["settings"] = {
        "command": "python " + " ".join(sys.argv), "cpu_model": cpu_model(),
        "threads": torch.get_num_threads(), "torch": torch.__version__, "rounds": args.rounds,
        "timed_steps_per_round": args.steps,
        "preset": args.preset, "precision": args.precision, "load_average": os.getloadavg(),
    }  # fmt: skip
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
