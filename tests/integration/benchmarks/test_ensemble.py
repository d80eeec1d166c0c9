"""benchmarks/ensemble.py on the session's trained dates model and a perturbed copy of it (the same
vocabulary), on the first sentences of its own splits: the results file's fields, and a system
given twice (A as the averaged model) gets the same alpha and scores."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from inference.ensemble_dirs import perturbed_copy
from shared_dates import splits

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow  # the shared dates run trains a model (a minute or two)


def load_script():
    spec = importlib.util.spec_from_file_location("ensemble_benchmark", REPO / "benchmarks" / "ensemble.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ensemble_benchmark"] = module
    spec.loader.exec_module(module)
    return module


def test_ensemble_benchmark_fields(dates_run, tmp_path, capsys):
    pairs = splits()
    files = []
    for split in ("valid", "test"):
        source, reference = tmp_path / f"{split}.src", tmp_path / f"{split}.ref"
        source.write_text("".join(s + "\n" for s, _ in pairs[split]), encoding="utf-8")
        reference.write_text("".join(t + "\n" for _, t in pairs[split]), encoding="utf-8")
        files += [str(source), str(reference)]
    other = perturbed_copy(dates_run, tmp_path / "other", scale=0.1)
    out = tmp_path / "ensemble.json"
    argv = ["--model", str(dates_run), "--model", str(other), "--averaged", str(dates_run),
            "--val-src", files[0], "--val-ref", files[1], "--test-src", files[2], "--test-ref", files[3],
            "--lines", "12", "--rounds", "2", "--alphas", "0.6", "1.0", "--out", str(out)]
    assert load_script().main(argv) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["cpu_model"] and results["threads"] == 1 and results["beam"] == 4
    assert results["command"].startswith("python benchmarks/ensemble.py --model")
    assert results["sets"]["test"]["sentences"] == 12 and results["sets"]["val"]["sentences"] == 12
    systems = results["systems"]
    assert set(systems) == {"A", "B", "ensemble", "averaged"}
    assert systems["ensemble"]["directory"] == [str(dates_run), str(other)]
    for system in systems.values():
        assert system["alpha"] in (0.6, 1.0) and set(system["val_bleu"]) == {"0.6", "1"}
        assert 0 <= system["test_bleu"] <= 100 + 1e-9  # sacreBLEU's 100 may have a last-bit excess
        assert "13a" in system["bleu_signature"]
    for name in ("A", "ensemble"):
        speed = systems[name]["speed"]
        assert len(speed["rounds"]) == 2
        assert min(speed["rounds"]) <= speed["sentences_per_second"] <= max(speed["rounds"])
    assert "speed" not in systems["B"]
    same = ("alpha", "val_bleu", "test_bleu", "test_chrf")
    assert {k: systems["averaged"][k] for k in same} == {k: systems["A"][k] for k in same}
    printed = capsys.readouterr().out
    assert "| ensemble |" in printed and "| averaged |" in printed
    # The check compares the ensemble's steps with A's and B's run apart: equal within 1e-5, and
    # far from the mean of their log-probabilities (the two models differ).
    check = results["mean_probability_check"]
    assert check["sentences"] == 12 and check["steps"] >= 12
    assert check["max_abs_difference"] < 1e-5
    assert check["max_abs_difference_from_mean_log_probs"] > 1e-2
