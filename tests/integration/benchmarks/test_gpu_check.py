"""benchmarks/gpu_check.sh runs end to end on a CPU with tiny settings, so that an hour on a GPU
is spent measuring: the throughput table (fp32 eager, bf16 compiled: tokens/s, MFU with its peak)
and a short `auto` run, every figure in the one JSON file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]

TINY_RUN = {
    "data": {"task": "copy", "seed": 3, "num_train": 200, "num_valid": 20, "num_test": 10,
             "tokenizer": "char", "max_sentence_tokens": 20},
    "model": {"preset": "tiny", "dropout": "auto", "max_len": 48},
    "train": {"max_minutes": 0.02, "max_steps": 3, "batch_tokens": 300, "eval_every": 3, "threads": 1,
              "precision": "fp32", "compile": "false", "test_beam": 1, "bleu_max_sentences": 10},
}


def test_the_gpu_check_runs_on_a_cpu_with_tiny_settings(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY_RUN))
    out = tmp_path / "gpu_check.json"
    env = os.environ | {
        "PY": sys.executable, "WORK": str(tmp_path / "work"), "PRESETS": "tiny", "BATCHES": "120 240",
        "STEPS": "1", "BACKEND": "eager", "PEAK_SIZE": "64", "VOCAB": "64", "MINUTES": "0.02",
        "CONFIG": str(config), "AIAYN_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
    }
    finished = subprocess.run(["bash", "benchmarks/gpu_check.sh", str(out)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=240)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    figures = json.loads(out.read_text())
    for batch in ("120", "240"):
        row = figures["throughput"]["tiny"][batch]
        for mode in ("fp32_eager", "bf16_compiled"):
            assert row[mode]["tokens_per_s"] > 0 and row[mode]["mfu"] > 0
            assert row[mode]["peak_source"] == "measured torch.mm 64x64"
        assert row["bf16_over_fp32"] > 0
    assert "MFU" in finished.stdout and "TFLOP/s (measured torch.mm 64x64)" in finished.stdout
    auto = figures["auto"]
    assert auto["steps"] == 3 and auto["test_bleu"] is not None and auto["precision"] == "fp32"
    assert auto["expected_updates"]["reached"] == 3 and "model.dropout" in auto["auto_settings"]
    assert auto["validation_share"] >= 0 and "aiayn train" in auto["command"]
