"""The README's main job, timed: `aiayn train` (the built-in dates task) end to end.

Target (issue: training): >= 99% held-out exact match within 3 minutes on a 2-core CPU.

    python benchmarks/dates.py            # writes benchmarks/results/dates.json
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "dates.json"


def main() -> None:
    run_dir = Path(tempfile.mkdtemp()) / "dates"
    command = [
        sys.executable,
        "-m",
        "aiayn",
        "train",
        "--out",
        str(run_dir),
        "--set",
        "train.progress_bar=false",
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True)
    seconds = time.perf_counter() - started
    results = json.loads((run_dir / "results.json").read_text())
    figures = {
        "exact_match": results["test"]["exact_match"],
        "seconds": round(seconds, 1),
        "train_minutes": round(results["train_minutes"], 2),
        "steps": results["steps"],
        "bleu": results["test"]["bleu"],
        "test_sentences": results["test"]["sentences"],
        "tokens_per_s": round(results["tokens_per_s"], 1),
        "params": results["params"],
        "command": "aiayn train",
        "examples": results["examples"],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps({k: v for k, v in figures.items() if k != "examples"}, indent=2))
    shutil.rmtree(run_dir.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
