"""benchmarks/table3.py's planning on a two-row, few-step budget (tiny preset, the dates task):
the results file's fields, the resume, a failed row recorded as failed, and the verdict rule."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from aiayn.data.synthetic import make_task

REPO = Path(__file__).resolve().parents[3]


def load_script():
    spec = importlib.util.spec_from_file_location("table3", REPO / "benchmarks" / "table3.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["table3"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


table3 = load_script()


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> table3.Plan:
    root = tmp_path_factory.mktemp("table3")
    splits = {}
    pairs = make_task("dates", 7, 0, 20, 20)
    for split, key in (("val", "valid"), ("test", "test")):
        source, reference = root / f"{split}.src", root / f"{split}.ref"
        source.write_text("".join(s + "\n" for s, _ in pairs[key]))
        reference.write_text("".join(t + "\n" for _, t in pairs[key]))
        splits[split] = (source, reference)
    extra = {"model.preset": "tiny", "model.max_len": 72, "data.num_train": 400, "data.num_valid": 20,
             "data.num_test": 20, "train.bleu_max_sentences": 20, "train.test_beam": 1,
             "model.d_model": 32, "model.num_heads": 2, "model.d_ff": 64, "train.precision": "fp32"}
    config = str(REPO / "src" / "aiayn" / "configs" / "dates.yaml")
    budget = table3.Budget(6 * 200, 200)
    return table3.Plan(budget, config, root / "runs", root / "table3.json", splits, extra)


def rows(*names: str) -> list[table3.Row]:
    return [row for row in table3.ROWS if row.name in names]


def test_rows_run_record_every_figure_and_resume(plan: table3.Plan) -> None:
    results = table3.run_rows(rows("base", "A1"), plan, jobs=2)
    saved = json.loads(plan.results.read_text())
    assert saved == results
    assert saved["budget"]["max_steps"] == 6
    assert set(saved["rows"]) == {"base", "A1"}
    assert saved["verdicts"] == {}  # one base seed: no spread to judge by
    for name, row in saved["rows"].items():
        assert row["status"] == "done", row
        for key in ("val_ppl", "val_bleu", "test_bleu", "params", "train_flops", "minutes", "cpu_model",
                    "device"):
            assert key in row, (name, key)
        assert row["train_flops"] == 6 * row["params"] * row["target_tokens"]
        assert math.isfinite(row["val_ppl"]) and row["val_ppl"] > 1
        assert "--set train.max_steps=6" in row["command"]
        assert "train.schedule_follows_budget=false" in row["command"]
        assert "train.precision=fp32" in row["command"]
        assert "train.max_minutes=null" in row["command"]
    # Each row trains its own variation: A1's one head replaces the plan's two, the base keeps them.
    assert "--set model.num_heads=1 " in saved["rows"]["A1"]["command"]
    assert "--set model.num_heads=2 " in saved["rows"]["base"]["command"]

    # Resume: the finished rows are skipped; only the new one runs.
    ran: list[str] = []

    def runner(row: table3.Row, plan: table3.Plan) -> dict:
        ran.append(row.name)
        return {"group": row.group, "description": row.description, "status": "failed",
                "reason": "not finite: val_ppl", "val_ppl": float("nan")}

    table3.run_rows(rows("base", "A1", "E_learned"), plan, jobs=1, runner=runner)
    assert ran == ["E_learned"]
    saved = json.loads(plan.results.read_text())
    assert saved["rows"]["E_learned"]["status"] == "failed"  # recorded, not dropped
    assert saved["rows"]["base"]["status"] == "done"
    # A failed row stays failed (and skipped) unless asked to retry.
    ran.clear()
    table3.run_rows(rows("E_learned"), plan, jobs=1, runner=runner)
    assert ran == []
    table3.run_rows(rows("E_learned"), plan, jobs=1, retry_failed=True, runner=runner)
    assert ran == ["E_learned"]
    assert "failed" in table3.markdown(saved)


def test_a_nan_from_a_real_row_is_recorded_as_failed(plan: table3.Plan, monkeypatch) -> None:
    monkeypatch.setattr(table3, "evaluate", lambda run, splits, device: {"val": float("nan"), "test": 1.0})
    figures = table3.run_row(rows("D_ls0")[0], plan)
    assert figures["status"] == "failed"
    assert "val_bleu" in figures["reason"]


def test_verdict_rule(tmp_path) -> None:
    def done(group: str, bleu: float) -> dict:
        return {"group": group, "status": "done", "val_bleu": bleu}

    results = {"rows": {
        "base": done("base", 30.0), "base_seed2": done("base", 30.2), "base_seed3": done("base", 29.8),
        "A1": done("A", 28.0),          # paper: worse; ours: worse beyond 2 sd (0.4)
        "A16": done("A", 30.3),         # paper: same; ours within noise
        "C_dff2048": done("C", 29.0),   # paper: better; ours: worse
        "E_learned": done("E", 31.0),   # paper: same; ours: better
        "D_ls0": done("D", 29.7),       # paper: worse; ours within noise
    }}  # fmt: skip
    judged = table3.verdicts(results)
    assert judged["base"]["stdev"] == pytest.approx(0.2)
    table3.save_results(tmp_path / "table3.json", results)
    assert json.loads((tmp_path / "table3.json").read_text())["verdicts"] == judged
    assert {name: v["holds"] for name, v in judged.items() if name != "base"} == {
        "A1": "yes", "A16": "yes", "C_dff2048": "no", "E_learned": "no", "D_ls0": "within noise",
    }


def test_the_papers_claims_read_to_a_tenth() -> None:
    """25.7 against the paper's 25.8 is "same" (E: "nearly identical"), not a float's -0.10000001."""
    assert table3.PaperRow("learned", 4.92, 25.7).claim == "same"
    assert table3.PaperRow("x", 4.92, 25.9).claim == "same"
    assert table3.PaperRow("x", 5.0, 25.6).claim == "worse"
    assert table3.PaperRow("x", 5.0, 26.0).claim == "better"
    assert {row.name: row.paper.claim for row in table3.ROWS if row.paper}["E_learned"] == "same"


def test_the_table_follows_the_papers_order_whatever_finished_first() -> None:
    def done(group: str, bleu: float) -> dict:
        return {"group": group, "description": "d", "status": "done", "val_bleu": bleu, "val_ppl": 8.0,
                "test_bleu": bleu, "params": 7_000_000, "train_flops": 1.4e14, "minutes": 3.0,
                "device": "cpu"}

    results = {"rows": {"E_learned": done("E", 30.0), "base_seed2": done("base", 30.2),
                        "base": done("base", 30.0), "A1": done("A", 28.0)}}
    table = table3.markdown(results).splitlines()
    rows_shown = [line for line in table if line.startswith("| ") and "---" not in line]
    names = [line.split(" | ")[0].removeprefix("| ") for line in rows_shown]
    assert names == ["row", "base", "base_seed2", "A1", "E_learned"]
    base, seed2 = (next(line for line in rows_shown if line.startswith(f"| {n} |"))
                   for n in ("base", "base_seed2"))
    assert "4.92 | 25.8" in base and "25.8" not in seed2  # the paper's base once, beside our seed 1


def set_overrides(command: list[str]) -> list[str]:
    """The KEY=VALUE of every `--set` of an `aiayn train` command."""
    return [command[i + 1] for i, word in enumerate(command) if word == "--set"]


@pytest.mark.parametrize("row", table3.ROWS, ids=[row.name for row in table3.ROWS])
def test_every_row_is_a_valid_multi30k_config(row: table3.Row) -> None:
    """What each printed command asks `aiayn train` for passes its config validation (B16's
    `model.head_dim` included), and says what the row varies."""
    from aiayn.tasks import load_config

    budget = table3.Budget(table3.BUDGET_POSITIONS, table3.BATCH_TOKENS)
    config_path = REPO / "configs" / "multi30k_de_en.yaml"
    command = table3.train_command(row, budget, str(config_path), Path("out"), {})
    config = load_config(config_path, set_overrides(command))
    assert config.train.max_steps == budget.max_steps and config.train.batch_tokens == table3.BATCH_TOKENS
    assert config.train.schedule_follows_budget is False and config.train.max_minutes is None
    assert config.model.preset == "small"
    for key, value in row.settings.items():
        section, name = key.split(".")
        got = config.model.overrides[name] if section == "model" else getattr(config.train, name)
        assert got == value, key


def docs_listing() -> str:
    """The command block of docs/results/table3.md (between its two `table3 commands` markers)."""
    page = (REPO / "docs" / "results" / "table3.md").read_text()
    block = page.split("<!-- table3 commands: begin -->")[1].split("<!-- table3 commands: end -->")[0]
    return block.strip().removeprefix("```sh").removesuffix("```").strip()


def test_the_docs_page_shows_the_scripts_commands(capsys) -> None:
    assert table3.main(["--print-commands"]) == 0
    printed = capsys.readouterr().out.strip()
    start = "\naiayn train configs/multi30k_de_en.yaml --out benchmarks/runs/table3/"
    assert printed.count(start) == len(table3.ROWS)
    assert "--set model.head_dim=16" in printed and "--set train.seed=3" in printed
    assert docs_listing() == printed, \
        "docs/results/table3.md: paste `python benchmarks/table3.py --print-commands`"
    assert table3.main(["--print-commands", "--rows", "A1"]) == 0
    assert "--set model.num_heads=1" in capsys.readouterr().out
