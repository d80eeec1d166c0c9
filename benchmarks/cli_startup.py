"""Start-up time of the command line: `aiayn --help` of two source trees, and `import torch`.

    python benchmarks/cli_startup.py --before /work/base/src --after src --rounds 5

Each round runs, one after the other, `python -m aiayn --help` with PYTHONPATH set to each tree
and `python -c "import torch"`, so that the figures of one round share the machine's load; the
medians of the rounds are compared. Written to `--json` (default
benchmarks/results/cli_startup.json) with `cpu_model` and the load averages before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from aiayn.core.files import atomic_write_text
from aiayn.training.run import cpu_model


def wall_seconds(argv: list[str], pythonpath: str | None) -> float:
    """Wall time of one run of `argv` (which must succeed) with PYTHONPATH=`pythonpath`."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(Path(pythonpath).resolve())
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the src directory of the tree before")
    parser.add_argument("--after", required=True, help="the src directory of the tree after")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/cli_startup.json"))
    options = parser.parse_args()
    commands = {
        "aiayn --help (before)": ([sys.executable, "-m", "aiayn", "--help"], options.before),
        "aiayn --help (after)": ([sys.executable, "-m", "aiayn", "--help"], options.after),
        "import torch": ([sys.executable, "-c", "import torch"], None),
    }
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(options.rounds):
        for name, (argv, pythonpath) in commands.items():
            times[name].append(wall_seconds(argv, pythonpath))
    medians = {name: statistics.median(values) for name, values in times.items()}
    result = {
        "settings": {"rounds": options.rounds, "before": options.before, "after": options.after,
                     "cpu_model": cpu_model(), "load_average_before": load_before,
                     "load_average_after": os.getloadavg()},
        "seconds": times,
        "median_seconds": medians,
    }
    options.json.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(options.json, json.dumps(result, indent=2) + "\n")
    for name, median in medians.items():
        print(f"{name:24} median {median:.3f} s  ({', '.join(f'{t:.2f}' for t in times[name])})")
    print(f"cpu {result['settings']['cpu_model']}; load average {load_before} -> {os.getloadavg()}")


if __name__ == "__main__":
    main()
