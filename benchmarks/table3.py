"""Table 3 of the paper, rerun at Multi30k scale: each variation of the base model trained on
the same number of training tokens, beside the paper's own figures.

    python benchmarks/table3.py                       # every row not yet in the results file
    python benchmarks/table3.py --jobs 2              # two rows side by side, one thread each
    python benchmarks/table3.py --rows base A1 A32    # some rows only
    python benchmarks/table3.py --summary             # the table, the verdicts and the plot only
    python benchmarks/table3.py --print-commands   # each row's `aiayn train` command (docs/results/table3.md)

Base: the `small` preset on Multi30k de-en (d_model 256, 8 heads, d_k 32, 3+3 layers, d_ff 1024,
P_drop 0.2, label smoothing 0.1, sinusoidal positions), seeds 1-8. Like the paper (Table 3, "all
metrics are on the English-to-German translation development set, newstest2013"), every row sees
the same training budget, not the same minutes: `train.max_steps` = BUDGET / `train.batch_tokens`
with the learning-rate schedule sized by steps (`train.schedule_follows_budget: false`, no
`train.max_minutes`), one validation at the end, and the final model is the one scored (the
paper: "no checkpoint averaging"). Figures per row: validation perplexity per subword token
(unsmoothed, from the run's last validation), validation and test BLEU (beam 4, alpha 0.6),
parameters, training FLOPs (6 x parameters x target tokens), minutes, and `cpu_model`.

The verdict rule, fixed before any run: a row differs from base when its validation BLEU differs
from the mean of the base seeds by more than 2 x their standard deviation; otherwise "within
noise". "The paper's conclusion holds at this scale" then reads yes (the difference has the sign
the paper found, or the paper found no difference and neither do we), no, or within noise.

The results file (`benchmarks/results/table3.json`) is written after each row, atomically; rows
already in it are skipped (`--retry-failed` reruns the failed ones), so the table can be filled
over several sittings. A row whose training exits with an error, or whose perplexity or BLEU is
not finite, is recorded with `status: failed` and its reason.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "table3.json"
PLOT = REPO / "benchmarks" / "results" / "table3.png"

BATCH_TOKENS = 1500
"""Padded positions per batch, as the one-thread Multi30k recipe uses them."""

BUDGET_POSITIONS = 3_600_000
"""Batch positions every row trains on (2,400 steps of 1,500): about 3.3M target tokens, more
than half of the 6.4M the one-thread 60-minute recipe sees (benchmarks/RESULTS.md)."""

BASE_SETTINGS: dict[str, Any] = {
    "model.preset": "small", "model.dropout": 0.2, "train.label_smoothing": 0.1,
    "train.schedule": "cosine", "train.lr": 1.0e-3, "train.min_lr": 2.0e-5, "train.warmup": "6%",
    "train.schedule_follows_budget": False, "train.max_minutes": None,
    "train.validation_metric": "loss", "train.keep_checkpoints": 1, "train.progress": "none",
    "train.threads": 1, "train.precision": "fp32",
}  # fmt: skip
"""Settings every row shares. `train.precision` is fixed, not `auto`: auto picks bf16 or fp32 by a
timing at start-up, which could differ between rows (and between the machines a table filled over
several sittings runs on), and fp32 computes the same on every CPU."""


@dataclass(frozen=True)
class PaperRow:
    """One row of the paper's Table 3 (newstest2013 dev set): perplexity, BLEU, and the direction
    of its BLEU against the paper's base (25.8): 'worse', 'better' or 'same' (within 0.1)."""

    setting: str
    ppl: float
    bleu: float

    @property
    def claim(self) -> str:
        difference = round(self.bleu - PAPER_BASE.bleu, 1)  # 25.7 - 25.8 is -0.1000...01 in floats
        return "same" if abs(difference) <= 0.1 else ("better" if difference > 0 else "worse")


PAPER_BASE = PaperRow("base: N=6, d_model 512, d_ff 2048, h=8, d_k=64, P_drop 0.1, eps_ls 0.1", 4.92, 25.8)


@dataclass(frozen=True)
class Row:
    """A variation of the base: `settings` on top of `BASE_SETTINGS`, and the paper's row it
    scales down (None for the base)."""

    name: str
    group: str
    description: str
    settings: dict[str, Any] = field(default_factory=dict)
    paper: PaperRow | None = None
    seed: int = 1


ROWS: tuple[Row, ...] = (
    Row("base", "base", "small preset, seed 1"),
    Row("base_seed2", "base", "small preset, seed 2", seed=2),
    Row("base_seed3", "base", "small preset, seed 3", seed=3),
    Row("base_seed4", "base", "small preset, seed 4", seed=4),
    Row("base_seed5", "base", "small preset, seed 5", seed=5),
    Row("base_seed6", "base", "small preset, seed 6", seed=6),
    Row("base_seed7", "base", "small preset, seed 7", seed=7),
    Row("base_seed8", "base", "small preset, seed 8", seed=8),
    Row("A1", "A", "1 head, d_k 256", {"model.num_heads": 1}, PaperRow("h=1, d_k=512", 5.29, 24.9)),
    Row("A4", "A", "4 heads, d_k 64", {"model.num_heads": 4}, PaperRow("h=4, d_k=128", 5.00, 25.5)),
    Row("A16", "A", "16 heads, d_k 16", {"model.num_heads": 16}, PaperRow("h=16, d_k=32", 4.91, 25.8)),
    Row("A32", "A", "32 heads, d_k 8", {"model.num_heads": 32}, PaperRow("h=32, d_k=16", 5.01, 25.4)),
    Row("B16", "B", "d_k 16 at 8 heads", {"model.head_dim": 16}, PaperRow("d_k=32", 5.01, 25.4)),
    Row("C_N1", "C", "N=1", {"model.num_encoder_layers": 1, "model.num_decoder_layers": 1},
        PaperRow("N=2", 6.11, 23.7)),
    Row("C_N2", "C", "N=2", {"model.num_encoder_layers": 2, "model.num_decoder_layers": 2},
        PaperRow("N=4", 5.19, 25.3)),
    Row("C_dff512", "C", "d_ff 512", {"model.d_ff": 512}, PaperRow("d_ff=1024", 5.12, 25.4)),
    Row("C_dff2048", "C", "d_ff 2048", {"model.d_ff": 2048}, PaperRow("d_ff=4096", 4.75, 26.2)),
    Row("C_dmodel512", "C", "d_model 512, d_k 64", {"model.d_model": 512},
        PaperRow("d_model=1024, d_k=128", 4.66, 26.0)),
    Row("D_dropout0", "D", "P_drop 0", {"model.dropout": 0.0}, PaperRow("P_drop=0.0", 5.77, 24.6)),
    Row("D_ls0", "D", "label smoothing 0", {"train.label_smoothing": 0.0},
        PaperRow("eps_ls=0.0", 4.67, 25.3)),
    Row("E_learned", "E", "learned positions", {"model.positional": "learned"},
        PaperRow("positional embedding instead of sinusoids", 4.92, 25.7)),
)  # fmt: skip
"""The rows, each scaled from the paper's row by the same factor as our base from the paper's."""


@dataclass(frozen=True)
class Budget:
    """What every row trains on: `max_steps` x `batch_tokens` batch positions."""

    positions: int
    batch_tokens: int

    @property
    def max_steps(self) -> int:
        return max(1, self.positions // self.batch_tokens)

    def title(self) -> str:
        return (f"{self.positions:,} batch positions per row ({self.max_steps:,} steps of "
                f"{self.batch_tokens:,})")


def format_value(value: Any) -> str:
    """A setting as `--set` parses it (YAML)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def train_command(row: Row, budget: Budget, config: str, out: Path, extra: dict[str, Any]) -> list[str]:
    """The `aiayn train` command of one row (what the docs print for reproducing it)."""
    settings = {
        **BASE_SETTINGS, **extra, "train.max_steps": budget.max_steps, "train.eval_every": budget.max_steps,
        "train.batch_tokens": budget.batch_tokens, "train.seed": row.seed, **row.settings,
    }
    command = ["aiayn", "train", config, "--out", str(out), "--overwrite"]
    for key, value in settings.items():
        command += ["--set", f"{key}={format_value(value)}"]
    return command


def repo_relative(path: str | Path) -> str:
    """`path` relative to the repository when inside it (commands that run from its root)."""
    absolute = Path(os.path.abspath(path))  # not resolved: configs/ may be a link into src/
    return str(absolute.relative_to(REPO)) if absolute.is_relative_to(REPO) else str(path)


def command_listing(rows: list[Row], budget: Budget, config: str, runs: Path, extra: dict[str, Any]) -> str:
    """Every row's `aiayn train` command, one per line after a `# name: description` comment, with
    paths relative to the repository (what docs/results/table3.md shows, and its test compares)."""
    lines = [f"# {budget.title()}"]
    for row in rows:
        out = Path(repo_relative(runs)) / row.name
        command = train_command(row, budget, repo_relative(config), out, extra)
        lines += [f"# {row.name}: {row.description}", shlex.join(command)]
    return "\n".join(lines)


def last_validation(run: Path) -> dict[str, Any]:
    """The run's last validation record (`metrics.jsonl`, split 'val')."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    validations = [r for r in records if r.get("split") == "val"]
    if not validations:
        raise RuntimeError(f"{run}/metrics.jsonl has no validation record")
    return validations[-1]


def evaluate(run: Path, splits: dict[str, tuple[Path, Path]], device: str = "auto") -> dict[str, float]:
    """BLEU of the run's model on each split, beam 4 and alpha 0.6 (as `aiayn evaluate`), on
    `device` ('auto': a GPU when there is one, as training chose)."""
    import torch

    from aiayn import load
    from aiayn.data.corpus import read_lines
    from aiayn.training.device import select_device
    from aiayn.translation.evaluate import evaluate_translation

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one row, one core: rows run side by side
    try:
        translator = load(str(run), str(select_device(device)), task="translation")
        bleu = {}
        for split, (source, reference) in splits.items():
            sources, references = read_lines(source), read_lines(reference)
            bleu[split] = evaluate_translation(translator, sources, references, beam=4, alpha=0.6).bleu.score
        return bleu
    finally:
        torch.set_num_threads(threads)


@dataclass
class Plan:
    """Where and how the rows run."""

    budget: Budget
    config: str
    runs: Path
    results: Path
    splits: dict[str, tuple[Path, Path]]  # "val"/"test" -> (source file, reference file)
    extra: dict[str, Any] = field(default_factory=dict)  # settings every row adds (tests: tiny preset)
    device: str = "auto"  # where each row trains (`train.device`) and is scored


def run_row(row: Row, plan: Plan) -> dict[str, Any]:
    """Train and score one row; a failure is a result too (`status: failed`, `reason`)."""
    from aiayn.training.run import cpu_model

    run = plan.runs / row.name
    command = train_command(row, plan.budget, plan.config, run, plan.extra)
    shown = train_command(row, plan.budget, repo_relative(plan.config), Path(repo_relative(run)), plan.extra)
    figures: dict[str, Any] = {  # the command as run from the repository's root, on any machine
        "group": row.group, "description": row.description, "seed": row.seed,
        "settings": row.settings, "command": shlex.join(shown), "cpu_model": cpu_model(),
    }
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "aiayn", *command[1:]], capture_output=True, text=True)
    figures["minutes"] = (time.perf_counter() - started) / 60
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return figures | {"status": "failed", "reason": lines[-1] if lines else f"exit {done.returncode}"}
    results = json.loads((run / "results.json").read_text())
    validation = last_validation(run)
    tokens = int(results["target_tokens"])
    figures |= {
        "params": int(results["params"]), "target_tokens": tokens, "steps": int(results["steps"]),
        "train_flops": 6 * int(results["params"]) * tokens, "precision": results["precision"],
        "val_ppl": float(validation["ppl"]),
        "device": results.get("gpu") or "cpu",
    }
    for split, bleu in evaluate(run, plan.splits, plan.device).items():
        figures[f"{split}_bleu"] = bleu
    bad = [key for key in ("val_ppl", *(f"{s}_bleu" for s in plan.splits)) if not math.isfinite(figures[key])]
    if bad:
        return figures | {"status": "failed", "reason": f"not finite: {', '.join(bad)}"}
    return figures | {"status": "done"}


def load_results(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {"rows": {}}


def save_results(path: Path, results: dict[str, Any]) -> None:
    """Write atomically: a killed run leaves the previous file, never half of one. The verdicts
    (the base seeds' mean and standard deviation, each row's difference) are derived again."""
    results["verdicts"] = verdicts(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(tmp, path)


def pending(rows: list[Row], results: dict[str, Any], retry_failed: bool) -> list[Row]:
    """The rows still to run: not in the results, or failed there when `retry_failed`."""
    statuses = {name: row.get("status") for name, row in results["rows"].items()}
    return [r for r in rows if statuses.get(r.name) not in ({"done"} if retry_failed else {"done", "failed"})]


def run_rows(
    rows: list[Row], plan: Plan, jobs: int, retry_failed: bool = False,
    runner: Callable[[Row, Plan], dict[str, Any]] = run_row,
) -> dict[str, Any]:
    """Run every pending row (`jobs` at a time), saving the results file after each."""
    results = load_results(plan.results)
    results["budget"] = {"positions": plan.budget.positions, "batch_tokens": plan.budget.batch_tokens,
                         "max_steps": plan.budget.max_steps, "title": plan.budget.title()}
    lock = threading.Lock()

    def one(row: Row) -> None:
        print(f"table3: {row.name} ({row.description}) ...", flush=True)
        figures = runner(row, plan)
        with lock:
            results["rows"][row.name] = figures
            save_results(plan.results, results)
        print(f"table3: {row.name}: {figures['status']}", flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, pending(rows, results, retry_failed)))
    save_results(plan.results, results)
    return results


def verdicts(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each scored row's difference from the base mean (validation BLEU) and the verdict rule."""
    done = {name: row for name, row in results["rows"].items() if row.get("status") == "done"}
    base = [row["val_bleu"] for row in done.values() if row["group"] == "base"]
    if len(base) < 2:
        return {}
    mean, spread = statistics.mean(base), statistics.stdev(base)
    out: dict[str, dict[str, Any]] = {"base": {"mean": mean, "stdev": spread, "seeds": len(base)}}
    by_name = {row.name: row for row in ROWS}
    for name, row in done.items():
        paper = by_name[name].paper if name in by_name else None
        if paper is None:
            continue
        difference = row["val_bleu"] - mean
        if abs(difference) <= 2 * spread:
            holds = "yes" if paper.claim == "same" else "within noise"
        else:
            ours = "better" if difference > 0 else "worse"
            holds = "yes" if ours == paper.claim else "no"
        out[name] = {"difference": difference, "paper_difference": paper.bleu - PAPER_BASE.bleu,
                     "paper_claim": paper.claim, "holds": holds}
    return out


def markdown(results: dict[str, Any]) -> str:
    """The table for RESULTS.md: ours beside the paper's, with the verdict column."""
    judged = verdicts(results)
    by_name = {row.name: row for row in ROWS}
    lines = [
        f"Budget: {results.get('budget', {}).get('title', '?')}. Paper: Table 3 (newstest2013 dev).",
        "",
        "| row | variation | params | train FLOPs | val PPL | val BLEU | vs base | test BLEU | minutes "
        "| device | paper row | paper PPL | paper BLEU | paper's conclusion holds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = {row.name: i for i, row in enumerate(ROWS)}  # the paper's order, whatever finished first
    for name, row in sorted(results["rows"].items(), key=lambda item: order.get(item[0], len(order))):
        paper = by_name[name].paper if name in by_name else None
        if row.get("status") != "done":
            lines.append(f"| {name} | {row['description']} | failed: {row.get('reason', '?')} ||||||||||||")
            continue
        difference = f"{judged[name]['difference']:+.2f}" if name in judged and name != "base" else ""
        if paper:
            paper_cells = f"{paper.setting} | {paper.ppl:.2f} | {paper.bleu:.1f}"
        elif name == "base":
            paper_cells = f"{PAPER_BASE.setting} | {PAPER_BASE.ppl:.2f} | {PAPER_BASE.bleu:.1f}"
        else:  # the other base seeds
            paper_cells = " | | "
        lines.append(
            f"| {name} | {row['description']} | {row['params'] / 1e6:.1f}M | {row['train_flops']:.2g} | "
            f"{row['val_ppl']:.2f} | "
            f"{row['val_bleu']:.2f} | {difference} | {row['test_bleu']:.2f} | {row['minutes']:.0f} | "
            f"{row.get('device', 'cpu')} | {paper_cells} | "
            f"{judged.get(name, {}).get('holds', '')} |"
        )
    if "base" in judged:
        base = judged["base"]
        lines += ["", f"Base: mean validation BLEU {base['mean']:.2f}, standard deviation "
                      f"{base['stdev']:.2f} over {base['seeds']} seeds; a row differs when |difference| > "
                      f"{2 * base['stdev']:.2f}."]
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    """Bars: each row's validation BLEU minus the base mean, beside the paper's difference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    judged = {name: v for name, v in verdicts(results).items() if name != "base"}
    if not judged:
        return
    names = [row.name for row in ROWS if row.name in judged]  # the paper's order
    x = range(len(names))
    fig, ax = plt.subplots(figsize=(max(6, len(names) * 0.7), 4))
    ours = [judged[n]["difference"] for n in names]
    theirs = [judged[n]["paper_difference"] for n in names]
    ax.bar([i - 0.2 for i in x], ours, 0.4, label="aiayn (Multi30k de-en)")
    ax.bar([i + 0.2 for i in x], theirs, 0.4, label="paper (newstest2013)")
    spread = 2 * verdicts(results)["base"]["stdev"]
    ax.axhspan(-spread, spread, color="grey", alpha=0.2, label="within noise (2 sd of base seeds)")
    ax.set_xticks(list(x), names, rotation=45, ha="right")
    ax.set_ylabel("BLEU difference from base")
    ax.set_title(results.get("budget", {}).get("title", ""), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def multi30k_splits(data_root: Path, lines: int | None, into: Path) -> dict[str, tuple[Path, Path]]:
    """val and test_2016_flickr, de -> en, unzipped into `into` (the first `lines` lines)."""
    import gzip

    into.mkdir(parents=True, exist_ok=True)
    splits = {}
    for name, split in (("val", "val"), ("test", "test_2016_flickr")):
        pair = []
        for lang in ("de", "en"):
            with gzip.open(data_root / "multi30k" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                text = f.read()
            kept = text.splitlines()[:lines] if lines else text.splitlines()
            path = into / f"{split}.{lang}"
            path.write_text("\n".join(kept) + "\n", encoding="utf-8")
            pair.append(path)
        splits[name] = (pair[0], pair[1])
    return splits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", choices=[r.name for r in ROWS], help="default: every row")
    parser.add_argument("--jobs", type=int, default=1, help="rows side by side (one thread each)")
    parser.add_argument("--positions", type=int, default=BUDGET_POSITIONS, help="batch positions per row")
    parser.add_argument("--batch-tokens", type=int, default=BATCH_TOKENS)
    parser.add_argument("--config", default=str(REPO / "configs" / "multi30k_de_en.yaml"))
    parser.add_argument("--runs", type=Path, default=REPO / "benchmarks" / "runs" / "table3")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--plot", type=Path, default=PLOT)
    parser.add_argument("--test-lines", type=int, default=None, help="score only the first N val/test lines")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting every row adds (e.g. model.preset=tiny for a quick check)")
    parser.add_argument("--device", default="auto",
                        help="where rows train and are scored: auto (a GPU when there is one), cpu, cuda")
    parser.add_argument("--retry-failed", action="store_true", help="rerun the rows recorded as failed")
    parser.add_argument("--summary", action="store_true", help="print the table and draw the plot only")
    parser.add_argument("--print-commands", action="store_true",
                        help="print each row's `aiayn train` command (with --set and the budget) and exit")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.positions < 1 or args.batch_tokens < 1:
        parser.error("--jobs, --positions and --batch-tokens must be >= 1")
    extra = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set {item}: expected KEY=VALUE")
        extra[key] = value
    if args.device != "auto":
        extra["train.device"] = args.device
    rows = [r for r in ROWS if args.rows is None or r.name in args.rows]
    if args.print_commands:
        print(command_listing(rows, Budget(args.positions, args.batch_tokens), args.config, args.runs, extra))
        return 0
    if not args.summary:
        from aiayn.data.paths import data_root

        plan = Plan(
            Budget(args.positions, args.batch_tokens), args.config, args.runs, args.results,
            multi30k_splits(data_root(), args.test_lines, args.runs / "eval_data"), extra, args.device,
        )
        run_rows(rows, plan, args.jobs, args.retry_failed)
    results = load_results(args.results)
    if args.summary and results["rows"]:
        save_results(args.results, results)  # the verdicts, as the rule reads the rows now
    print(markdown(results))
    plot(results, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
