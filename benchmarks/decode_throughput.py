"""Decoding throughput: the key/value cache, the reference, and real test-set translation.

    python benchmarks/decode_throughput.py            # writes benchmarks/results/decode_throughput.json

1. Synthetic workload: a random `small` Transformer (vocabulary 8000) greedily decodes 64
   random-token sentences for exactly 50 steps each (its `<eos>` logit is -inf, so no row
   stops early): ours with the cache (`greedy_search`: one decoder position per step), ours
   without it (`uncached_greedy` below: the decoder re-runs over the whole prefix every step),
   and the `torch.nn.Transformer` reference of the same shape without a cache (encoder once,
   decoder over the prefix every step, as in PyTorch's tutorial). The three are timed in
   alternating repetitions, so that drifting machine load hits all alike, and the medians are
   reported.
2. Real workload (when `--model` exists): a trained model translates the 1,000
   `test_2016_flickr` sentences end to end (tokenize, decode, detokenize) with beam 4, beam 5
   and greedy search, as `aiayn evaluate` does; sentences/s (median of `--test-repeats`
   alternating runs) and BLEU are reported.
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

from aiayn.data.corpus import read_lines
from aiayn.data.paths import data_root
from aiayn.decoding import greedy_search
from aiayn.decoding.common import log_probs, never_generated, padding_mask_or_none
from aiayn.inference import load
from aiayn.model import ModelConfig, Transformer
from aiayn.translation import evaluate_translation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference import ReferenceTransformer

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = REPO / "benchmarks" / "runs" / "multi30k_de_en"

RESULTS = Path(__file__).parent / "results" / "decode_throughput.json"


def random_sources(config: ModelConfig, count: int, min_len: int, max_len: int, seed: int) -> torch.Tensor:
    """(count, max_len + 1) random token sentences of random lengths + `<eos>`, right-padded
    (the special ids are `config`'s; the words are ids past them)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (count,), generator=generator)
    src = torch.full((count, max_len + 1), config.pad_id, dtype=torch.long)
    specials = (config.pad_id, config.bos_id, config.eos_id, config.unk_id)
    first_word = max(i for i in specials if i is not None) + 1
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(first_word, config.src_vocab_size, (n,), generator=generator)
        src[i, n] = config.eos_id
    return src


def machine_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def never_ends(model: Transformer) -> Transformer:
    """`model` with `<eos>` at logit -inf: greedy search then runs every row to its step limit,
    a fixed workload whatever the random weights pick."""
    eos = torch.tensor([model.config.eos_id], device=next(model.parameters()).device)

    def forbid_eos(_module: torch.nn.Module, _inputs: tuple, logits: torch.Tensor) -> torch.Tensor:
        return logits.index_fill(-1, eos, float("-inf"))

    model.output_projection.register_forward_hook(forbid_eos)
    return model


def cached_greedy(model: Transformer, src: torch.Tensor, steps: int) -> list[list[int]]:
    """Ours with the key/value cache: `greedy_search` itself."""
    return greedy_search(model, src, max_steps=steps).tokens


@torch.no_grad()
def uncached_greedy(model: Transformer, src: torch.Tensor, steps: int) -> list[list[int]]:
    """Ours without the cache: encode (B, S) `src` once, then re-run the decoder over the whole
    (B, t+1) prefix at every step t (the textbook definition; `steps` tokens per row)."""
    config = model.config
    forbidden = never_generated(config.pad_id, config.bos_id, config.eos_id)
    src_padding_mask = padding_mask_or_none(src, config.pad_id)  # (B, S) or None
    memory = model.encode(src, src_padding_mask)  # (B, S, D)
    out = torch.full((src.size(0), steps + 1), config.bos_id, dtype=torch.long, device=src.device)
    for t in range(steps):
        hidden = model.decode(out[:, : t + 1], memory, src_padding_mask, return_hidden=True)  # (B, t+1, D)
        out[:, t + 1] = log_probs(model.output_projection(hidden[:, -1]), forbidden).argmax(dim=-1)
    return out[:, 1:].tolist()


def time_once(model: Transformer, src: torch.Tensor, steps: int, use_cache: bool) -> float:
    if src.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    tokens = (cached_greedy if use_cache else uncached_greedy)(model, src, steps)
    if src.is_cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    assert all(len(row) == steps for row in tokens)
    return elapsed


@torch.no_grad()
def reference_greedy(model: ReferenceTransformer, src: torch.Tensor, steps: int) -> torch.Tensor:
    """Uncached greedy search with `nn.Transformer`: encode once, re-decode the prefix per step."""
    src_padding = src == model.config.pad_id
    memory = model.transformer.encoder(model.embed(src), src_key_padding_mask=src_padding)
    tokens = torch.full((src.size(0), 1), model.config.bos_id, dtype=torch.long, device=src.device)
    for _ in range(steps):
        causal = torch.nn.Transformer.generate_square_subsequent_mask(
            tokens.size(1), dtype=torch.bool, device=src.device
        )
        hidden = model.transformer.decoder(
            model.embed(tokens), memory, tgt_mask=causal, tgt_is_causal=True,
            memory_key_padding_mask=src_padding,
        )
        next_token = model.output_projection(hidden[:, -1]).argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens[:, 1:]


def time_reference(model: ReferenceTransformer, src: torch.Tensor, steps: int) -> float:
    start = time.perf_counter()
    out = reference_greedy(model, src, steps)
    if src.is_cuda:
        torch.cuda.synchronize()
    assert out.shape == (src.size(0), steps)
    return time.perf_counter() - start


def test_set_throughput(args: argparse.Namespace) -> dict:
    """Beam 4, beam 5 and greedy over the test sentences with the trained model in `args.model`."""
    translator = load(args.model, args.device, task="translation")
    sources = read_lines(args.test_src)[: args.test_sentences]
    references = read_lines(args.test_ref)[: args.test_sentences]
    modes = {"beam4": 4, "beam5": 5, "greedy": 1}
    evaluate_translation(translator, sources[:32], references[:32], beam=5)  # warm-up
    runs: dict[str, list] = {name: [] for name in modes}
    for _ in range(args.test_repeats):
        for name, beam in modes.items():
            runs[name].append(evaluate_translation(translator, sources, references, beam=beam, alpha=0.6))
    result: dict = {}
    for name, evaluations in runs.items():
        result[f"{name}_sent_s"] = statistics.median(e.sentences_per_second for e in evaluations)
        result[f"{name}_bleu"] = evaluations[0].bleu.score
        result[f"{name}_seconds"] = [e.seconds for e in evaluations]
    result["test_set"] = {
        "model": str(args.model),
        "parameters": translator.parameters,
        "sentences": len(sources),
        "source": str(args.test_src),
        "alpha": 0.6,
        "repeats": args.test_repeats,
    }
    return result


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
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL,
                        help="trained run directory for the test-set figures (skipped when missing)")
    parser.add_argument("--test-src", type=Path, default=None,
                        help="source sentences (default: multi30k/test_2016_flickr.de.gz, data root)")
    parser.add_argument("--test-ref", type=Path, default=None,
                        help="references (default: multi30k/test_2016_flickr.en.gz, data root)")
    parser.add_argument("--test-repeats", type=int, default=3)
    parser.add_argument("--test-sentences", type=int, default=None, help="only the first N (default: all)")
    args = parser.parse_args(argv)
    args.test_src = args.test_src or data_root() / "multi30k" / "test_2016_flickr.de.gz"
    args.test_ref = args.test_ref or data_root() / "multi30k" / "test_2016_flickr.en.gz"
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    config = ModelConfig.preset(args.preset, vocab_size=args.vocab_size)
    model = never_ends(Transformer(config).to(args.device).eval())
    reference = ReferenceTransformer(config).to(args.device).eval()
    src = random_sources(config, args.sentences, args.src_min_len, args.src_max_len, 0)
    src = src.to(args.device)

    cached = cached_greedy(model, src, args.steps)  # also warms up
    uncached = uncached_greedy(model, src, args.steps)
    identical = cached == uncached
    reference_greedy(reference, src, 2)  # warm-up
    times: dict[bool, list[float]] = {True: [], False: []}
    reference_times: list[float] = []
    for _ in range(args.repeats):
        for use_cache in (True, False):
            times[use_cache].append(time_once(model, src, args.steps, use_cache))
        reference_times.append(time_reference(reference, src, args.steps))

    cached_s, uncached_s = statistics.median(times[True]), statistics.median(times[False])
    reference_s = statistics.median(reference_times)
    result = {
        "greedy_cached_sent_s": args.sentences / cached_s,
        "greedy_uncached_sent_s": args.sentences / uncached_s,
        "greedy_cached_tok_s": args.sentences * args.steps / cached_s,
        "greedy_uncached_tok_s": args.sentences * args.steps / uncached_s,
        "cache_speedup": uncached_s / cached_s,
        "reference_uncached_sent_s": args.sentences / reference_s,
        "cached_vs_reference_uncached": reference_s / cached_s,
        "outputs_identical": identical,
        "cached_seconds": times[True],
        "uncached_seconds": times[False],
        "reference_uncached_seconds": reference_times,
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
    if args.model.is_dir():
        result.update(test_set_throughput(args))
    else:
        print(f"no trained model at {args.model}: test-set figures skipped (train one with "
              "benchmarks/multi30k.sh)", file=sys.stderr)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"greedy, {args.sentences} sentences x {args.steps} steps, {args.preset} (vocab {args.vocab_size}), "
        f"{args.device}: cached {result['greedy_cached_sent_s']:.1f} sent/s, uncached "
        f"{result['greedy_uncached_sent_s']:.1f} sent/s, speed-up {result['cache_speedup']:.1f}x "
        f"(outputs identical: {identical}); reference uncached {result['reference_uncached_sent_s']:.1f} "
        f"sent/s, cached/reference {result['cached_vs_reference_uncached']:.1f}x"
    )
    for name in ("beam4", "beam5", "greedy"):
        if f"{name}_sent_s" in result:
            print(f"{name}: {result[f'{name}_sent_s']:.1f} sentences/s, BLEU {result[f'{name}_bleu']:.2f} "
                  f"on {result['test_set']['sentences']} test sentences")
    print(f"-> {args.output}")
    return result


if __name__ == "__main__":
    main()
