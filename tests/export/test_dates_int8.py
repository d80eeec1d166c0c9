"""A trained model: the session's `dates` run (tests/shared_dates.py; its special tokens sit at
the end of the vocabulary). Its int8 CTranslate2 export keeps >= 99% exact match on the
held-out dates, and its float32 export decodes exactly as aiayn does."""

from __future__ import annotations

import json

import pytest

from aiayn.export import export_ctranslate2
from aiayn.inference import CTranslate2Translator, load
from shared_dates import splits

pytestmark = pytest.mark.slow  # the shared run trains a model (a minute or two on two idle cores)


@pytest.fixture(scope="module")
def test_set():
    pairs = splits()["test"]
    return [source for source, _ in pairs], [target for _, target in pairs]


def exact_match(hypotheses: list[str], targets: list[str]) -> float:
    return sum(h == t for h, t in zip(hypotheses, targets, strict=True)) / len(targets)


def test_int8_export_keeps_exact_match(dates_run, test_set, tmp_path):
    sources, targets = test_set
    config = json.loads((dates_run / "config.json").read_text())["config"]
    assert min(config[k] for k in ("pad_id", "bos_id", "eos_id")) > 3  # the ids travel with it
    out = export_ctranslate2(dates_run, tmp_path / "int8", quantization="int8")
    engine = CTranslate2Translator(out, "cpu", threads=1)
    assert engine.runtime.compute_type == "int8_float32"
    assert exact_match(engine.translate(sources, beam=1), targets) >= 0.99
    assert exact_match(engine.translate(sources, beam=4), targets) >= 0.99


def test_float32_export_decodes_exactly_as_aiayn(dates_run, test_set, tmp_path):
    sources = test_set[0][:200]
    ours = load(dates_run, "cpu")
    engine = CTranslate2Translator(export_ctranslate2(dates_run, tmp_path / "f32"), "cpu", threads=1)
    for beam in (1, 4):
        expected = ours.translate_nbest(sources, 1, beam=beam, alpha=0.6)
        outputs = engine.translate_nbest(sources, 1, beam=beam, alpha=0.6)
        assert [h[0].tokens for h in outputs] == [h[0].tokens for h in expected]
        assert [h[0].score for h in outputs] == pytest.approx([h[0].score for h in expected], abs=1e-4)


def test_aiayn_int8_keeps_exact_match(dates_run, test_set):
    """aiayn's own int8 (`quantize="int8"`) on the trained dates model."""
    sources, targets = test_set
    engine = load(dates_run, "cpu", quantize="int8")
    assert exact_match(engine.translate(sources, beam=1), targets) >= 0.99
    assert exact_match(engine.translate(sources, beam=4), targets) >= 0.99
