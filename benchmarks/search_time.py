"""Where a translation's time goes: the decoding step, the encoder, and the search around them.

Each engine (eager, compiled, int8, int8 compiled) translates the same test sentences in its
own process, once to warm up (a compiled step is built or loaded then) and once timed; the
runner's `encode` and `step` are wrapped with a clock, and the rest of the wall time is the
search's own work (top-k, finished hypotheses, the cache's reordering, Python):

    taskset -c 0 python benchmarks/search_time.py --model RUN --source test.de --sentences 512 --rounds 2

`--trees` runs the same engines from other source trees (`PYTHONPATH`), alternating with this
one, to compare a change with what it changes.
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

ENGINES = ("eager", "compiled", "int8", "int8_compiled")


def run_worker(args: argparse.Namespace) -> None:
    """One timed translation in this process; prints one JSON line."""
    import torch

    from aiayn import load

    torch.set_num_threads(args.threads)
    sources = [line.strip() for line in args.source.open(encoding="utf-8")][: args.sentences]
    batches = [sources[i : i + args.batch_sentences] for i in range(0, len(sources), args.batch_sentences)]
    engine = args.worker
    translator = load(args.model, "cpu", task="translation", quantize="int8" if "int8" in engine else None,
                      compile=engine.endswith("compiled"))
    runner, spent = translator.runner, {"step": 0.0, "encode": 0.0, "steps": 0}
    step, encode = runner.step, runner.encode

    def timed_step(*arguments, **options):
        started = time.perf_counter()
        logits = step(*arguments, **options)
        spent["step"] += time.perf_counter() - started
        spent["steps"] += 1
        return logits

    def timed_encode(*arguments, **options):
        started = time.perf_counter()
        memory = encode(*arguments, **options)
        spent["encode"] += time.perf_counter() - started
        return memory

    runner.step, runner.encode = timed_step, timed_encode
    for batch in batches:
        translator.translate(batch, beam=args.beam, batch_tokens=10**9)
    spent.update(step=0.0, encode=0.0, steps=0)
    started = time.perf_counter()
    for batch in batches:
        translator.translate(batch, beam=args.beam, batch_tokens=10**9)
    wall = time.perf_counter() - started
    search = wall - spent["step"] - spent["encode"]
    print(json.dumps({
        "wall_s": wall, "step_s": spent["step"], "encode_s": spent["encode"], "search_s": search,
        "steps": spent["steps"], "step_ms": 1e3 * spent["step"] / spent["steps"],
        "search_ms_per_step": 1e3 * search / spent["steps"],
    }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a translation model directory")
    parser.add_argument("--source", type=Path, required=True, help="source sentences, one a line")
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--batch-sentences", type=int, default=64)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"some of {', '.join(ENGINES)}")
    parser.add_argument("--rounds", type=int, default=2, help="alternating timed runs of each engine")
    parser.add_argument("--trees", default="", help="other source trees, comma-separated")
    parser.add_argument("--json", type=Path, default=None, help="write every run and the medians here")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return
    here = str(Path(__file__).resolve().parents[1])
    trees = [here, *[str(Path(tree).resolve()) for tree in args.trees.split(",") if tree]]
    runs: list[dict] = []
    for round_ in range(args.rounds):
        for engine in args.engines.split(","):
            for tree in trees:
                command = [sys.executable, __file__, "--worker", engine, *forwarded(args)]
                environment = dict(os.environ, PYTHONPATH=str(Path(tree) / "src"))
                found = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
                if found.returncode != 0:
                    sys.exit(f"{engine} from {tree} failed:\n{found.stderr[-2000:]}")
                result = {"tree": tree, "engine": engine, "round": round_ + 1,
                          **json.loads(found.stdout.strip().splitlines()[-1])}
                runs.append(result)
                print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}))
    medians = {}
    for tree in trees:
        for engine in args.engines.split(","):
            mine = [run for run in runs if run["tree"] == tree and run["engine"] == engine]
            medians[f"{tree} {engine}"] = {key: statistics.median(run[key] for run in mine)
                                           for key in ("wall_s", "step_ms", "search_ms_per_step", "encode_s")}
    print(json.dumps(medians, indent=1))
    if args.json:
        from aiayn.runtime.cpu import cpu_info

        record = {"cpu_model": cpu_info().model, "threads": args.threads, "beam": args.beam,
                  "sentences": args.sentences, "batch_sentences": args.batch_sentences,
                  "statistic": "median", "runs": runs, "medians": medians}
        atomic_write_text(args.json, json.dumps(record, indent=2) + "\n")


def forwarded(args: argparse.Namespace) -> list[str]:
    """The worker's arguments."""
    return ["--model", str(args.model), "--source", str(args.source), "--sentences", str(args.sentences),
            "--batch-sentences", str(args.batch_sentences), "--beam", str(args.beam),
            "--threads", str(args.threads)]


if __name__ == "__main__":
    main()
