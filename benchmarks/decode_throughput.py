"""Greedy decoding throughput with and without the key/value cache.

    python benchmarks/decode_throughput.py            # writes benchmarks/results/decode_throughput.json

A random `small` Transformer (vocabulary 8000) greedily decodes 64 random-token sentences for
exactly 50 steps each (not stopping at `<eos>`), once with the cache (one decoder position
per step) and once without (the decoder re-runs over the whole prefix every step). The two
are timed in alternating repetitions, so that drifting machine load hits both alike, and the
medians are reported.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from aiayn.data.special_tokens import EOS_ID, PAD_ID
from aiayn.decoding import greedy_search
from aiayn.model import ModelConfig, Transformer

RESULTS = Path(__file__).parent / "results" / "decode_throughput.json"


def random_sources(count: int, min_len: int, max_len: int, vocab: int, seed: int) -> torch.Tensor:
    """(count, max_len + 1) random token sentences of random lengths + `<eos>`, right-padded."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (count,), generator=generator)
    src = torch.full((count, max_len + 1), PAD_ID, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, vocab, (n,), generator=generator)
        src[i, n] = EOS_ID
    return src


def machine_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def time_once(model: Transformer, src: torch.Tensor, steps: int, use_cache: bool) -> float:
    if src.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = greedy_search(model, src, max_steps=steps, use_cache=use_cache, stop_at_eos=False)
    if src.is_cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    assert all(len(tokens) == steps for tokens in out.tokens)
    return elapsed


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--src-min-len", type=int, default=20)
    parser.add_argument("--src-max-len", type=int, default=40)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset(args.preset, vocab_size=args.vocab_size)).to(args.device).eval()
    src = random_sources(args.sentences, args.src_min_len, args.src_max_len, args.vocab_size, 0)
    src = src.to(args.device)

    cached = greedy_search(model, src, max_steps=args.steps, stop_at_eos=False)  # also warms up
    uncached = greedy_search(model, src, max_steps=args.steps, use_cache=False, stop_at_eos=False)
    identical = cached.tokens == uncached.tokens
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.repeats):
        for use_cache in (True, False):
            times[use_cache].append(time_once(model, src, args.steps, use_cache))

    cached_s, uncached_s = statistics.median(times[True]), statistics.median(times[False])
    result = {
        "greedy_cached_sent_s": args.sentences / cached_s,
        "greedy_uncached_sent_s": args.sentences / uncached_s,
        "greedy_cached_tok_s": args.sentences * args.steps / cached_s,
        "greedy_uncached_tok_s": args.sentences * args.steps / uncached_s,
        "cache_speedup": uncached_s / cached_s,
        "outputs_identical": identical,
        "cached_seconds": times[True],
        "uncached_seconds": times[False],
        "settings": {
            "preset": args.preset,
            "vocab_size": args.vocab_size,
            "sentences": args.sentences,
            "steps": args.steps,
            "src_len": [args.src_min_len, args.src_max_len],
            "repeats": args.repeats,
            "device": args.device,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "machine": machine_name(args.device),
        },
        "command": shlex.join(["python", "benchmarks/decode_throughput.py", *(argv or sys.argv[1:])]),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"greedy, {args.sentences} sentences x {args.steps} steps, {args.preset} (vocab {args.vocab_size}), "
        f"{args.device}: cached {result['greedy_cached_sent_s']:.1f} sent/s, uncached "
        f"{result['greedy_uncached_sent_s']:.1f} sent/s, speed-up {result['cache_speedup']:.1f}x "
        f"(outputs identical: {identical}) -> {args.output}"
    )
    return result


if __name__ == "__main__":
    main()
