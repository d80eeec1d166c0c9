"""Lexical constraints on real data: Multi30k de-en test_2016_flickr with the model of
`benchmarks/multi30k.sh de en 30` (docs/constraints.md, issue 57).

    taskset -c 1 .venv/bin/python benchmarks/constraints.py --run RUN_DIR \
        --results RUN_RESULTS.json --out benchmarks/results/constraints_multi30k_de_en.json

Seeded draws (`--seed`), each from the data alone:

- positive: for each sentence, 1 or 2 words or two-word phrases of its reference that the
  unconstrained output misses (as whole words); kept = the phrase occurs in the output;
- negative: for each sentence, one word (3+ letters) of its unconstrained output; it must not
  appear as a whole word;
- glossary: 50 German-English noun pairs drawn from the training data (German capitalised
  words not first in their sentence, paired with the English word of the best Dice
  co-occurrence, 0.6 or more), applied where the source holds the German noun;
- equal when unused: the constrained search with nothing to honour gives the plain search's
  outputs and scores on the first `--equal-lines` sentences;
- speed: sentences per second with 0, 1 and 2 reference phrases per sentence, beam 4, one
  torch thread (pin the process with `taskset -c 1`), the best of `--repeats` rounds.

BLEU (sacreBLEU, as `aiayn evaluate`) is reported beside the unconstrained BLEU.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import platform
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

import torch

import aiayn
from aiayn.cli.constraint_files import GlossaryEntry, glossary_matches
from aiayn.core.files import atomic_write_text
from aiayn.evaluation.bleu import corpus_bleu
from aiayn.evaluation.constraint_rates import constraint_rates, whole_word

WORD = re.compile(r"^[A-Za-zÄÖÜäöüß]+(?:-[A-Za-zÄÖÜäöüß]+)*$")


def read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def words(text: str) -> list[str]:
    return [w.strip(".,;:!?\"'()") for w in text.split()]


def draw_positive(rng: random.Random, reference: str, output: str) -> list[str]:
    """1 or 2 words or two-word phrases of `reference` that `output` misses (may be fewer)."""
    tokens = words(reference)
    units = [w for w in tokens if len(w) >= 3 and WORD.match(w) and not whole_word(w, output)]
    units += [
        f"{a} {b}" for a, b in itertools.pairwise(tokens)
        if WORD.match(a) and WORD.match(b) and not whole_word(f"{a} {b}", output) and (len(a) + len(b)) >= 6
    ]
    units = sorted(set(units))
    rng.shuffle(units)
    wanted = rng.choice([1, 2])
    chosen: list[str] = []
    for unit in units:
        if len(chosen) == wanted:
            break
        if not any(unit in c or c in unit for c in chosen):
            chosen.append(unit)
    return chosen


def draw_negative(rng: random.Random, output: str) -> list[str]:
    candidates = sorted({w for w in words(output) if len(w) >= 3 and WORD.match(w)})
    return [rng.choice(candidates)] if candidates else []


def draw_glossary(
    rng: random.Random, german: list[str], english: list[str], size: int
) -> list[GlossaryEntry]:
    """`size` noun pairs by Dice co-occurrence over the training sentence pairs."""
    de_count: Counter = Counter()
    en_count: Counter = Counter()
    pair_count: Counter = Counter()
    for de, en in zip(german, english, strict=True):
        nouns = {w for w in words(de)[1:] if len(w) >= 4 and WORD.match(w) and w[0].isupper()}
        targets = {w for w in words(en) if len(w) >= 3 and WORD.match(w) and w.islower()}
        de_count.update(nouns)
        en_count.update(targets)
        pair_count.update((d, e) for d in nouns for e in targets)
    best: dict[str, tuple[float, str]] = {}
    for (d, e), both in pair_count.items():
        if de_count[d] < 20:
            continue
        dice = 2 * both / (de_count[d] + en_count[e])
        if dice > best.get(d, (0.0, ""))[0]:
            best[d] = (dice, e)
    pairs = sorted((d, e) for d, (dice, e) in best.items() if dice >= 0.6)
    used_targets: set[str] = set()
    unique = []
    for d, e in pairs:  # one German noun per English word: no two entries demand the same word
        if e not in used_targets:
            used_targets.add(e)
            unique.append((d, e))
    return [GlossaryEntry(d, e) for d, e in rng.sample(unique, min(size, len(unique)))]


def bleu(hypotheses: list[str], references: list[str]) -> float:
    return corpus_bleu(hypotheses, references).score


def speed(translator, texts, include, beam, alpha, repeats) -> float:
    """Sentences per second, the best of `repeats` rounds."""
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        translator.translate(texts, beam=beam, alpha=alpha, include=include)
        best = max(best, len(texts) / (time.perf_counter() - start))
    return best


def equal_when_unused(translator, texts, beam, alpha) -> bool:
    """The constrained search given nothing to honour equals the plain search, float for float."""
    import aiayn.inference.torch_translator as runtime
    from aiayn.core.eval_mode import eval_mode
    from aiayn.decoding.constrained_search import constrained_beam_search
    from aiayn.decoding.constraints import NO_CONSTRAINTS
    from aiayn.decoding.controls import NO_CONTROLS

    plain = translator.translate_nbest(texts, 1, beam=beam, alpha=alpha)
    original = runtime.beam_search

    def allocated(model, src, beam_size, alpha, max_len_extra, nbest, **kw):
        with eval_mode(model), torch.no_grad():
            return constrained_beam_search(
                model, src, [NO_CONSTRAINTS] * src.size(0), beam_size, alpha, max_len_extra, nbest, None,
                model.config.bos_id, model.config.eos_id, kw.get("controls", NO_CONTROLS),
                kw.get("prefixes"),
            )

    runtime.beam_search = allocated
    try:
        through = translator.translate_nbest(texts, 1, beam=beam, alpha=alpha)
    finally:
        runtime.beam_search = original
    return [(h[0].text, h[0].score) for h in plain] == [(h[0].text, h[0].score) for h in through]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, type=Path, help="the multi30k.sh run directory")
    parser.add_argument("--results", type=Path, help="its results JSON (model and alpha chosen on val)")
    parser.add_argument("--data", type=Path, default=Path("../shared/data/multi30k"))
    parser.add_argument("--out", type=Path,
                        default=Path("benchmarks/results/constraints_multi30k_de_en.json"))
    parser.add_argument("--seed", type=int, default=57)
    parser.add_argument("--lines", type=int, default=0, help="only the first N test sentences (0: all)")
    parser.add_argument("--speed-lines", type=int, default=300)
    parser.add_argument("--equal-lines", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--glossary-size", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    chosen = json.loads(args.results.read_text()) if args.results else {"model": "best", "alpha": 0.6}
    model_dir = args.run / "averaged" if chosen["model"] == "averaged" else args.run
    alpha, beam = float(chosen["alpha"]), 4
    translator = aiayn.load(model_dir, device="cpu")
    sources = read(args.data / "test_2016_flickr.de.gz")
    references = read(args.data / "test_2016_flickr.en.gz")
    if args.lines:
        sources, references = sources[: args.lines], references[: args.lines]
    rng = random.Random(args.seed)
    figures: dict = {"model": str(model_dir), "alpha": alpha, "beam": beam, "seed": args.seed,
                     "test_sentences": len(sources)}

    start = time.perf_counter()
    plain = translator.translate(sources, beam=beam, alpha=alpha)
    figures["unconstrained"] = {"bleu": bleu(plain, references), "seconds": time.perf_counter() - start}
    print(f"unconstrained BLEU {figures['unconstrained']['bleu']:.2f}", flush=True)
    figures["equal_when_unused"] = {
        "sentences": min(args.equal_lines, len(sources)),
        "identical": equal_when_unused(translator, sources[: args.equal_lines], beam, alpha),
    }
    print(f"equal when unused: {figures['equal_when_unused']}", flush=True)

    include = [draw_positive(rng, ref, out) for ref, out in zip(references, plain, strict=True)]
    start = time.perf_counter()
    nbest = translator.translate_nbest(sources, 1, beam=beam, alpha=alpha, include=include)
    outputs = [h[0].text for h in nbest]
    met = [h[0].constraints_met for h in nbest]
    figures["positive"] = constraint_rates(outputs, include, [[] for _ in sources], met)
    figures["positive"] |= {"bleu": bleu(outputs, references), "seconds": time.perf_counter() - start,
                            "examples": [{"source": s, "include": i, "output": o} for s, i, o in
                                         list(zip(sources, include, outputs, strict=True))[:5]]}
    print(f"positive: {figures['positive']['include_kept']}/{figures['positive']['include_phrases']} kept, "
          f"BLEU {figures['positive']['bleu']:.2f}", flush=True)

    exclude = [draw_negative(rng, out) for out in plain]
    nbest = translator.translate_nbest(sources, 1, beam=beam, alpha=alpha, exclude=exclude)
    outputs = [h[0].text for h in nbest]
    figures["negative"] = constraint_rates(outputs, [[] for _ in sources], exclude, [True] * len(sources))
    figures["negative"]["bleu"] = bleu(outputs, references)
    print(f"negative: {figures['negative']['exclude_appeared']}/{figures['negative']['exclude_phrases']} "
          f"appear, BLEU {figures['negative']['bleu']:.2f}", flush=True)

    glossary = draw_glossary(rng, read(args.data / "train.de.gz"), read(args.data / "train.en.gz"),
                             args.glossary_size)
    applied = glossary_matches(glossary, sources, ignore_case=False)
    targets = [[e.target for e in entries] for entries in applied]
    nbest = translator.translate_nbest(sources, 1, beam=beam, alpha=alpha, include=targets)
    outputs = [h[0].text for h in nbest]
    met = [h[0].constraints_met for h in nbest]
    figures["glossary"] = constraint_rates(outputs, targets, [[] for _ in sources], met)
    figures["glossary"] |= {
        "entries": [[e.source, e.target] for e in glossary],
        "entries_applied": len({e for a in applied for e in a}),
        "bleu": bleu(outputs, references),
        "unconstrained_bleu_same_lines": bleu([plain[i] for i, a in enumerate(applied) if a],
                                              [references[i] for i, a in enumerate(applied) if a]),
        "bleu_same_lines": bleu([outputs[i] for i, a in enumerate(applied) if a],
                                [references[i] for i, a in enumerate(applied) if a]),
    }
    print(f"glossary: {figures['glossary']['include_kept']}/{figures['glossary']['include_phrases']} applied "
          f"entries appear on {figures['glossary']['lines_with_include']} lines", flush=True)

    # speed: the first sentences with two reference phrases drawn, beam 4, one thread
    two = [i for i, phrases in enumerate(include) if len(phrases) == 2][: args.speed_lines]
    texts = [sources[i] for i in two]
    rounds = {"0": None, "1": [include[i][:1] for i in two], "2": [include[i] for i in two]}
    rates = {k: 0.0 for k in rounds}
    for _ in range(args.repeats):  # interleaved, so a busy moment of the machine hits every setting
        for k, phrases in rounds.items():
            rates[k] = max(rates[k], speed(translator, texts, phrases, beam, alpha, 1))
    figures["speed"] = {
        "sentences": len(texts), "threads": torch.get_num_threads(), "repeats": args.repeats,
        "sentences_per_s": rates,
        "relative_1": rates["1"] / rates["0"], "relative_2": rates["2"] / rates["0"],
    }
    print(f"speed: {rates} sentences/s", flush=True)
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    figures |= {"cpu_model": names[0] if names else platform.processor(), "torch": torch.__version__,
                "command": " ".join(["python", *sys.argv]),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    atomic_write_text(args.out, json.dumps(figures, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
