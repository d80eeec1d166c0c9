"""The CTranslate2 runtime computes what aiayn's PyTorch runtime computes: same tokens, same
scores (1e-4), through the one `aiayn.load`."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("ctranslate2", reason="needs the optional extra 'export'")
from aiayn.core.errors import CheckpointError
from aiayn.export import export_ctranslate2
from aiayn.inference import CTranslate2Generator, CTranslate2Translator, Generator, Translator, load
from export.helpers import LM_VARIANTS, SOURCES, TARGETS, VARIANTS, make_lm_dir, make_translation_dir

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dirs")
    make_translation_dir(root / "model", "post-sinusoidal-separate")
    make_lm_dir(root / "lm", "pre-learned")
    return root


@pytest.fixture(scope="module", params=VARIANTS)
def exported(request, tmp_path_factory):
    """(TorchTranslator, CTranslate2Translator) of one random tiny model per variant."""
    root = tmp_path_factory.mktemp(request.param)
    make_translation_dir(root / "model", request.param)
    export_ctranslate2(root / "model", root / "ct2")
    return load(root / "model", "cpu"), CTranslate2Translator(root / "ct2", "cpu", threads=1)


def test_load_picks_the_runtime_by_directory(model_dirs, tmp_path):
    """One `load` for both runtimes and both kinds of model; `task` refuses the other kind."""
    translation_ct2 = export_ctranslate2(model_dirs / "model", tmp_path / "ct2")
    lm_ct2 = export_ctranslate2(model_dirs / "lm", tmp_path / "lm-ct2")
    assert type(load(translation_ct2, "cpu")) is CTranslate2Translator
    assert type(load(lm_ct2, "cpu")) is CTranslate2Generator
    for directory, kind in ((model_dirs / "model", Translator), (translation_ct2, Translator),
                            (model_dirs / "lm", Generator), (lm_ct2, Generator)):
        loaded = load(directory, "cpu")
        assert isinstance(loaded, kind) and loaded.directory == directory
    with pytest.raises(CheckpointError, match="needs a language model"):
        load(translation_ct2, "cpu", task="lm")
    with pytest.raises(CheckpointError, match="needs a translation model"):
        load(lm_ct2, "cpu", task="translation")


def assert_same_nbest(ours, theirs):
    for sentence, (mine, engine) in enumerate(zip(ours, theirs, strict=True)):
        assert [h.tokens for h in engine] == [h.tokens for h in mine], f"sentence {sentence}"
        assert [h.score for h in engine] == pytest.approx([h.score for h in mine], abs=TOLERANCE)


@pytest.mark.parametrize("beam", [1, 4])
def test_same_outputs_and_scores_as_aiayn(exported, beam):
    ours, engine = exported
    settings = dict(beam=beam, alpha=0.0, max_len_extra=8)
    expected = ours.translate_nbest(SOURCES, beam, **settings)
    assert_same_nbest(expected, engine.translate_nbest(SOURCES, beam, **settings))
    assert any(h.tokens for hyps in expected for h in hyps)


def test_length_penalty_scores_are_aiayns_gnmt_formula(exported):
    """With alpha > 0 each returned score is log P(Y | X) / ((5 + |Y|) / 6)^alpha, |Y| with <eos>."""
    ours, engine = exported
    outputs = engine.translate_nbest(SOURCES[:4], 4, beam=4, alpha=0.6, max_len_extra=8)
    target = engine.tokenizers.target
    for source, hyps in zip(SOURCES[:4], outputs, strict=True):
        texts = target.decode_batch([h.tokens for h in hyps])
        assert texts == [h.text for h in hyps]
        raw = ours.score([source] * len(hyps), texts)
        for hyp, log_p, text in zip(hyps, raw, texts, strict=True):
            assert target.decode(target.encode(text)) == text  # characters round-trip
            ended = len(hyp.tokens) < len(source) + 1 + 8
            length = len(hyp.tokens) + 1 if ended else len(hyp.tokens)
            if ended:
                assert hyp.score == pytest.approx(log_p / ((5 + length) / 6) ** 0.6, abs=TOLERANCE)
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_forced_decoding_scores(exported):
    ours, engine = exported
    assert engine.score(SOURCES, TARGETS) == pytest.approx(ours.score(SOURCES, TARGETS), abs=TOLERANCE)


def test_translate_text_and_batching_do_not_change_outputs(exported):
    ours, engine = exported
    expected = ours.translate(SOURCES, beam=4, alpha=0.6, max_len_extra=8)
    assert engine.translate(SOURCES, beam=4, alpha=0.6, max_len_extra=8, batch_tokens=1) == expected
    assert engine.translate(SOURCES, beam=4, alpha=0.6, max_len_extra=8) == expected


@pytest.fixture(scope="module", params=LM_VARIANTS)
def exported_lm(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"lm-{request.param}")
    make_lm_dir(root / "model", request.param)
    export_ctranslate2(root / "model", root / "ct2")
    return load(root / "model", "cpu"), CTranslate2Generator(root / "ct2", "cpu", threads=1), root / "ct2"


def test_language_model_logits(exported_lm):
    ours, engine, _ = exported_lm
    ids = [1, *range(4, 20), 7, 7, 9]
    with torch.no_grad():
        expected = ours.model(torch.tensor([ids]))[0]
    assert (engine.logits(ids) - expected).abs().max() < TOLERANCE


def test_language_model_greedy_generation(exported_lm):
    """Also past the model's 32 positions, where both restart from the last half of the context."""
    ours, engine, _ = exported_lm
    for prompt in ([], [5, 6, 7]):
        expected = list(ours.generate_ids(prompt, max_new_tokens=60, temperature=0))
        assert list(engine.generate_ids(prompt, max_new_tokens=60, temperature=0)) == expected
    assert engine.generate("ab", 20, temperature=0) == ours.generate("ab", 20, temperature=0)


def test_language_model_sampling_seed(exported_lm):
    """A seed fixes the first generation of a freshly loaded engine (CTranslate2 seeds one
    generator per worker thread), which is what `aiayn lm generate --seed` runs."""
    _, _, directory = exported_lm
    samples = [
        list(CTranslate2Generator(directory, "cpu", threads=1).generate_ids(
            [5], max_new_tokens=12, temperature=1.0, seed=3))
        for _ in range(2)
    ]
    assert samples[0] == samples[1]
