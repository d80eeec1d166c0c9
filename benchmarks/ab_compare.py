"""Before/after on one machine: a benchmark run alternately from two source trees.

    python benchmarks/ab_compare.py --before ../old-checkout --rounds 3 \
        --out benchmarks/results/ab_train_throughput.json -- train_throughput.py --steps 4

Each round runs `TREE/benchmarks/SCRIPT ARGS --out TMP.json` (each tree with its own copy of
the script and its own `src/` on PYTHONPATH; with `--same-script`, the after tree's copy in
both, for a script the before tree lacks), first the before tree, then the after tree, so
drifting machine load hits both alike. Every numeric figure of the two JSON outputs is
reported as the median over the rounds, with the ratio after / before, and its spread: the
lowest and highest value of each side and of the per-round ratio.
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

from aiayn.runtime.cpu import cpu_model

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


def run_once(tree: Path, script: Path, args: list[str], out_flag: str) -> dict[str, float]:
    """Run `script` with `tree`'s src/ on PYTHONPATH, in `tree`; the figures it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = dict(os.environ, PYTHONPATH=str(tree / "src"))
        command = [sys.executable, str(script), *args, out_flag, str(out)]
        subprocess.run(command, check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL)
        return flatten(json.loads(out.read_text()))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the old code")
    parser.add_argument("--after", type=Path, default=REPO, help="checkout of the new code")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out-flag", default="--out", help="the script's output-file option")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--same-script", action="store_true",
                        help="run the after tree's copy of the script in both trees")
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
            home = options.after if options.same_script else tree
            script = home.resolve() / "benchmarks" / options.script
            runs[side].append(run_once(tree.resolve(), script, args, options.out_flag))
    figures = {}
    for name in sorted(set(runs["before"][0]) & set(runs["after"][0])):
        before = statistics.median(r[name] for r in runs["before"] if name in r)
        after = statistics.median(r[name] for r in runs["after"] if name in r)
        pairs = [(b[name], a[name]) for b, a in zip(runs["before"], runs["after"], strict=True)
                 if name in b and name in a]
        figures[name] = {
            "before": before, "after": after, "ratio": after / before if before else None,
            "before_range": [min(b for b, _ in pairs), max(b for b, _ in pairs)],
            "after_range": [min(a for _, a in pairs), max(a for _, a in pairs)],
            "round_ratio_range": [min(a / b for b, a in pairs if b), max(a / b for b, a in pairs if b)]
            if all(b for b, _ in pairs) else None,
        }
    result = {
        "script": options.script,
        "args": args,
        "figures": figures,
        "settings": {"rounds": options.rounds, "same_script": options.same_script, "cpu_model": cpu_model(),
                     "load_average": os.getloadavg()},
    }
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, figure in figures.items():
        ratio = f"{figure['ratio']:.3f}" if figure["ratio"] is not None else "-"
        spread = figure["round_ratio_range"]
        spread_text = f"  (rounds {spread[0]:.3f}-{spread[1]:.3f})" if spread else ""
        print(f"{name:45s} {figure['before']:12.4g} {figure['after']:12.4g} {ratio}{spread_text}")
    return result


if __name__ == "__main__":
    main()
