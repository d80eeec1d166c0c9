"""aiayn's own decoder vs the same weights exported to CTranslate2, on a test set (Multi30k default).

    python benchmarks/export_speed.py --model benchmarks/runs/multi30k_de_en --threads 1 --cores 0
    # writes benchmarks/results/export.json

The model (a Multi30k de->en model directory from `benchmarks/multi30k.sh`) is exported to
CTranslate2 twice, float32 and int8 (`aiayn export ctranslate2 [--quantization int8]`). The
comparison is made fair in the ways a shared machine and two OpenMP runtimes need:

- every timed run is its own process (`--worker`, started by the harness), so that no two
  OpenMP runtimes share a process and steal each other's threads; each is pinned with
  `taskset` to the same core(s) (`--cores`) with the same number of intra-op threads;
- both engines get the same batches in the same order: the test sentences grouped by source
  length (CTranslate2's wrapper needs one length per call for aiayn's per-sentence limit), at
  most `--batch-sentences` a batch, longest first, each translated with one `translate` call
  that the engine does not split again;
- the runs alternate (engine by engine, setting by setting, `--repeats` times, 5 by default) and
  the medians are reported: wall time, user and system CPU time, minor page faults of the
  timed part;
- the work is counted: aiayn's decoder rows x steps per sentence (`row_steps_per_sentence`);
  CTranslate2 exposes no such count, so its figure is inferred from its own per-row-step time in
- the equal-work mode (`equal_work`): every sentence decodes exactly `--length` steps in both
  engines (CTranslate2 `min_decoding_length = max_decoding_length = L`; aiayn with `<eos>`
  never ending a hypothesis and the limit L), so rows x steps are the same by construction
  and the time ratio is the per-step speed ratio, search rules aside;
- the CPU's model, family and flags, and the backend CTranslate2 chose (`CT2_VERBOSE=1`'s log)
  are recorded with the figures.

aiayn runs eager and compiled (`aiayn.load(..., compile=True)`: `aiayn_*_compiled`); a compiled
worker warms up on every batch once, so that its graphs are compiled before the timed run, and
reports that time (`warmup_s`, load and compilation included).

Each engine decodes with aiayn's settings (length limit source + 50, `<pad>`/`<bos>` never
generated, GNMT length penalty with `--alpha`; see `aiayn.inference.ctranslate2`) and is scored
with sacreBLEU on the outputs of its last run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiayn.core.files import atomic_write_text

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "export.json"
ENGINES = ("aiayn_float32", "aiayn_float32_compiled", "ctranslate2_float32",
           "aiayn_int8", "aiayn_int8_compiled", "ctranslate2_int8")
CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8", "f16c")


def cpu_info() -> dict:
    """Model name, vendor, family/model numbers and the SIMD flags that pick GEMM kernels."""
    from aiayn.runtime.cpu import cpu_info as read_cpu

    info = read_cpu()
    return {
        "model": info.model,
        "vendor": info.vendor,
        "family": info.family,
        "model_number": info.model_number,
        "flags": [flag for flag in CPU_FLAGS if flag in info.flags],
        "logical_cpus": os.cpu_count(),
    }


# ---------------------------------------------------------------------------- worker
def run_worker(args: argparse.Namespace) -> None:
    """One timed run in this process: translate the batches, print one JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    batches: list[list[str]] = json.loads(Path(args.batches).read_text())
    engine, beam = args.worker, args.beam
    rows = [0]
    started = time.perf_counter()
    if engine.startswith("aiayn"):
        from aiayn import load

        quantize = "int8" if "int8" in engine else None
        compiled = engine.endswith("_compiled")
        translator = load(args.model, "cpu", task="translation", quantize=quantize, compile=compiled)
        step = translator.runner.step

        def counted_step(last, *rest):  # counts decoder rows x steps
            rows[0] += last.size(0)
            return step(last, *rest)

        translator.runner.step = counted_step
    else:
        from aiayn.inference import CTranslate2Translator

        compute_type = engine.split("_", 1)[1]
        translator = CTranslate2Translator(
            args.ct2_dir, "cpu", compute_type=compute_type, threads=args.threads
        )
    run = equal_work_runner(translator, engine, beam, args.length) if args.mode == "equal_work" else (
        lambda batch: translator.translate(batch, beam=beam, alpha=args.alpha, batch_tokens=10**9)
    )
    # Warm-up: first calls allocate and fill caches; a compiled decoder compiles its graphs on
    # all the shapes the timed run will see (the time is reported as warmup_s).
    for batch in batches if engine.endswith("_compiled") else [batch[:8] for batch in batches[:3]]:
        run(batch)
    warmup = time.perf_counter() - started
    rows[0] = 0
    profiler = profiler_control()
    profiler("enable")
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    outputs = [line for batch in batches for line in run(batch)]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    profiler("disable")
    sentences = sum(len(batch) for batch in batches)
    print(json.dumps({
        "wall_s": wall, "user_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime,
        "minor_faults": after.ru_minflt - before.ru_minflt, "warmup_s": warmup,
        "row_steps_per_sentence": rows[0] / sentences if engine.startswith("aiayn") else None,
        "outputs": outputs if args.mode == "search" else None,
    }))


def profiler_control():
    """A function sending 'enable'/'disable' to the `perf record --control` FIFO named by
    $PERF_CONTROL (`benchmarks/step_profile.py`), so that only the timed part is sampled; a
    no-op without it."""
    path = os.environ.get("PERF_CONTROL")
    if not path:
        return lambda command: None
    control, ack = open(path, "w"), open(os.environ["PERF_ACK"])  # noqa: SIM115 (kept open)

    def send(command: str) -> None:
        control.write(command + "\n")
        control.flush()
        ack.readline()  # perf answers "ack" once the counters are switched

    return send


def equal_work_runner(translator, engine: str, beam: int, length: int):
    """Decode exactly `length` steps per sentence (pre-tokenized: the search alone is timed)."""
    import torch

    config = translator.config
    if engine.startswith("aiayn"):
        from aiayn.decoding import beam_search, greedy_search
        from aiayn.inference.torch_translator import pad_batch

        def run(batch: list[str]) -> list[str]:
            ids = [[*row, config.eos_id] for row in translator.tokenizers.source.encode_batch(batch)]
            src = pad_batch(ids, config.pad_id, torch.device("cpu"))
            # eos_id=-1: no token ends a hypothesis, so every row runs `length` steps.
            # the translator's step runner: its steps are counted (`run_worker`) and it is the
            # runner a translation uses (prepacked, int8, compiled)
            if beam == 1:
                greedy_search(translator.runner, src, max_steps=length, eos_id=-1)
            else:
                beam_search(translator.runner, src, beam, max_steps=length, eos_id=-1)
            return []

        return run

    def run_ct2(batch: list[str]) -> list[str]:
        source = [[translator._source_tokens[i] for i in row]
                  for row in translator.tokenizers.source.encode_batch(batch)]
        translator.runtime.translate_batch(
            source, beam_size=beam, num_hypotheses=1, length_penalty=0.0, max_input_length=0,
            min_decoding_length=length, max_decoding_length=length,
            suppress_sequences=translator._forbidden or None, end_token=[config.eos_id],
        )
        return []

    return run_ct2


# ---------------------------------------------------------------------------- harness
def read_test_set(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The first `--limit` lines of `--source` and `--reference` (Multi30k's test_2016_flickr
    de/en unless given); exits with one line naming what is missing."""
    from aiayn.data.corpus import read_lines
    from aiayn.data.paths import data_root

    multi30k = data_root() / "multi30k"
    src_file = args.source or multi30k / "test_2016_flickr.de.gz"
    ref_file = args.reference or multi30k / "test_2016_flickr.en.gz"
    for path in (src_file, ref_file):
        if not path.is_file():
            sys.exit(f"export_speed: test file not found: {path} (--source/--reference)")
    if not args.model.is_dir():
        sys.exit(f"export_speed: --model {args.model} is not a model directory")
    sources, references = read_lines(src_file)[: args.limit], read_lines(ref_file)[: args.limit]
    if len(sources) != len(references):
        sys.exit(f"export_speed: {src_file} has {len(sources)} lines, {ref_file} {len(references)}")
    return sources, references


def make_batches(model: Path, sources: list[str], per_batch: int) -> list[list[str]]:
    """The test sentences grouped by source token count, longest first, <= per_batch a batch."""
    from aiayn import load

    counts = load(model, "cpu", task="translation").count_tokens(sources)
    by_length: dict[int, list[str]] = {}
    for text, count in zip(sources, counts, strict=True):
        by_length.setdefault(count, []).append(text)
    return [group[i : i + per_batch] for _, group in sorted(by_length.items(), reverse=True)
            for i in range(0, len(group), per_batch)]


def worker_command(args: argparse.Namespace, engine: str, mode: str, beam: int, batches: Path,
                   ct2: dict) -> list[str]:
    """The command line of one worker (not yet pinned)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", engine, "--mode", mode,
               "--beam", str(beam), "--model", str(args.model), "--batches", str(batches),
               "--threads", str(args.threads), "--alpha", str(args.alpha), "--length", str(args.length)]
    if engine.startswith("ctranslate2"):
        command += ["--ct2-dir", str(ct2[engine])]
    return command


def spawn(args: argparse.Namespace, engine: str, mode: str, beam: int, batches: Path, ct2: dict,
          verbose: bool = False, prefix: list[str] | None = None, env: dict | None = None) -> dict:
    """Run one worker pinned to `--cores` (under `prefix`, e.g. a profiler, with `env` added); its
    JSON result (and CTranslate2's log if verbose)."""
    command = worker_command(args, engine, mode, beam, batches, ct2)
    env = os.environ | {"OMP_NUM_THREADS": str(args.threads)} | (env or {})
    if verbose:
        env["CT2_VERBOSE"] = "1"
    done = subprocess.run([*(prefix or []), "taskset", "-c", args.cores, *command], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"worker {engine} {mode} beam {beam} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if verbose:
        result["log"] = [line for line in done.stderr.splitlines() if "ctranslate2" in line.lower()]
    return result


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / "benchmarks" / "runs" / "multi30k_de_en",
                        help="Multi30k de->en model directory (from benchmarks/multi30k.sh)")
    parser.add_argument("--run", default=None, help="how the model was trained, for the record")
    parser.add_argument("--source", type=Path, default=None,
                        help="test sources, one a line (.gz read too; default Multi30k test_2016_flickr.de)")
    parser.add_argument("--reference", type=Path, default=None, help="their references (default .en)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of every engine")
    parser.add_argument("--cores", default="0", help="taskset core list every run is pinned to")
    parser.add_argument("--repeats", type=int, default=5, help="alternating timed runs per setting")
    parser.add_argument("--alpha", type=float, default=0.6, help="length penalty (aiayn's GNMT formula)")
    parser.add_argument("--beams", default="4,1", help="beam sizes of the search runs (1 = greedy)")
    parser.add_argument("--length", type=int, default=20, help="L, the steps of the equal-work mode")
    parser.add_argument("--batch-sentences", type=int, default=64, help="most sentences in one batch")
    parser.add_argument("--limit", type=int, default=None, help="first N test sentences only (quick check)")
    parser.add_argument("--work", type=Path, default=None, help="where the exports go (default: a temp dir)")
    parser.add_argument("--shared", default=None, help="a note on other load on the machine, for the record")
    parser.add_argument("--out", type=Path, default=RESULTS)
    # worker mode (internal)
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("search", "equal_work"), default="search", help=argparse.SUPPRESS)
    parser.add_argument("--beam", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--batches", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ct2-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args)
        return None

    from aiayn.evaluation.bleu import corpus_bleu
    from aiayn.export import export_ctranslate2

    sources, references = read_test_set(args)
    work = args.work or Path(tempfile.mkdtemp(prefix="export_speed_"))
    work.mkdir(parents=True, exist_ok=True)
    ct2 = {f"ctranslate2_{kind}": export_ctranslate2(args.model, work / f"ct2_{kind}", quant, overwrite=True)
           for kind, quant in (("float32", None), ("int8", "int8"))}
    batches = make_batches(args.model, sources, args.batch_sentences)
    order: dict[str, list[int]] = {}
    for i, text in enumerate(sources):
        order.setdefault(text, []).append(i)
    batch_file = work / "batches.json"
    batch_file.write_text(json.dumps(batches))
    in_batch_order = [text for batch in batches for text in batch]

    beams = [int(b) for b in args.beams.split(",")]
    settings = [("search", beam, engine) for beam in beams for engine in ENGINES
                if beam == 4 or "int8" not in engine]
    settings += [("equal_work", beams[0], engine) for engine in ("aiayn_float32", "ctranslate2_float32")]
    runs: dict[tuple[str, int, str], list[dict]] = {key: [] for key in settings}
    for repeat in range(args.repeats):
        for key in settings:
            result = spawn(args, key[2], key[0], key[1], batch_file, ct2)
            runs[key].append(result)
            print(f"repeat {repeat + 1}/{args.repeats} {key[2]} {key[0]} beam {key[1]}: "
                  f"wall {result['wall_s']:.2f}s user {result['user_s']:.2f}s", flush=True)
    backend_log = spawn(args, "ctranslate2_float32", "equal_work", 1, batch_file, ct2, verbose=True)["log"]

    def median(key: tuple, field: str) -> float:
        return statistics.median(r[field] for r in runs[key])

    results: dict = {"search": {}, "equal_work": {}}
    n = len(sources)
    for key, found in runs.items():
        mode, beam, engine = key
        entry = {
            "sent_s": round(n / median(key, "wall_s"), 2),
            "wall_s": round(median(key, "wall_s"), 3),
            "user_s": round(median(key, "user_s"), 3),
            "sys_s": round(median(key, "sys_s"), 3),
            "minor_faults": int(median(key, "minor_faults")),
            "warmup_s": round(median(key, "warmup_s"), 1),
        }
        if found[0]["row_steps_per_sentence"] is not None:
            entry["row_steps_per_sentence"] = round(found[0]["row_steps_per_sentence"], 2)
        if mode == "search":
            outputs = [None] * n
            places = {text: list(where) for text, where in order.items()}  # a test set may repeat a line
            for text, line in zip(in_batch_order, found[-1]["outputs"], strict=True):
                outputs[places[text].pop(0)] = line
            entry["bleu"] = round(corpus_bleu(outputs, references).score, 2)
            entry["outputs"] = outputs
        results[mode].setdefault(f"beam{beam}", {})[engine] = entry

    def speed_ratio(ours: dict, theirs: dict) -> float:  # sentences/s, ours over theirs
        return round(ours["sent_s"] / theirs["sent_s"], 3)

    def cpu_ratio(ours: dict, theirs: dict) -> float:  # CPU seconds, theirs over ours
        return round((theirs["user_s"] + theirs["sys_s"]) / (ours["user_s"] + ours["sys_s"]), 3)

    def same_outputs(ours: dict, theirs: dict) -> float:
        return round(sum(a == b for a, b in zip(ours["outputs"], theirs["outputs"], strict=True)) / n, 4)

    summary: dict = {}
    for name, per_engine in results["search"].items():
        ours, theirs = per_engine["aiayn_float32"], per_engine["ctranslate2_float32"]
        summary[name] = {
            "aiayn_vs_ctranslate2_float32_sent_s": speed_ratio(ours, theirs),
            "aiayn_vs_ctranslate2_float32_cpu": cpu_ratio(ours, theirs),
            "same_output_as_ctranslate2_float32": same_outputs(ours, theirs),
        }
        if "aiayn_float32_compiled" in per_engine:
            compiled = per_engine["aiayn_float32_compiled"]
            summary[name]["aiayn_compiled_vs_ctranslate2_float32_sent_s"] = speed_ratio(compiled, theirs)
            summary[name]["aiayn_compiled_vs_ctranslate2_float32_cpu"] = cpu_ratio(compiled, theirs)
            summary[name]["compiled_same_output_as_aiayn_float32"] = same_outputs(ours, compiled)
        for engine in ("aiayn_int8", "aiayn_int8_compiled"):
            if engine in per_engine:
                int8, label = per_engine[engine], engine.removeprefix("aiayn_")
                summary[name][f"aiayn_{label}_vs_ctranslate2_float32_sent_s"] = speed_ratio(int8, theirs)
                summary[name][f"aiayn_{label}_vs_ctranslate2_float32_cpu"] = cpu_ratio(int8, theirs)
                summary[name][f"aiayn_{label}_bleu_minus_float32"] = round(int8["bleu"] - ours["bleu"], 2)
                summary[name][f"aiayn_{label}_vs_ctranslate2_int8_sent_s"] = speed_ratio(
                    int8, per_engine["ctranslate2_int8"])
    equal = results["equal_work"][f"beam{beams[0]}"]
    ours_eq, theirs_eq = equal["aiayn_float32"], equal["ctranslate2_float32"]
    per_step_ratio = theirs_eq["user_s"] / ours_eq["user_s"]
    summary["equal_work"] = {
        "length": args.length,
        "beam": beams[0],
        "aiayn_vs_ctranslate2_float32_per_step_cpu": round(per_step_ratio, 3),
    }
    for name, per_engine in results["search"].items():
        # CTranslate2's rows x steps, inferred: its search CPU time at its equal-work cost per row-step
        if name == f"beam{beams[0]}":
            cost = theirs_eq["user_s"] / ours_eq["row_steps_per_sentence"]
            per_engine["ctranslate2_float32"]["row_steps_per_sentence_inferred"] = round(
                per_engine["ctranslate2_float32"]["user_s"] / cost, 2)
    for per_engine in results["search"].values():
        for entry in per_engine.values():
            entry.pop("outputs")

    import ctranslate2
    import torch

    results["summary"] = summary
    results["settings"] = {
        "threads": args.threads, "cores": args.cores, "repeats": args.repeats, "statistic": "median",
        "sentences": n, "batches": len(batches), "batch_sentences": args.batch_sentences,
        "alpha": args.alpha, "max_len_extra": 50,
        "torch": torch.__version__, "ctranslate2": ctranslate2.__version__, "cpu": cpu_info(),
        "ctranslate2_backend_log": backend_log,
        "model": str(args.model), "model_run": args.run, "machine_shared": args.shared,
        "command": "python benchmarks/export_speed.py "
        + shlex.join(argv if argv is not None else sys.argv[1:]),
    }
    atomic_write_text(args.out, json.dumps(results, indent=2) + "\n")
    print(json.dumps(results["summary"], indent=2))
    return results


if __name__ == "__main__":
    main()
