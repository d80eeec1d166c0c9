"""The Multi30k benchmark pipeline (`benchmarks/multi30k.sh`), in a quick version.

The real script end to end, on the raw `.gz` files: BPE, a tiny model for 200 steps,
checkpoint averaging, beam-4 model and length-penalty selection on 50
validation sentences, evaluation of the first 50 test sentences, the curve and the
results JSON. Skipped when the data is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.data.paths import data_root

REPO = Path(__file__).resolve().parents[2]
QUICK = {
    "model.preset": "tiny", "model.dropout": 0.1, "model.max_len": 64,
    "data.vocab_size": 2000, "data.max_sentence_tokens": 40,
    "train.max_steps": 200, "train.warmup": 40, "train.lr": 0.002, "train.batch_tokens": 1500,
    "train.eval_every": 100, "train.bleu_max_sentences": 20, "train.test_max_sentences": 20,
    "train.threads": 1,
}


@pytest.mark.data
@pytest.mark.skipif(not (data_root() / "multi30k" / "train.de.gz").is_file(), reason="Multi30k absent")
def test_quick_multi30k_pipeline_writes_the_results_json(tmp_path):
    overrides = [arg for key, value in QUICK.items() for arg in ("--set", f"{key}={value}")]
    env = os.environ | {
        "AIAYN": str(Path(sys.executable).parent / "aiayn"),
        "PY": sys.executable,
        "RUN": str(tmp_path / "run"),
        "OUT": str(tmp_path / "results"),
        "TEST_LINES": "50",
        "ALPHAS": "0.6 1.0",
        "AIAYN_DATA_DIR": str(data_root()),
    }
    done = subprocess.run(
        ["bash", str(REPO / "benchmarks" / "multi30k.sh"), "de", "en", "5", *overrides],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    figures = json.loads((tmp_path / "results" / "multi30k_de_en.json").read_text())
    for key in ("bleu", "chrf", "signature", "train_minutes", "params", "command", "bleu_lowercase"):
        assert key in figures, key
    assert figures["signature"].startswith("nrefs:1|case:mixed") and "tok:13a" in figures["signature"]
    assert figures["steps"] == 200 and figures["test_sentences"] == 50 and len(figures["samples"]) == 10
    # The settings as the run used them: the recipe's shares of the run, the dropout given here.
    assert figures["settings"] == {"dropout": 0.1, "warmup": 40, "eval_every": 100, "threads": 1,
                                   "batch_tokens": 1500, "average_tail": "20%"}
    assert 0 <= figures["epochs"] <= 1  # 200 steps: about one epoch at most
    # What the machine was and did: CPU, chosen precision, the final learning rate (the cosine
    # schedule's minimum at max_steps), the training process's peak memory and system-time share.
    assert figures["cpu_model"] and figures["precision"] in ("fp32", "bf16")
    assert figures["final_lr"] == pytest.approx(2e-5)  # configs/multi30k_de_en.yaml: min_lr
    assert 0.2 < figures["peak_rss_gb"] < 16 and 0.0 <= figures["sys_time_fraction"] < 1.0
    process = json.loads((tmp_path / "run" / "train_process.json").read_text())
    assert process["totals"]["peak_rss_gb"] == figures["peak_rss_gb"] and process["samples"]
    assert figures["command"].startswith("benchmarks/multi30k.sh de en 5 --set model.preset=tiny")
    # The model and length penalty are chosen on validation BLEU, never on the test set.
    selection = figures["val_bleu_by_model_and_alpha"]
    assert set(selection) == {"best_alpha0.6", "best_alpha1.0", "averaged_alpha0.6", "averaged_alpha1.0"}
    chosen = max(selection, key=selection.get)
    assert chosen == f"{figures['model']}_alpha{figures['alpha']}"
    test_of_chosen = figures["bleu_best_checkpoint" if figures["model"] == "best" else "bleu_averaged"]
    assert figures["bleu"] == test_of_chosen
    assert (tmp_path / "results" / "multi30k_de_en_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "run" / "averaged" / "model.safetensors").is_file()
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in metrics if row["split"] == "val"]
    assert len(losses) == 2 and losses[1] < losses[0]
