"""Figures of the Tatoeba runs (benchmarks/tatoeba_grid.sh, benchmarks/peers/joeynmt.sh).

    python benchmarks/tatoeba_summary.py record RUN_DIR OUT.json --command "..." [--label K=V ...]
    python benchmarks/tatoeba_summary.py summary RESULTS_DIR     # -> RESULTS_DIR/tatoeba_summary.json

`record` keeps what a run's `results.json` and `train_config.yaml` say: test BLEU (sacreBLEU, cased,
13a; the run's own final beam search on its test set, Tatoeba-Challenge test_v2020) and chrF, the
settings as used (the `auto` ones as chosen, with their reasons), speed, steps, epochs, and the
validation curve against minutes (from metrics.jsonl). `summary` reads the grid points and the
`auto` runs and applies the issue's pass rule: on each corpus, `auto` >= the best grid point -
max(0.5, 2 x the seed spread) in test BLEU, the seed spread being the difference between the two
seeds of the best grid point.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from aiayn.core.files import atomic_write_text
from aiayn.training.run import cpu_model


def curve(run: Path) -> list[dict[str, float]]:
    """Validation BLEU and loss against minutes of the run."""
    points = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("split") == "val":
            points.append({"minutes": round(record["elapsed_s"] / 60, 2), "step": record["step"],
                           "bleu": record.get("bleu"), "loss": record["loss"]})
    return points


def record(run: Path, out: Path, command: str, labels: dict[str, str]) -> dict[str, Any]:
    results = json.loads((run / "results.json").read_text())
    config = yaml.safe_load((run / "train_config.yaml").read_text())
    test = results.get("test") or {}
    figures = {
        **labels,
        "bleu": test.get("bleu"), "chrf": test.get("chrf"), "signature": test.get("signature"),
        "test_split": test.get("split"), "test_file": config["data"]["test_tgt"],
        "settings": {
            "preset": config["model"]["preset"], "vocab_size": config["data"]["vocab_size"],
            "dropout": config["model"].get("dropout"), "batch_tokens": config["train"]["batch_tokens"],
            "warmup": config["train"]["warmup"], "eval_every": config["train"]["eval_every"],
            "bleu_max_sentences": config["train"]["bleu_max_sentences"], "seed": config["train"]["seed"],
            "threads": config["train"]["threads"], "max_minutes": config["train"]["max_minutes"],
        },
        "auto_settings": results.get("auto_settings", {}),
        "steps": results["steps"], "epochs": results["epochs"], "train_minutes": results["train_minutes"],
        "tokens_per_s": results["tokens_per_s"], "precision": results["precision"],
        "params": results["params"],
        "curve": curve(run), "examples": results.get("examples", [])[:5],
        "cpu_model": cpu_model(), "command": command,
    }
    atomic_write_text(out, json.dumps(figures, indent=2, ensure_ascii=False) + "\n")
    return figures


def passes(auto_bleu: float, best_bleu: float, spread: float) -> bool:
    """The issue's rule: `auto` within max(0.5, 2 x the seed spread) of the best grid point."""
    return auto_bleu >= best_bleu - max(0.5, 2 * spread)


def summary(results_dir: Path) -> dict[str, Any]:
    def load(pattern: str) -> dict[str, dict[str, Any]]:
        return {p.stem: json.loads(p.read_text()) for p in sorted(results_dir.glob(pattern))}

    grid = {name: r for name, r in load("tatoeba_en_es_grid_*.json").items() if r["settings"]["seed"] == 1}
    seeds = {name: r for name, r in load("tatoeba_en_es_grid_*.json").items() if r["settings"]["seed"] != 1}
    if not grid:
        raise SystemExit(f"no grid points (tatoeba_en_es_grid_*.json) in {results_dir}")
    best_name = max(grid, key=lambda name: grid[name]["bleu"])
    best = grid[best_name]
    second = [r for r in seeds.values() if r["settings"]["preset"] == best["settings"]["preset"]
              and r["settings"]["vocab_size"] == best["settings"]["vocab_size"]]
    spread = abs(best["bleu"] - second[0]["bleu"]) if second else None
    # the other runs the summary judges by; a result file beside them (another machine's) is not one
    others = {name: json.loads(path.read_text())
              for name in ("en_es_auto", "en_fr_auto", "en_fr_best_grid_point")
              if (path := results_dir / f"tatoeba_{name}.json").is_file()}
    every_run = [*grid.values(), *seeds.values(), *others.values()]
    out: dict[str, Any] = {
        # the machines the summarised runs were measured on (each result file records its own)
        "cpu_model": sorted({r["cpu_model"] for r in every_run if r.get("cpu_model")}),
        "grid": {name: {"bleu": r["bleu"], "chrf": r["chrf"], **r["settings"]} for name, r in grid.items()},
        "best": best_name, "best_bleu": best["bleu"],
        "second_seed_bleu": second[0]["bleu"] if second else None, "seed_spread": spread,
        "margin": max(0.5, 2 * spread) if spread is not None else None,
    }
    for pair in ("es", "fr"):
        auto = others.get(f"en_{pair}_auto")
        if auto is None:
            continue
        reference = best if pair == "es" else others.get(f"en_{pair}_best_grid_point")
        reference_bleu = reference["bleu"] if reference is not None else None
        out[f"auto_en_{pair}"] = {
            "bleu": auto["bleu"], "chrf": auto["chrf"], "auto_settings": auto["auto_settings"],
            "reference_bleu": reference_bleu,
            "passes": None if None in (reference_bleu, spread) else passes(
                auto["bleu"], reference_bleu, spread),
        }
    atomic_write_text(results_dir / "tatoeba_summary.json", json.dumps(out, indent=2) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("run", type=Path)
    rec.add_argument("out", type=Path)
    rec.add_argument("--command", required=True)
    rec.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    summ = sub.add_parser("summary")
    summ.add_argument("results_dir", type=Path)
    args = parser.parse_args()
    if args.mode == "record":
        labels = dict(item.split("=", 1) for item in args.label)
        figures = record(args.run, args.out, args.command, labels)
        print(json.dumps({k: v for k, v in figures.items() if k not in ("curve", "examples")}, indent=2))
    else:
        print(json.dumps(summary(args.results_dir), indent=2))


if __name__ == "__main__":
    main()
