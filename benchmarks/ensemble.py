"""Ensemble decoding on a test set: BLEU of two models, of their ensemble and of an averaged
checkpoint, and decoding speed of one model against the ensemble.

    python benchmarks/ensemble.py --model RUN_A --model RUN_B [--averaged RUN_A/averaged] \\
        --threads 1 --out benchmarks/results/ensemble_multi30k_de_en.json

Systems: A, B (the two `--model` directories), `ensemble` (`aiayn.load([A, B])`: one beam search
over their mean probability) and, with `--averaged DIR`, `averaged`. Each system's length
penalty alpha is chosen on the validation set (beam `--beam`, alphas `--alphas`; the best
validation BLEU, the first alpha on a tie); the test set is then translated once per system at
its alpha and scored with sacreBLEU (13a, cased). Decoding speed: model A and the ensemble
translate the test set (each at its alpha) in `--rounds` alternating rounds in this one process,
so that machine load hits both alike; sentences/s is the median of the rounds (tokenizing,
decoding and detokenizing, as `aiayn evaluate` times it). `--lines N` uses the first N
sentences of each set (a quick check). The defaults read Multi30k de-en from the data root
(`multi30k/{val,test_2016_flickr}.{de,en}.gz`).

The mean-probability check (`--check-lines N`, default 100): on the first N test sentences, the
ensemble's beam output is fed back step by step through its incremental `step` (what the
searches call), and every step's whole next-token distribution is compared with
logsumexp(log p_A, log p_B) - log 2 from A and B run separately (one full teacher-forced pass
each); the JSON records the largest absolute difference, and the largest difference from the
mean of the log-probabilities (what the ensemble is not), to show the two models differ.

The JSON (written atomically to `--out`) records the command, cpu_model, threads, the settings,
each system's validation BLEU per alpha, its chosen alpha, test BLEU (and signature) and chrF,
and the speed rounds; a markdown table of the same figures is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F

from aiayn.core.files import atomic_write_text
from aiayn.data.corpus import read_lines
from aiayn.data.paths import data_root
from aiayn.evaluation.bleu import corpus_bleu, corpus_chrf
from aiayn.inference import Translator, load
from aiayn.training.run import cpu_model

ALPHAS = (0.6, 0.8, 1.0, 1.2, 1.5)


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    multi30k = data_root() / "multi30k"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", required=True, metavar="DIR",
                        help="a model directory; give it twice (A, then B)")
    parser.add_argument("--averaged", metavar="DIR", help="an averaged checkpoint to compare with")
    parser.add_argument("--val-src", default=str(multi30k / "val.de.gz"))
    parser.add_argument("--val-ref", default=str(multi30k / "val.en.gz"))
    parser.add_argument("--test-src", default=str(multi30k / "test_2016_flickr.de.gz"))
    parser.add_argument("--test-ref", default=str(multi30k / "test_2016_flickr.en.gz"))
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--lines", type=int, default=None, metavar="N", help="first N sentences of each set")
    parser.add_argument("--rounds", type=int, default=3, help="alternating speed rounds (default 3)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--check-lines", type=int, default=100, metavar="N",
                        help="test sentences of the mean-probability check (default 100; 0: none)")
    parser.add_argument("--out", required=True, metavar="FILE.json")
    args = parser.parse_args(argv)
    if len(args.model) != 2:
        parser.error(f"give --model twice (A and B), got {len(args.model)}")
    if args.rounds < 1 or args.beam < 1 or (args.lines is not None and args.lines < 1):
        parser.error("--rounds, --beam and --lines must be >= 1")
    if args.check_lines < 0:
        parser.error("--check-lines must be >= 0")
    return args


def read_set(source: str, reference: str, lines: int | None) -> tuple[list[str], list[str]]:
    sources, references = read_lines(source), read_lines(reference)
    if len(sources) != len(references):
        sys.exit(f"{source} has {len(sources)} lines but {reference} has {len(references)}")
    return sources[:lines], references[:lines]


def choose_alpha(
    translator: Translator, sources: list[str], references: list[str], beam: int, alphas: list[float]
) -> tuple[float, dict[str, float]]:
    """The alpha of the best validation BLEU (the first on a tie) and the BLEU of each alpha."""
    scores = {}
    for alpha in alphas:
        hypotheses = translator.translate(sources, beam=beam, alpha=alpha)
        scores[f"{alpha:g}"] = corpus_bleu(hypotheses, references).score
    best = max(alphas, key=lambda alpha: (scores[f"{alpha:g}"], -alphas.index(alpha)))
    return best, scores


def timed(translator: Translator, sources: list[str], beam: int, alpha: float) -> tuple[list[str], float]:
    start = time.perf_counter()
    hypotheses = translator.translate(sources, beam=beam, alpha=alpha)
    return hypotheses, time.perf_counter() - start


@torch.no_grad()
def mean_probability_check(
    ensemble: Translator, first: Translator, second: Translator, sources: list[str], beam: int, alpha: float
) -> dict[str, Any]:
    """Teacher-forced on the ensemble's outputs for `sources`: the ensemble's (T, V)
    log-probabilities through its incremental step against logsumexp(log p_A, log p_B) - log 2
    from A's and B's full passes (see the module docstring)."""
    model, device = ensemble.model, ensemble.device
    config = model.config
    largest = from_mean_log_probs = 0.0
    steps = 0
    for text, hyps in zip(sources, ensemble.translate_nbest(sources, 1, beam=beam, alpha=alpha), strict=True):
        src_ids = [*ensemble.tokenizers.source.encode(text), config.eos_id]
        src = torch.tensor([src_ids], device=device)  # (1, S)
        fed = [config.bos_id, *hyps[0].tokens][: config.max_len]
        memory, cache = model.encode(src), model.new_cache()
        ours = torch.stack([
            model.step(torch.tensor([[token]], device=device), memory, None, cache)[0] for token in fed
        ])  # (T, V)
        tgt_in = torch.tensor([fed], device=device)  # (1, T)
        log_a, log_b = (F.log_softmax(t.model(src, tgt_in)[0].float(), dim=-1) for t in (first, second))
        expected = torch.logsumexp(torch.stack([log_a, log_b]), dim=0) - math.log(2)  # (T, V)
        largest = max(largest, float((ours - expected).abs().max()))
        from_mean_log_probs = max(from_mean_log_probs, float((ours - (log_a + log_b) / 2).abs().max()))
        steps += len(fed)
    return {
        "sentences": len(sources), "steps": steps, "max_abs_difference": largest,
        "max_abs_difference_from_mean_log_probs": from_mean_log_probs,
    }


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    val = read_set(args.val_src, args.val_ref, args.lines)
    test = read_set(args.test_src, args.test_ref, args.lines)
    first, second = args.model
    directories: dict[str, Any] = {"A": first, "B": second, "ensemble": [first, second]}
    if args.averaged:
        directories["averaged"] = args.averaged
    translators = {name: load(d, args.device, task="translation") for name, d in directories.items()}
    systems: dict[str, dict[str, Any]] = {}
    for name, translator in translators.items():
        alpha, val_bleu = choose_alpha(translator, *val, args.beam, args.alphas)
        systems[name] = {"directory": directories[name], "val_bleu": val_bleu, "alpha": alpha}
        print(f"{name}: alpha {alpha:g} (validation BLEU {val_bleu[f'{alpha:g}']:.2f})", file=sys.stderr)
    timed_systems = ("A", "ensemble")
    seconds: dict[str, list[float]] = {name: [] for name in timed_systems}
    outputs: dict[str, list[str]] = {}
    for _ in range(args.rounds):
        for name in timed_systems:
            hypotheses, took = timed(translators[name], test[0], args.beam, systems[name]["alpha"])
            outputs.setdefault(name, hypotheses)
            seconds[name].append(took)
    for name, translator in translators.items():
        if name not in outputs:
            outputs[name] = translator.translate(test[0], beam=args.beam, alpha=systems[name]["alpha"])
        bleu, chrf = corpus_bleu(outputs[name], test[1]), corpus_chrf(outputs[name], test[1])
        systems[name] |= {"test_bleu": bleu.score, "bleu_signature": bleu.signature, "test_chrf": chrf.score}
    for name in timed_systems:
        rates = [len(test[0]) / s for s in seconds[name]]
        systems[name]["speed"] = {"sentences_per_second": statistics.median(rates), "rounds": rates}
    check = mean_probability_check(
        translators["ensemble"], translators["A"], translators["B"], test[0][: args.check_lines], args.beam,
        systems["ensemble"]["alpha"],
    ) if args.check_lines else None
    return {
        "command": shlex.join(["python", "benchmarks/ensemble.py", *argv]),
        "cpu_model": cpu_model(),
        "threads": args.threads,
        "torch": torch.__version__,
        "device": args.device,
        "beam": args.beam,
        "alphas": args.alphas,
        "rounds": args.rounds,
        "sets": {
            "val": {"source": args.val_src, "reference": args.val_ref, "sentences": len(val[0])},
            "test": {"source": args.test_src, "reference": args.test_ref, "sentences": len(test[0])},
        },
        "systems": systems,
        "mean_probability_check": check,
    }


def table(results: dict[str, Any]) -> str:
    rows = ["| system | alpha (val) | val BLEU | test BLEU | test chrF | sentences/s |",
            "|---|---|---|---|---|---|"]
    for name, system in results["systems"].items():
        alpha = system["alpha"]
        speed = system.get("speed", {}).get("sentences_per_second")
        shown_speed = "" if speed is None else f"{speed:.2f}"
        rows.append(
            f"| {name} | {alpha:g} | {system['val_bleu'][f'{alpha:g}']:.2f} | {system['test_bleu']:.2f} | "
            f"{system['test_chrf']:.2f} | {shown_speed} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_arguments(argv)
    results = run(args, argv)
    atomic_write_text(args.out, json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"cpu_model {results['cpu_model']}, threads {results['threads']}, test sentences "
          f"{results['sets']['test']['sentences']}; written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
