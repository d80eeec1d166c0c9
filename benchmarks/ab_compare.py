"""Before/after on one machine: a benchmark run alternately from two source trees.

    python benchmarks/ab_compare.py --before ../old-checkout --rounds 3 \
        --out benchmarks/results/ab_train_throughput.json -- train_throughput.py --steps 4

Each round runs `TREE/benchmarks/SCRIPT ARGS --out TMP.json` (each tree with its own copy of
the script and its own `src/` on PYTHONPATH), first the before tree, then the after tree, so
drifting machine load hits both alike. Every numeric figure of the two JSON outputs is
reported as the median over the rounds, with the ratio after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from aiayn.training.run import cpu_model

REPO = Path(__file__).resolve().parent.parent


def flatten(data: Any, prefix: str = "") -> dict[str, float]:
    """{'a': {'b': 1.5}} -> {'a.b': 1.5}; numbers only (booleans left out)."""
    figures: dict[str, float] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            figures |= flatten(value, f"{prefix}{key}.")
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        figures[prefix.rstrip(".")] = float(data)
    return figures


def run_once(tree: Path, script: str, args: list[str], out_flag: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = dict(os.environ, PYTHONPATH=str(tree / "src"))
        command = [sys.executable, str(tree / "benchmarks" / script), *args, out_flag, str(out)]
        subprocess.run(command, check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL)
        return flatten(json.loads(out.read_text()))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the old code")
    parser.add_argument("--after", type=Path, default=REPO, help="checkout of the new code")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out-flag", default="--out", help="the script's output-file option")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("script", help="file under benchmarks/, then its arguments after --")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    if options.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {options.rounds}")
    args = [a for a in options.args if a != "--"]
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for round_index in range(options.rounds):
        for side, tree in (("before", options.before), ("after", options.after)):
            print(f"round {round_index + 1}/{options.rounds}: {side}", file=sys.stderr, flush=True)
            runs[side].append(run_once(tree.resolve(), options.script, args, options.out_flag))
    figures = {}
    for name in sorted(set(runs["before"][0]) & set(runs["after"][0])):
        before = statistics.median(r[name] for r in runs["before"] if name in r)
        after = statistics.median(r[name] for r in runs["after"] if name in r)
        figures[name] = {"before": before, "after": after, "ratio": after / before if before else None}
    result = {
        "script": options.script,
        "args": args,
        "figures": figures,
        "settings": {"rounds": options.rounds, "cpu_model": cpu_model(), "load_average": os.getloadavg()},
    }
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, figure in figures.items():
        ratio = f"{figure['ratio']:.3f}" if figure["ratio"] is not None else "-"
        print(f"{name:45s} {figure['before']:12.4g} {figure['after']:12.4g} {ratio}")
    return result


if __name__ == "__main__":
    main()
