"""The kept compiled decoding step: what building it costs once, and what a later process pays.

    taskset -c 1 python benchmarks/kept_step.py --model runs/dates --threads 1

With a fresh user cache directory (a temporary `$AIAYN_CACHE_DIR`), one after the other:

1. `aiayn translate --text T --no-compile`, the eager process: wall seconds from start to its output;
2. `aiayn translate --text T --compile`, the first process, which builds the variant it needs
   (`beam-one`) and keeps it: wall seconds, the build's own seconds (its log line);
3. `aiayn translate --text T` (`--compile auto`), a later process that finds the kept step: wall
   seconds to its output, load included (the target: within 5 s of starting), and its load
   seconds; the kept files' sizes (`aiayn cache list`);
4. in one process, `--sentences` inputs decoded (beam 4) by the kept step (loaded from the cache,
   the rest of the variants built first), by `CompiledStep` compiled in the process (warmed up
   on the same inputs first), and eagerly: sentences per second, alternating `--rounds` times.

Written to `--json` (default benchmarks/results/kept_step.json) with `cpu_model`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiayn.core.files import atomic_write_text
from aiayn.training.run import cpu_model


def timed_translate(model: str, text: str, options: list[str], env: dict[str, str]) -> tuple[float, str]:
    """(wall seconds, stderr) of one `aiayn translate --text` process, which must succeed."""
    argv = [sys.executable, "-m", "aiayn", "translate", "--model", model, "--text", text, *options]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stderr


def seconds_in(log: str, pattern: str) -> float | None:
    """The seconds a log line matching `pattern` (with one `([0-9.]+)` group) reports."""
    found = re.search(pattern, log)
    return float(found.group(1)) if found else None


def throughput(model_dir: str, sentences: list[str], rounds: int, threads: int) -> dict[str, list[float]]:
    """Sentences per second of beam 4 over `sentences`: kept step, in-process compiled, eager."""
    import torch

    import aiayn
    from aiayn.runtime.compiled import CompiledStep

    torch.set_num_threads(threads)
    kept = aiayn.load(model_dir, "cpu", compile=True)  # loads what is kept, builds the rest
    kept.translate(sentences, beam=4)
    compiled = aiayn.load(model_dir, "cpu")
    compiled.runner = CompiledStep(compiled.model)
    compiled.translate(sentences, beam=4)  # compiles its graphs
    eager = aiayn.load(model_dir, "cpu", compile=False)
    rates: dict[str, list[float]] = {"kept": [], "compiled in process": [], "eager": []}
    for _ in range(rounds):
        for name, translator in (("kept", kept), ("compiled in process", compiled), ("eager", eager)):
            start = time.perf_counter()
            translator.translate(sentences, beam=4)
            rates[name].append(len(sentences) / (time.perf_counter() - start))
    rates["kept steps run eagerly"] = [kept.runner.calls["eager"] / max(sum(kept.runner.calls.values()), 1)]
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="an aiayn translation model directory")
    parser.add_argument("--text", default="Saturday, 21 November 2026", help="the one sentence of 1-3")
    parser.add_argument("--sentences", type=int, default=400, help="inputs of part 4 (0: skip it)")
    parser.add_argument("--input", help="their file (default: the dates task's test inputs)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/kept_step.json"))
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aiayn-kept-bench-") as cache:
        env = dict(os.environ, AIAYN_CACHE_DIR=cache, OMP_NUM_THREADS=str(options.threads))
        os.environ["AIAYN_CACHE_DIR"] = cache
        eager_s, _ = timed_translate(options.model, options.text, ["--no-compile"], env)
        first_s, first_log = timed_translate(options.model, options.text, ["--compile"], env)
        later_s, later_log = timed_translate(options.model, options.text, [], env)
        listing = subprocess.run([sys.executable, "-m", "aiayn", "cache", "list"], env=env,
                                 capture_output=True, text=True, check=True).stdout
        if options.input:
            sentences = Path(options.input).read_text(encoding="utf-8").splitlines()[: options.sentences]
        elif options.sentences:
            from aiayn.data.synthetic import make_task

            sentences = [src for src, _ in make_task("dates", 7, 0, 0, options.sentences)["test"]]
        else:
            sentences = []
        rates = throughput(options.model, sentences, options.rounds, options.threads) if sentences else {}
    result = {
        "settings": {"model": options.model, "text": options.text, "threads": options.threads,
                     "sentences": len(sentences), "rounds": options.rounds, "cpu_model": cpu_model(),
                     "load_average": os.getloadavg()},
        "process_seconds": {"eager": eager_s, "first, building": first_s, "later, kept step": later_s},
        "build_seconds": seconds_in(first_log, r"built in ([0-9.]+) s"),
        "load_seconds": seconds_in(later_log, r"loaded in ([0-9.]+) s"),
        "cache_list": listing,
        "sentences_per_second": rates,
    }
    atomic_write_text(options.json, json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "cache_list"}, indent=2))
    print(listing)


if __name__ == "__main__":
    main()
