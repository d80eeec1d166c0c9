"""The built-in encoder-only task: balanced brackets, held-out accuracy and time.

Runs `aiayn classify train` (configs/brackets.yaml: "is this sequence over ()[]{} balanced?",
unbalanced examples being permutations of balanced ones, so bracket counts do not tell) as
one process, timed end to end (start-up, data, training, validation, test), and writes
`benchmarks/results/classify.json`: the accuracy on the 2,000 held-out test sequences
(none of them in the training set), the seconds, the command. Target: >= 98% in < 3 min.

    python benchmarks/classify.py [--set train.max_steps=... ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RUN_DIR = ROOT / "benchmarks" / "runs" / "brackets"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = parser.parse_args()
    sets = [arg for item in args.overrides for arg in ("--set", item)]
    command = [
        sys.executable, "-m", "aiayn", "classify", "train",
        "--out", str(RUN_DIR.relative_to(ROOT)), "--overwrite", *sets,
    ]  # fmt: skip
    # Idle OpenMP threads sleep instead of spinning: on a CPU shared with other jobs, spinning
    # threads fight those jobs for the cores and can make a 2-thread run many times slower.
    env = os.environ | {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    load_before = os.getloadavg()
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, env=env)
    seconds = time.perf_counter() - started
    results = json.loads((RUN_DIR / "results.json").read_text())
    report = {
        "accuracy": results["test_accuracy"],
        "valid_accuracy": results["valid_accuracy"],
        "seconds": seconds,
        "train_minutes": results["train_minutes"],
        "steps": results["steps"],
        "params": results["params"],
        "command": "python benchmarks/classify.py" + "".join(f" --set {s}" for s in args.overrides),
        "train_command": shlex.join(["aiayn", *command[3:]]),
        "machine": {
            "cpu_count": os.cpu_count(),
            "OMP_WAIT_POLICY": env["OMP_WAIT_POLICY"],
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "torch": torch.__version__,
        },
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "classify.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"held-out accuracy {report['accuracy']:.2f}% in {seconds:.1f} s (target >= 98% in < 180 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
