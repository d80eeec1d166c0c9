"""Same outputs from two source trees: a model's translations with each runtime, line by line.

    # once per tree (its src/ first on PYTHONPATH), then compare:
    PYTHONPATH=../before/src python benchmarks/compare_outputs.py translate --model DIR --out before.json
    PYTHONPATH=src python benchmarks/compare_outputs.py translate --model DIR --out after.json
    PYTHONPATH=src python benchmarks/compare_outputs.py compare before.json after.json --model DIR \
        --out benchmarks/results/compare_outputs.json

`translate` decodes the source file (default: Multi30k test_2016_flickr, German) with beam 4 and
greedy search, on each runtime (`eager`: `aiayn.load(DIR)`, `int8`: `quantize="int8"`,
`compiled`: `compile=True`), one intra-op thread, through the public `aiayn.load` API that both
trees share. `compare` counts identical lines per (runtime, search) and, for each line that
differs, how close the search was to a tie in the after tree: beam 4, the gap between the
scores of its two best hypotheses (`translate_nbest`); greedy, the smallest gap between the two
most likely next tokens along the after tree's output. A line that differs where that gap is
within `--tie` (1e-4) is counted as a near tie.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

SEARCHES = {"beam4": 4, "greedy": 1}
RUNTIMES = {"eager": {}, "int8": {"quantize": "int8"}, "compiled": {"compile": True}}


def default_source() -> Path:
    from aiayn.data.paths import data_root

    return data_root() / "multi30k" / "test_2016_flickr.de.gz"


def translate(args: argparse.Namespace) -> None:
    from aiayn import load
    from aiayn.data.corpus import read_lines

    torch.set_num_threads(1)
    sources = read_lines(args.source or default_source())[: args.limit]
    import aiayn

    result: dict = {"model": str(args.model), "aiayn": aiayn.__file__, "outputs": {}, "seconds": {}}
    for runtime in args.runtimes.split(","):
        translator = load(args.model, "cpu", task="translation", **RUNTIMES[runtime])
        for search, beam in SEARCHES.items():
            start = time.perf_counter()
            key = f"{runtime}/{search}"
            result["outputs"][key] = translator.translate(sources, beam=beam)
            result["seconds"][key] = round(time.perf_counter() - start, 1)
            print(f"{key}: {result['seconds'][key]} s", file=sys.stderr, flush=True)
    Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")


def greedy_gap(translator, source: str, output: str) -> float:
    """The smallest log-probability gap between the two most likely tokens along `output`."""
    from aiayn.inference.torch_translator import pad_batch

    config = translator.config
    source_ids = [*translator.tokenizers.source.encode_batch([source])[0], config.eos_id]
    target_ids = [config.bos_id, *translator.tokenizers.target.encode_batch([output])[0], config.eos_id]
    src = pad_batch([source_ids], config.pad_id, torch.device("cpu"))
    tgt = torch.tensor([target_ids])
    with torch.no_grad():
        log_probs = translator.model(src, tgt[:, :-1]).float().log_softmax(-1)[0]  # (T, V)
    top = log_probs.topk(2, dim=-1).values  # (T, 2)
    return float((top[:, 0] - top[:, 1]).min())


def compare(args: argparse.Namespace) -> None:
    from aiayn import load
    from aiayn.data.corpus import read_lines

    torch.set_num_threads(1)
    before, after = (json.loads(Path(p).read_text()) for p in (args.before, args.after))
    sources = read_lines(args.source or default_source())[: args.limit]
    from aiayn.runtime.cpu import cpu_model

    report: dict = {"before": before["aiayn"], "after": after["aiayn"], "model": str(args.model),
                    "tie": args.tie, "cpu_model": cpu_model(), "results": {}}
    translators: dict = {}
    for key in sorted(set(before["outputs"]) & set(after["outputs"])):
        runtime, search = key.split("/")
        old, new = before["outputs"][key], after["outputs"][key]
        differing = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
        gaps = []
        if differing:
            translator = translators.get(runtime) or translators.setdefault(
                runtime, load(args.model, "cpu", task="translation", **RUNTIMES[runtime]))
            for i in differing:
                if SEARCHES[search] == 1:
                    gaps.append(greedy_gap(translator, sources[i], new[i]))
                else:
                    best = translator.translate_nbest([sources[i]], nbest=2, beam=SEARCHES[search])[0]
                    gaps.append(abs(best[0].score - best[1].score) if len(best) > 1 else float("inf"))
        report["results"][key] = {
            "lines": len(old), "identical": len(old) - len(differing),
            "differing": [{"line": i + 1, "gap": gap, "before": old[i], "after": new[i]}
                          for i, gap in zip(differing, gaps, strict=True)],
            "differing_near_tie": sum(gap <= args.tie for gap in gaps),
        }
        entry = report["results"][key]
        print(f"{key:18s} identical {entry['identical']}/{entry['lines']}, differing {len(differing)} "
              f"(near tie {entry['differing_near_tie']})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("translate", help="translate with every runtime and search")
    check = commands.add_parser("compare", help="count identical lines of two `translate` outputs")
    check.add_argument("before", type=Path)
    check.add_argument("after", type=Path)
    check.add_argument("--tie", type=float, default=1e-4, help="score gap counted as a near tie")
    run.add_argument("--runtimes", default=",".join(RUNTIMES), help=f"comma-separated: {list(RUNTIMES)}")
    for sub in (run, check):
        sub.add_argument("--model", type=Path, required=True, help="the model directory")
        sub.add_argument("--source", type=Path, default=None, help="default: Multi30k test_2016_flickr.de.gz")
        sub.add_argument("--limit", type=int, default=None, help="the first N lines only")
        sub.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    translate(args) if args.command == "translate" else compare(args)


if __name__ == "__main__":
    main()
