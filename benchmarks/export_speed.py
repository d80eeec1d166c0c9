"""aiayn's own decoder vs the same weights exported to CTranslate2, on Multi30k test_2016_flickr.

    python benchmarks/export_speed.py --model benchmarks/runs/multi30k_de_en --threads 1
    # writes benchmarks/results/export.json

The model (a Multi30k de->en model directory from `benchmarks/multi30k.sh`) is exported to
CTranslate2 twice, float32 and int8 (`aiayn export ctranslate2 [--quantization int8]`). Then
the 1,000 test sentences are translated end to end (tokenize, search, detokenize) by aiayn
(PyTorch) and by CTranslate2 float32 and int8, each with beam 4 and beam 5, all with the same
number of intra-op threads. The runs alternate (engine by engine, beam by beam, `--repeats`
times) so that drifting machine load hits all alike; sentences/s is the median. Each engine
decodes with aiayn's settings (length limit source + 50, `<pad>`/`<bos>` never generated,
GNMT length penalty with `--alpha`; see `aiayn.inference.ctranslate2`) and is scored with sacreBLEU.

The machine is shared, so besides wall-clock sentences/s (the figures asked for) the process CPU
time of each run is recorded too (`settings.cpu_seconds`): on a busy machine it says more about
the engines than the wall clock does. Two measurements split the gap between the engines:
forced decoding of the 1,000 references (`score`, the same matrix products in large batches, no
search: the kernels' speed), and `--profile`, where aiayn's beam search spends its time
(torch.profiler, one beam-4 pass over the test set).
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from aiayn.data.corpus import read_lines
from aiayn.data.paths import data_root
from aiayn.evaluation.bleu import corpus_bleu
from aiayn.export import export_ctranslate2
from aiayn.inference import CTranslate2Translator, TorchTranslator, load

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "export.json"
BEAMS = (4, 5)


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (else what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def profile_aiayn(translator: TorchTranslator, sources: list[str], alpha: float) -> dict:
    """Self CPU time of aiayn's beam-4 search by operator group (shares of the total)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        translator.translate(sources, beam=4, alpha=alpha)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    groups = {
        "matmul (linear, bmm, sdpa)": ("aten::addmm", "aten::mm", "aten::bmm", "aten::linear",
                                       "aten::_scaled_dot_product", "aten::baddbmm", "aten::matmul"),
        "softmax / log_softmax": ("aten::_softmax", "aten::_log_softmax", "aten::softmax",
                                  "aten::log_softmax"),
        "layer_norm": ("aten::native_layer_norm", "aten::layer_norm"),
        "cache reorder and copies (index_select, cat, copy, gather)": (
            "aten::index_select", "aten::cat", "aten::copy_", "aten::gather", "aten::index", "aten::clone",
            "aten::contiguous", "aten::_to_copy"),
        "beam bookkeeping (topk, where, arithmetic)": ("aten::topk", "aten::where", "aten::add", "aten::div",
                                                       "aten::mul", "aten::remainder", "aten::floor_divide",
                                                       "aten::full", "aten::fill_", "aten::eq", "aten::any"),
    }
    shares = {name: 0.0 for name in groups} | {"other": 0.0}
    for event in events:
        group = next((g for g, names in groups.items() if event.key.startswith(names)), "other")
        shares[group] += event.self_cpu_time_total
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:12]
    return {
        "share_of_self_cpu_time": {k: round(v / total, 3) for k, v in shares.items()},
        "top_ops": [{"op": e.key, "calls": e.count, "self_cpu_s": round(e.self_cpu_time_total / 1e6, 3)}
                    for e in top],
        "total_self_cpu_s": round(total / 1e6, 2),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / "benchmarks" / "runs" / "multi30k_de_en",
                        help="Multi30k de->en model directory (from benchmarks/multi30k.sh)")
    parser.add_argument("--run", default=None, help="how the model was trained, for the record")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of every engine")
    parser.add_argument("--repeats", type=int, default=3, help="alternating timed runs per setting")
    parser.add_argument("--alpha", type=float, default=0.6, help="length penalty (aiayn's GNMT formula)")
    parser.add_argument("--limit", type=int, default=None, help="first N test sentences only (quick check)")
    parser.add_argument("--work", type=Path, default=None, help="where the exports go (default: a temp dir)")
    parser.add_argument("--profile", action="store_true", help="also profile aiayn's beam 4")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    multi30k = data_root() / "multi30k"
    src_file, ref_file = multi30k / "test_2016_flickr.de.gz", multi30k / "test_2016_flickr.en.gz"
    if not src_file.is_file() or not args.model.is_dir():
        sys.exit(f"need {src_file} and a model directory --model (now {args.model})")
    sources, references = read_lines(src_file)[: args.limit], read_lines(ref_file)[: args.limit]

    torch.set_num_threads(args.threads)
    work = args.work or Path(tempfile.mkdtemp(prefix="export_speed_"))
    engines = {("aiayn", "float32"): load(args.model, "cpu", task="translation")}
    for compute_type, quantization in (("float32", None), ("int8", "int8")):
        out = export_ctranslate2(args.model, work / f"ct2_{compute_type}", quantization, overwrite=True)
        engines["ctranslate2", compute_type] = CTranslate2Translator(
            out, "cpu", compute_type=compute_type, threads=args.threads
        )

    timings: dict[tuple[str, str, int], list[float]] = {
        (*key, beam): [] for key in engines for beam in BEAMS
    }
    cpu_times: dict[tuple[str, str, int], list[float]] = {key: [] for key in timings}
    outputs: dict[tuple[str, str, int], list[str]] = {}
    for engine in engines.values():  # warm-up: first calls allocate and fill caches
        engine.translate(sources[:20], beam=4, alpha=args.alpha)
    for repeat in range(args.repeats):
        for beam in BEAMS:
            for key, engine in engines.items():
                start, cpu_start = time.perf_counter(), time.process_time()
                hypotheses = engine.translate(sources, beam=beam, alpha=args.alpha)
                timings[(*key, beam)].append(time.perf_counter() - start)
                cpu_times[(*key, beam)].append(time.process_time() - cpu_start)
                outputs[(*key, beam)] = hypotheses
                print(f"repeat {repeat + 1}/{args.repeats} {key[0]} {key[1]} beam {beam}: "
                      f"{len(sources) / timings[(*key, beam)][-1]:.1f} sentences/s", flush=True)

    results: dict = {}
    for (engine_name, compute_type, beam), seconds in timings.items():
        entry = results.setdefault(engine_name, {}).setdefault(compute_type, {})
        hypotheses = outputs[engine_name, compute_type, beam]
        entry[f"beam{beam}_sent_s"] = round(len(sources) / statistics.median(seconds), 2)
        entry[f"beam{beam}_bleu"] = round(corpus_bleu(hypotheses, references).score, 2)
        if engine_name != "aiayn":
            ours = outputs["aiayn", "float32", beam]
            same = sum(a == b for a, b in zip(hypotheses, ours, strict=True))
            entry[f"beam{beam}_same_output_as_aiayn"] = round(same / len(sources), 4)
    forced: dict[str, list[float]] = {"aiayn": [], "ctranslate2_float32": []}
    for _ in range(args.repeats):  # forced decoding: the same matrix products, no search
        for name, engine in (("aiayn", engines["aiayn", "float32"]),
                             ("ctranslate2_float32", engines["ctranslate2", "float32"])):
            cpu_start = time.process_time()
            engine.score(sources, references)
            forced[name].append(time.process_time() - cpu_start)
    ratio = {
        f"beam{beam}": round(results["aiayn"]["float32"][f"beam{beam}_sent_s"]
                             / results["ctranslate2"]["float32"][f"beam{beam}_sent_s"], 3)
        for beam in BEAMS
    }
    import ctranslate2

    results["settings"] = {
        "threads": args.threads,
        "torch": torch.__version__,
        "ctranslate2": ctranslate2.__version__,
        "cpu_model": cpu_model(),
        "sentences": len(sources),
        "alpha": args.alpha,
        "max_len_extra": 50,
        "repeats": args.repeats,
        "statistic": "median sentences/s over alternating repeats",
        "model": str(args.model.resolve().relative_to(REPO) if args.model.resolve().is_relative_to(REPO)
                     else args.model),
        "model_run": args.run,
        "aiayn_speed_relative_to_ctranslate2_float32": ratio,
        "cpu_seconds": {
            f"{engine}_{compute_type}_beam{beam}": round(statistics.median(seconds), 2)
            for (engine, compute_type, beam), seconds in cpu_times.items()
        },
        "forced_decoding_cpu_seconds": {name: round(statistics.median(t), 2) for name, t in forced.items()},
        "aiayn_cpu_speed_relative_to_ctranslate2_float32": {
            f"beam{beam}": round(statistics.median(cpu_times["ctranslate2", "float32", beam])
                                 / statistics.median(cpu_times["aiayn", "float32", beam]), 3)
            for beam in BEAMS
        },
        "command": "python benchmarks/export_speed.py "
        + shlex.join(argv if argv is not None else sys.argv[1:]),
    }
    if args.profile:
        results["settings"]["aiayn_beam4_profile"] = profile_aiayn(
            engines["aiayn", "float32"], sources, args.alpha
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
