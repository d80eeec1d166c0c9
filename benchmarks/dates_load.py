"""The demo does not depend on the machine's load: `aiayn train` (the built-in dates task, no
config) three times, with the same seed:

- `idle`: as it is (other jobs on a shared machine still run: the load average is recorded);
- `busy`: pinned to core 1 beside `taskset -c 1 yes > /dev/null` (a busy neighbour on its core);
- `pinned`: pinned to core 1 alone (`taskset -c 1 aiayn train`).

Target (issue 54): the same step count in all three (the run is bounded by its 1,500 steps, not
by the clock guard) and held-out exact match >= 99.5% in each.

    python benchmarks/dates_load.py       # writes benchmarks/results/dates_load.json
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiayn.runtime.cpu import cpu_model

RESULTS = Path(__file__).resolve().parent / "results" / "dates_load.json"
PIN = ["taskset", "-c", "1"]
CONDITIONS = {"idle": (False, False), "busy": (True, True), "pinned": (True, False)}
"""condition -> (pin `aiayn train` to core 1, run `yes` on core 1 beside it)."""


def one_run(name: str, pinned: bool, neighbour: bool, root: Path) -> dict:
    """`aiayn train --out ROOT/NAME` under the condition; its figures."""
    run_dir = root / name
    command = [*PIN] * pinned + [sys.executable, "-m", "aiayn", "train", "--out", str(run_dir)]
    busy = subprocess.Popen([*PIN, "yes"], stdout=subprocess.DEVNULL) if neighbour else None
    load_at_start = os.getloadavg()[0]
    started = time.perf_counter()
    try:
        finished = subprocess.run(command, capture_output=True, text=True, check=True)
    finally:
        if busy is not None:
            busy.terminate()
            busy.wait()
    seconds = time.perf_counter() - started
    results = json.loads((run_dir / "results.json").read_text())
    stopped = re.search(r"training stopped: (.*)", finished.stderr)
    return {
        "command": " ".join(["taskset -c 1"] * pinned + ["aiayn train --out", str(run_dir.name)]),
        "neighbour": "taskset -c 1 yes > /dev/null" if neighbour else None,
        "steps": results["steps"],
        "exact_match": results["test"]["exact_match"],
        "stopped": stopped.group(1) if stopped else None,
        "train_minutes": round(results["train_minutes"], 2),
        "seconds": round(seconds, 1),
        "load_average_at_start": round(load_at_start, 2),
        "load_average_at_end": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    root = Path(tempfile.mkdtemp())
    figures: dict = {"runs": {}}
    for name, (pinned, neighbour) in CONDITIONS.items():
        figures["runs"][name] = one_run(name, pinned, neighbour, root)
        print(name, json.dumps(figures["runs"][name]), flush=True)
    runs = figures["runs"].values()
    figures["same_steps"] = len({run["steps"] for run in runs}) == 1
    figures["same_exact_match"] = len({run["exact_match"] for run in runs}) == 1
    figures["all_at_least_99_5"] = all(run["exact_match"] >= 99.5 for run in runs)
    figures["cpu_model"] = cpu_model()
    figures["cores"] = os.cpu_count()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps({k: v for k, v in figures.items() if k != "runs"}, indent=2))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
