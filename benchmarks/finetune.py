"""Fine-tuning demonstration (issue 26): the dates model learns year-first dates with `--init-from`.

The built-in dates model never sees a year-first date ("1982/06/03") in training and gets
(almost) none right (`benchmarks/results/dates.json`, `heldout_format_by_format["{Y}/{mm}/{dd}"]`).
Here it is trained as `aiayn train` trains it, then fine-tuned for at most 2 minutes:

    aiayn train finetune.yaml --init-from RUN --out FT [--set train.freeze=[...]]

on a few hundred year-first examples (dates of the training split, none of the test dates),
mixed with twice as many examples of the original formats (replayed from the training data,
so that the model does not forget them); the best model is chosen on 100 new year-first dates and
100 validation dates in the original formats. Reported, before and after: year-first exact match on the
1,000 held-out test dates written year-first (target >= 95% after), and the original held-out
exact match (target >= 98% after: forgetting), for a full fine-tune and with frozen groups.
All decoding is greedy (the dates config's `test_beam: 1`).

    python benchmarks/finetune.py            # writes benchmarks/results/finetune.json
    python benchmarks/finetune.py --quick    # a smoke test of the script (tiny budgets)
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dates import cpu_model, exact_match

RESULTS = Path(__file__).resolve().parent / "results" / "finetune.json"
YEAR_FIRST = "{Y}/{mm}/{dd}"
NUM_YEAR_FIRST = 400  # fine-tuning examples written year-first
NUM_REPLAY = 800  # examples of the original formats mixed in (2 per year-first one: less forgetting)
NUM_VALID = 100
VARIANTS = {"full": [], "freeze_embeddings": ["embeddings"], "freeze_decoder": ["decoder"]}
FINETUNE_TRAIN = {
    "max_minutes": 2.0, "max_steps": 900, "batch_tokens": 1024, "schedule": "cosine", "lr": 0.0005,
    "warmup": 20, "label_smoothing": 0.1, "eval_every": 300, "log_every": 50, "bleu_max_sentences": 100,
    "bleu_beam": 1, "test_beam": 1, "validation_metric": "exact_match", "precision": "fp32", "threads": 1,
    "progress": "none",
}


def aiayn(*args: str) -> float:
    """Run `python -m aiayn ARGS`; the wall-clock seconds it took."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "aiayn", *args], check=True)
    return time.perf_counter() - started


def write_split(directory: Path, name: str, pairs: list[tuple[str, str]]) -> dict[str, str]:
    src, tgt = directory / f"{name}.src", directory / f"{name}.tgt"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return {f"{name}_src": str(src), f"{name}_tgt": str(tgt)}


def figures(model_dir: Path, year_first: list, original: list) -> dict:
    import aiayn as package

    translator = package.load(model_dir, "cpu")
    year_first_match, outputs = exact_match(translator, year_first, beam=1, alpha=0.6)
    original_match, _ = exact_match(translator, original, beam=1, alpha=0.6)
    return {
        "year_first_exact_match": year_first_match,
        "original_exact_match": original_match,
        "year_first_examples": [
            {"source": s, "reference": t, "output": o}
            for (s, t), o in list(zip(year_first, outputs, strict=True))[:5]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny budgets: check the script, not the figures")
    args = parser.parse_args()
    from aiayn.data.synthetic import heldout_format_pairs, make_task
    from aiayn.tasks import load_config

    root = Path(tempfile.mkdtemp())
    base = root / "dates"
    quick = ["--set", "train.max_steps=40", "--set", "train.eval_every=40"] if args.quick else []
    base_seconds = aiayn("train", "--out", str(base), "--set", "train.progress=none", *quick)

    data = load_config(base / "train_config.yaml").data
    splits = make_task(data.task, data.seed, data.num_train, data.num_valid, data.num_test)
    original = splits["test"]
    year_first_test = heldout_format_pairs(original, data.seed, formats=[YEAR_FIRST])
    held_out = {t for _, t in original} | {t for _, t in splits["valid"]}
    rng = random.Random(26)
    train_dates = sorted({t for _, t in splits["train"]} - held_out)
    chosen = rng.sample(train_dates, NUM_YEAR_FIRST + NUM_VALID)
    year_first = heldout_format_pairs([("", t) for t in chosen], 26, formats=[YEAR_FIRST])
    replay = rng.sample(splits["train"], NUM_REPLAY)
    train_pairs = year_first[:NUM_YEAR_FIRST] + replay
    rng.shuffle(train_pairs)
    files = root / "finetune-data"
    files.mkdir()
    data_section = {"task": "files", "tokenizer": "char", "max_sentence_tokens": data.max_sentence_tokens}
    data_section |= write_split(files, "train", train_pairs)
    # validation (the best model's choice) on both: new year-first dates and the original formats
    data_section |= write_split(files, "valid", year_first[NUM_YEAR_FIRST:] + splits["valid"][:NUM_VALID])
    data_section |= write_split(files, "test", year_first_test)
    train_section = FINETUNE_TRAIN | ({"max_steps": 10, "eval_every": 10} if args.quick else {})
    config_path = root / "finetune.yaml"
    # no model section: the settings come from --init-from (a contradicting key would be refused)
    config_path.write_text(yaml.safe_dump({"data": data_section, "train": train_section}))

    report = {
        "command": "aiayn train finetune.yaml --init-from RUN --out FT [--set train.freeze=[GROUPS]]",
        "year_first_format": YEAR_FIRST,
        "finetune_examples": {"year_first": NUM_YEAR_FIRST, "original_formats_replayed": NUM_REPLAY},
        "finetune_train": train_section,
        "base_train_seconds": round(base_seconds, 1),
        "test_sentences": len(original),
        "before": figures(base, year_first_test, original),
        "after": {},
    }
    for name, groups in VARIANTS.items():
        out = root / name
        extra = ["--set", f"train.freeze={json.dumps(groups)}"] if groups else []
        seconds = aiayn("train", str(config_path), "--init-from", str(base), "--out", str(out), *extra)
        results = json.loads((out / "results.json").read_text())
        report["after"][name] = {
            "freeze": groups,
            "trainable_params": results["trainable_params"],
            "params": results["params"],
            "steps": results["steps"],
            "train_minutes": round(results["train_minutes"], 2),
            "command_seconds": round(seconds, 1),
        } | figures(out, year_first_test, original)
    report["cpu_model"] = cpu_model()
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    shown = {k: v for k, v in report.items() if k not in ("finetune_train",)}
    print(json.dumps(shown, indent=2))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
