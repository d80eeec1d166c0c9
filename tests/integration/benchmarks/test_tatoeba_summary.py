"""benchmarks/tatoeba_summary.py's pass rule (issue 43): `auto` >= the best grid point -
max(0.5, 2 x the seed spread), on en-es against the best seed-1 grid point, on en-fr against the
best en-es point's settings trained on en-fr."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def load_script():
    path = REPO / "benchmarks" / "tatoeba_summary.py"
    spec = importlib.util.spec_from_file_location("tatoeba_summary", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["tatoeba_summary"] = module
    spec.loader.exec_module(module)
    return module


summary_script = load_script()


def point(directory: Path, name: str, bleu: float, preset: str = "small", vocab: int = 8000, seed: int = 1,
          cpu: str = "CPU X"):
    figures = {"name": name, "bleu": bleu, "chrf": bleu + 20, "auto_settings": {}, "cpu_model": cpu,
               "settings": {"preset": preset, "vocab_size": vocab, "seed": seed}}  # fmt: skip
    (directory / f"tatoeba_{name}.json").write_text(json.dumps(figures))


def test_the_margin_is_half_a_point_or_twice_the_seed_spread() -> None:
    assert summary_script.passes(34.5, 35.0, spread=0.1)  # within 0.5
    assert not summary_script.passes(34.4, 35.0, spread=0.1)
    assert summary_script.passes(33.9, 35.0, spread=0.6)  # within 2 x 0.6
    assert not summary_script.passes(33.7, 35.0, spread=0.6)


def test_the_summary_judges_auto_on_each_corpus(tmp_path) -> None:
    point(tmp_path, "en_es_grid_small_8000_seed1", 34.9)
    point(tmp_path, "en_es_grid_small_16000_seed1", 33.0, vocab=16000)
    point(tmp_path, "en_es_grid_base_8000_seed1", 1.0, preset="base")
    point(tmp_path, "en_es_grid_small_8000_seed2", 35.5, seed=2)  # spread 0.6: margin 1.2
    point(tmp_path, "en_es_grid_small_16000_seed2", 20.0, vocab=16000, seed=2)  # not the best point's
    point(tmp_path, "en_es_auto", 33.8)
    point(tmp_path, "en_fr_best_grid_point", 30.0)
    point(tmp_path, "en_fr_auto", 28.7)
    point(tmp_path, "en_es_auto_h100", 39.0, cpu="GPU host")  # a run beside the grid: not summarised
    out = summary_script.summary(tmp_path)
    assert out["best"] == "tatoeba_en_es_grid_small_8000_seed1" and out["best_bleu"] == 34.9
    assert out["cpu_model"] == ["CPU X"]
    assert out["seed_spread"] == pytest.approx(0.6) and out["margin"] == pytest.approx(1.2)
    points = ("small_8000", "small_16000", "base_8000")
    assert set(out["grid"]) == {f"tatoeba_en_es_grid_{p}_seed1" for p in points}
    assert out["auto_en_es"]["reference_bleu"] == 34.9 and out["auto_en_es"]["passes"] is True
    assert out["auto_en_fr"]["reference_bleu"] == 30.0 and out["auto_en_fr"]["passes"] is False
    assert json.loads((tmp_path / "tatoeba_summary.json").read_text()) == out


def test_without_a_second_seed_there_is_no_verdict(tmp_path) -> None:
    point(tmp_path, "en_es_grid_small_8000_seed1", 34.9)
    point(tmp_path, "en_es_auto", 34.0)
    out = summary_script.summary(tmp_path)
    assert out["seed_spread"] is None and out["auto_en_es"]["passes"] is None
