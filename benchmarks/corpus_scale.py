"""Corpus scale: preparing a WMT-size corpus once into a token store, and training from it.

    python benchmarks/corpus_scale.py --pairs 300000 1000000 [4500000] [--old-max 300000]

The corpus is synthetic, shaped like WMT 2014 English-German (4.5M pairs):

- words: each side has its own vocabulary of `--types` (1,200,000) word types, made-up
  syllable strings; a word's rank r is drawn with probability proportional to 1/r (Zipf's law,
  exponent 1), so at 4.5M pairs about a million types per side occur, as WMT14's several
  million (mostly rare) types; the tokenizer trainer sees that many distinct words;
- lengths: the source has a gamma-distributed number of words (shape 2.2, mean 23: WMT14's
  English side averages ~23 words, with a long right tail), clipped to 1..150; the target has
  the source's length times a normal ratio (mean 1.0, sd 0.15), at least 1;
- 1000 validation and 1000 test pairs drawn the same way.

The files are written once under `--work` (reused by later runs). For each size it records:

- `prepare`: `aiayn prepare` (BPE, 37k joint vocabulary as the WMT config, the tokenizer
  trained on its bounded sample): wall time, pairs/s, peak RSS, the store's size on disk;
- `first_step_s`: with the store present, seconds from starting `aiayn train
  --set model.preset=tiny --set train.precision=fp32` to its first logged step;
- `ranks`: the same run with 1 and with 2 processes (torchrun, gloo): each rank's peak RSS,
  and RSS, PSS and USS (private memory; the mapped store's pages are shared, so they are in
  RSS and PSS but not USS) read from /proc/PID/smaps_rollup after a few steps;
- `old_path` (sizes up to `--old-max`): `aiayn train` of commit b21bb47 (the in-memory path:
  the whole corpus as Python lists in every process), time to its first step and peak RSS,
  stopped at `--old-limit-gb`.

Written to `--json` (default benchmarks/results/corpus_scale.json) with `cpu_model`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from aiayn.runtime.cpu import cpu_model

REPO = Path(__file__).resolve().parents[1]
SYLLABLES = [c + v for c in "bdfghklmnprstvwz" for v in "aeiou"]  # 80 syllables
WORDS_MEAN, WORDS_SHAPE, MAX_WORDS = 23.0, 2.2, 150




# ---------------------------------------------------------------------- the corpus
def vocabulary(types: int, side: int) -> np.ndarray:
    """`types` distinct made-up words: the syllables of the rank in base 80 (side 1 adds an
    'x' so that the two languages share no word)."""
    words = []
    for rank in range(types):
        parts, n = [], rank + 1
        while n:
            n, digit = divmod(n, len(SYLLABLES))
            parts.append(SYLLABLES[digit])
        words.append("".join(parts) + ("x" if side else ""))
    return np.array(words, dtype=object)


def zipf_ranks(rng: np.random.Generator, count: int, types: int) -> np.ndarray:
    """Ranks 0..types-1 with P(r) ~ 1/(r + 1) (inverse of the continuous CDF log(1 + r) / log(1 + V))."""
    return np.minimum(np.exp(rng.random(count) * math.log(types + 1)).astype(np.int64) - 1, types - 1)


def write_split(
    path_src: Path, path_tgt: Path, pairs: int, seed: int, vocab: tuple[np.ndarray, np.ndarray]
) -> None:
    rng = np.random.default_rng(seed)
    chunk = 50_000
    with path_src.open("w", encoding="utf-8") as src, path_tgt.open("w", encoding="utf-8") as tgt:
        for start in range(0, pairs, chunk):
            n = min(chunk, pairs - start)
            src_len = np.clip(
                rng.gamma(WORDS_SHAPE, WORDS_MEAN / WORDS_SHAPE, n).round(), 1, MAX_WORDS
            ).astype(int)
            tgt_len = np.maximum(1, (src_len * rng.normal(1.0, 0.15, n)).round()).astype(int)
            for side, lengths, handle in ((0, src_len, src), (1, tgt_len, tgt)):
                words = vocab[side][zipf_ranks(rng, int(lengths.sum()), len(vocab[side]))]
                bounds = np.concatenate(([0], np.cumsum(lengths)))
                handle.write("".join(" ".join(words[a:b]) + "\n" for a, b in itertools.pairwise(bounds)))


def make_corpus(work: Path, pairs: int, types: int) -> Path:
    """The corpus of `pairs` pairs under `work` (made once)."""
    directory = work / f"wmt_synthetic_{pairs}"
    if (directory / "done").exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    vocab = (vocabulary(types, 0), vocabulary(types, 1))
    write_split(directory / "train.en", directory / "train.de", pairs, 1, vocab)
    write_split(directory / "valid.en", directory / "valid.de", 1000, 2, vocab)
    write_split(directory / "test.en", directory / "test.de", 1000, 3, vocab)
    (directory / "done").write_text(f"{time.perf_counter() - started:.1f}\n")
    return directory


def config_for(corpus: Path, cache: Path, out: Path) -> Path:
    text = (REPO / "configs" / "wmt14_en_de_base.yaml").read_text()
    config = out / "wmt_synthetic.yaml"
    config.write_text(text)
    return config


def overrides(corpus: Path, cache: Path) -> list[str]:
    pairs = {
        "train_src": "train.en", "train_tgt": "train.de", "valid_src": "valid.en", "valid_tgt": "valid.de",
        "test_src": "test.en", "test_tgt": "test.de",
    }  # fmt: skip
    sets = [f"data.{key}={corpus / name}" for key, name in pairs.items()]
    return [item for s in [*sets, f"data.cache_dir={cache}"] for item in ("--set", s)]


TRAIN_SETTINGS = [
    "model.preset=tiny", "train.precision=fp32", "train.max_steps=40", "train.log_every=1",
    "train.eval_every=1000", "train.batch_tokens=2000", "train.threads=1", "train.progress=none",
    "train.bleu_max_sentences=0", "train.test_max_sentences=0", "model.max_len=256",
]  # fmt: skip


# ---------------------------------------------------------------------- measuring processes
def smaps(pid: int) -> dict[str, float]:
    """RSS, PSS, USS (private clean + dirty) and peak RSS of a process, in GB."""
    values: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                values[parts[0].rstrip(":")] = int(parts[1]) / 2**20
        status = Path(f"/proc/{pid}/status").read_text()
        hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return {}
    return {
        "rss_gb": round(values.get("Rss", 0.0), 3),
        "pss_gb": round(values.get("Pss", 0.0), 3),
        "uss_gb": round(values.get("Private_Clean", 0.0) + values.get("Private_Dirty", 0.0), 3),
        "shared_gb": round(values.get("Shared_Clean", 0.0) + values.get("Shared_Dirty", 0.0), 3),
        "peak_rss_gb": round(hwm / 2**20, 3),
    }


def descendants(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                children.append(int(entry.name))
    return children + [d for c in children for d in descendants(c)]


def python_ranks(pid: int) -> list[int]:
    """The aiayn training processes among `pid` and its descendants (torchrun's workers)."""
    found = []
    for candidate in [pid, *descendants(pid)]:
        try:
            environ = Path(f"/proc/{candidate}/environ").read_bytes()
        except OSError:
            continue
        if b"LOCAL_RANK=" in environ or candidate == pid:
            found.append(candidate)
    return found


def run_measured(command: list[str], env: dict[str, str], log: Path, timeout: float = 3600) -> dict:
    """Run `command` (its log to `log`); its wall time and peak RSS (from wait4)."""
    started = time.perf_counter()
    with log.open("w") as handle:
        process = subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT)
    stopped, status, usage = None, 0, None
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - started > timeout and stopped is None:
            process.kill()
            stopped = f"over {timeout} s"
        time.sleep(0.2)
    process.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall_s": round(time.perf_counter() - started, 2),
        "peak_rss_gb": round(usage.ru_maxrss / 2**20, 3),
        "returncode": process.returncode,
        "stopped": stopped,
        "log_tail": log.read_text()[-600:],
    }


def first_step(
    command: list[str], env: dict[str, str], run_dir: Path, settle_steps: int, limit_gb: float
) -> dict:
    """Start a training command; seconds until metrics.jsonl has its first training step; each
    rank's memory after `settle_steps` steps; then stop it."""
    started = time.perf_counter()
    log = run_dir.with_suffix(".log")
    with log.open("w") as handle:
        process = subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT)
    first, memory, peak = None, {}, 0.0
    metrics = run_dir / "metrics.jsonl"
    try:
        while process.poll() is None:
            time.sleep(0.05)
            ranks = python_ranks(process.pid)
            peak = max([peak] + [smaps(p).get("rss_gb", 0.0) for p in ranks])
            if peak > limit_gb:
                return {
                    "stopped": f"RSS over {limit_gb} GB",
                    "peak_rss_gb": peak,
                    "after_s": time.perf_counter() - started,
                }
            steps = (
                [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
            )
            steps = [s for s in steps if s.get("split") == "train"]
            if steps and first is None:
                first = time.perf_counter() - started
            if len(steps) >= settle_steps:
                workers = [p for p in ranks if p != process.pid] or [process.pid]
                memory = {str(p): smaps(p) for p in workers}
                break
    finally:
        process.kill()
        for child in descendants(process.pid):
            with contextlib.suppress(OSError):
                os.kill(child, 9)
        process.wait()
    return {
        "first_step_s": round(first, 2) if first is not None else None,
        "peak_rss_gb": round(peak, 3),
        "ranks": list(memory.values()),
        "log_tail": "" if first is not None else log.read_text()[-800:],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def store_size(cache: Path) -> int:
    return sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())


def old_source(work: Path) -> Path:
    """The sources of commit b21bb47 (the in-memory data path), exported once."""
    target = work / "aiayn_b21bb47"
    if not (target / "src").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", "b21bb47", "src"], cwd=REPO, capture_output=True, check=True
        ).stdout
        with tempfile.TemporaryFile() as handle:
            handle.write(archive)
            handle.seek(0)
            with tarfile.open(fileobj=handle) as tar:
                tar.extractall(target, filter="data")
    return target / "src"


# ---------------------------------------------------------------------- the benchmark
def measure(pairs: int, options: argparse.Namespace) -> dict:
    work = options.work
    corpus = make_corpus(work, pairs, options.types)
    out = Path(tempfile.mkdtemp(prefix=f"corpus_scale_{pairs}_", dir=work))
    cache = out / "cache"
    config = config_for(corpus, cache, out)
    env = os.environ | {"PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    aiayn = [sys.executable, "-m", "aiayn"]
    record: dict = {"pairs": pairs, "corpus_generation_s": float((corpus / "done").read_text())}
    command = [*aiayn, "prepare", str(config), *overrides(corpus, cache)]
    prepare = run_measured(command, env, out / "prepare.log", timeout=options.timeout)
    prepare["pairs_per_s"] = round(pairs / prepare["wall_s"], 1)
    prepare["store_bytes"] = store_size(cache)
    manifests = list(cache.glob("*/manifest.json"))
    if manifests:
        manifest = json.loads(manifests[0].read_text())
        prepare |= {
            "filters": manifest["filters"],
            "num_pairs": manifest["num_pairs"],
            "dtype": manifest["dtype"],
        }
    record["prepare"] = prepare
    print(json.dumps({"pairs": pairs, "prepare": prepare}), flush=True)
    train_args = [a for s in TRAIN_SETTINGS for a in ("--set", s)]
    record["train"] = {}
    for processes in options.processes:
        run_dir = out / f"run_{processes}"
        if processes == 1:
            launcher = aiayn
        else:
            launcher = [
                sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}",
                "--master_addr=127.0.0.1", f"--master_port={free_port()}", "-m", "aiayn",
            ]  # fmt: skip
        command = [
            *launcher,
            "train",
            str(config),
            "--out",
            str(run_dir),
            *overrides(corpus, cache),
            *train_args,
        ]
        record["train"][str(processes)] = first_step(command, env, run_dir, options.settle_steps, 1e9)
        print(
            json.dumps({"pairs": pairs, "processes": processes, **record["train"][str(processes)]}),
            flush=True,
        )
    if pairs <= options.old_max:
        old_env = env | {"PYTHONPATH": str(old_source(work))}
        run_dir = out / "run_old"
        command = [
            *aiayn,
            "train",
            str(config),
            "--out",
            str(run_dir),
            *overrides(corpus, cache)[:-2],
            *train_args,
        ]
        record["old_path"] = first_step(command, old_env, run_dir, options.settle_steps, options.old_limit_gb)
        print(json.dumps({"pairs": pairs, "old_path": record["old_path"]}), flush=True)
    shutil.rmtree(out, ignore_errors=True)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, nargs="+", default=[300_000, 1_000_000, 4_500_000])
    parser.add_argument("--types", type=int, default=1_200_000, help="word types per side")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--settle-steps", type=int, default=5, help="steps before memory is read")
    parser.add_argument("--old-max", type=int, default=300_000, help="largest size the old path is run at")
    parser.add_argument("--old-limit-gb", type=float, default=8.0)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "aiayn_corpus_scale")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "corpus_scale.json")
    options = parser.parse_args()
    options.work.mkdir(parents=True, exist_ok=True)
    previous = json.loads(options.json.read_text()) if options.json.exists() else {}
    sizes = {str(r["pairs"]): r for r in previous.get("sizes", [])}
    for pairs in options.pairs:
        sizes[str(pairs)] = measure(pairs, options)
        result = {
            "cpu_model": cpu_model(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "corpus": {"types_per_side": options.types, "words_mean": WORDS_MEAN, "words_shape": WORDS_SHAPE},
            "train_settings": TRAIN_SETTINGS,
            "sizes": sorted(sizes.values(), key=lambda r: r["pairs"]),
        }
        options.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
