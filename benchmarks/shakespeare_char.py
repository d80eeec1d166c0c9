"""Character-level tinyshakespeare against nanoGPT's CPU run, same model size, same tokens.

nanoGPT's `config/train_shakespeare_char.py` on a CPU (its README: `--device=cpu
--compile=False --eval_iters=20 --log_interval=1 --block_size=64 --batch_size=12
--n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0`)
reaches a validation loss of about 1.88 after 12 x 64 x 2000 = 1,536,000 training tokens, in
86 s on this machine. This script runs `aiayn lm train configs/shakespeare_char.yaml`
(0.8M parameters: 4 layers, 4 heads, d_model 128, d_ff 512, block 64; the same 1,536,000
training tokens), timed end to end as one process (start-up, tokenizer, data, training,
validation over the whole held-out 10%, saving), then writes

- `benchmarks/results/shakespeare_char.json`: val_loss, wall and training time, tokens/s,
  parameters, the command, a generated sample, the machine's load when it ran;
- `benchmarks/results/shakespeare_char_loss.png`: training and validation loss curves.

    python benchmarks/shakespeare_char.py [--set train.precision=fp32 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RUN_DIR = ROOT / "benchmarks" / "runs" / "shakespeare_char"
NANOGPT = {"val_loss": 1.88, "seconds": 86, "tokens": 12 * 64 * 2000, "tokens_per_s": 19_700}


def plot(metrics: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in metrics if r["split"] == "train"]
    val = [r for r in metrics if r["split"] == "val"]
    figure, axes = plt.subplots(figsize=(7, 4.2))
    axes.plot([r["step"] for r in train], [r["loss"] for r in train], label="training loss (batch)", lw=1)
    axes.plot(
        [r["step"] for r in val], [r["loss"] for r in val], "o-", label="validation loss (held-out 10%)"
    )
    axes.axhline(NANOGPT["val_loss"], color="gray", ls="--", lw=1, label="nanoGPT CPU run (1.88)")
    axes.set_xlabel("step")
    axes.set_ylabel("loss (nats per character)")
    axes.set_ylim(1.3, 3.5)
    axes.set_title("aiayn lm train configs/shakespeare_char.yaml")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = parser.parse_args()
    sets = [arg for item in args.overrides for arg in ("--set", item)]
    command = [
        sys.executable, "-m", "aiayn", "lm", "train", "configs/shakespeare_char.yaml",
        "--out", str(RUN_DIR.relative_to(ROOT)), "--overwrite", *sets,
    ]  # fmt: skip
    # Idle OpenMP threads sleep instead of spinning: on a CPU shared with other jobs, spinning
    # threads fight those jobs for the cores and can make a 2-thread run many times slower.
    env = os.environ | {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    load_before = os.getloadavg()
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, env=env)
    wall = time.perf_counter() - started
    load_after = os.getloadavg()

    results = json.loads((RUN_DIR / "results.json").read_text())
    metrics = [json.loads(line) for line in (RUN_DIR / "metrics.jsonl").read_text().splitlines()]
    sample = subprocess.run(
        [sys.executable, "-m", "aiayn", "lm", "generate", "--model", str(RUN_DIR), "--text", "ROMEO:",
         "--max-new-tokens", "400", "--temperature", "0.8", "--seed", "1"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(metrics, RESULTS / "shakespeare_char_loss.png")
    report = {
        "val_loss": results["val_loss"],
        "wall_seconds": wall,
        "train_minutes": results["train_minutes"],
        "tokens_per_s": results["tokens_per_s"],
        "training_tokens": results["target_tokens"],
        "steps": results["steps"],
        "params": results["params"],
        "vocab_size": results["vocab_size"],
        "command": "python benchmarks/shakespeare_char.py" + "".join(f" --set {s}" for s in args.overrides),
        "train_command": shlex.join(["aiayn", *command[3:]]),
        "sample": sample,
        "nanogpt_reference": NANOGPT,
        "machine": {
            "cpu_count": os.cpu_count(),
            "OMP_WAIT_POLICY": env["OMP_WAIT_POLICY"],
            "load_average_before": load_before,
            "load_average_after": load_after,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
    }
    (RESULTS / "shakespeare_char.json").write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"val_loss {report['val_loss']:.4f} (nanoGPT 1.88); wall {wall:.1f} s (nanoGPT 86 s); "
        f"{report['tokens_per_s']:,.0f} training tokens/s; {report['params']:,} parameters"
    )
    print(sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
