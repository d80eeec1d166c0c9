"""CTranslate2 exports compute what aiayn computes: same tokens, same scores (1e-4)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import runpy
import sys

import pytest
import torch

import aiayn
from aiayn.cli.main import main
from aiayn.errors import CheckpointError, ConfigError
from aiayn.export import export_ctranslate2, export_huggingface
from aiayn.export.ctranslate2 import AIAYN_FILE
from aiayn.inference import CTranslate2Generator, CTranslate2Translator, Generator, Translator, load
from aiayn.model import EncoderOnly, ModelConfig

from .helpers import LM_VARIANTS, SOURCES, TARGETS, VARIANTS, make_lm_dir, make_translation_dir

TOLERANCE = 1e-4


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


# ------------------------------------------------------------------ the directory and the CLI
@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    make_translation_dir(root / "model", "post-sinusoidal-separate")
    make_lm_dir(root / "lm", "pre-learned")
    return root


def _columns(output: str) -> tuple[list[list[str]], list[float]]:
    """Lines of `aiayn translate --nbest` / `aiayn score` split at tabs: (texts, scores)."""
    rows = [line.split("\t") for line in output.splitlines()]
    scores = [float(row[1] if len(row) == 3 else row[0]) for row in rows]
    return [row[::2] for row in rows], scores


def test_cli_export_then_translate_evaluate_score_with_ctranslate2(model_dirs, tmp_path, capsys):
    model, out = model_dirs / "model", tmp_path / "ct2"
    assert main(["export", "ctranslate2", "--model", str(model), "--out", str(out)]) == 0
    assert {"model.bin", "config.json", AIAYN_FILE, "src_tokenizer.json", "tgt_tokenizer.json",
            "README.txt"} <= {p.name for p in out.iterdir()}
    assert json.loads((out / "config.json").read_text())["add_source_eos"] is True
    capsys.readouterr()
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(SOURCES) + "\n")
    ref.write_text("\n".join(TARGETS) + "\n")
    commands = {
        "translate": ["translate", "--input", str(src), "--nbest", "2", "--max-len", "6"],
        "score": ["score", "--input", str(src), "--ref", str(ref)],
        "evaluate": ["evaluate", "--input", str(src), "--ref", str(ref), "--max-len", "6"],
    }
    outputs = {}
    for engine, directory in (("aiayn", model), ("ct2", out)):
        for name, command in commands.items():
            json_file = ["--json", str(tmp_path / f"{engine}.json")] if name == "evaluate" else []
            assert main([*command, "--model", str(directory), *json_file]) == 0
            outputs[engine, name] = capsys.readouterr().out
    for name in ("translate", "score"):  # the CLI prints scores with 4 decimals
        (ours, our_scores), (theirs, their_scores) = (_columns(outputs[e, name]) for e in ("aiayn", "ct2"))
        assert theirs == ours and their_scores == pytest.approx(our_scores, abs=2e-4)
    assert len(outputs["ct2", "translate"].splitlines()) == 2 * (len(SOURCES) - 1) + 1  # one blank line
    figures = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("aiayn", "ct2")}
    assert figures["ct2"]["bleu"] == figures["aiayn"]["bleu"]
    assert "CTranslate2" in figures["ct2"]["device"]


def test_cli_lm_generate_with_ctranslate2(model_dirs, tmp_path, capsys):
    out = tmp_path / "lm-ct2"
    assert main(["export", "ctranslate2", "--model", str(model_dirs / "lm"), "--out", str(out)]) == 0
    capsys.readouterr()
    texts = []
    for directory in (model_dirs / "lm", out):
        assert main(["lm", "generate", "--model", str(directory), "--text", "a dog",
                     "--temperature", "0", "--max-new-tokens", "40"]) == 0
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] and texts[0].startswith("a dog")


def _run_readme_snippet(out, sentences, tmp_path) -> list[str]:
    """Run the Python snippet of an export's README.txt; its printed lines."""
    readme = (out / "README.txt").read_text()
    snippet = readme.split("(pip install ctranslate2 tokenizers):\n\n", 1)[1]
    script = tmp_path / "snippet.py"
    script.write_text(snippet.replace("THIS_DIR", str(out)).replace('["..."]', repr(sentences)))
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        runpy.run_path(str(script))
    return output.getvalue().splitlines()


def test_readme_snippets_run(model_dirs, tmp_path):
    """The README.txt of an export is a working program. The translation snippet uses
    CTranslate2's own length penalty, so its texts are compared at length_penalty 0 (where
    the two rankings agree) through the engine; the LM snippet generates greedily, as aiayn."""
    out = export_ctranslate2(model_dirs / "model", tmp_path / "ct2")
    lines = _run_readme_snippet(out, SOURCES[:3], tmp_path)
    assert len(lines) == 3
    assert all(re.fullmatch(r".* -?\d+\.\d+(e-?\d+)?", line) for line in lines)

    lm_out = export_ctranslate2(model_dirs / "lm", tmp_path / "lm-ct2")
    (text,) = _run_readme_snippet(lm_out, [], tmp_path)
    engine = CTranslate2Generator(lm_out, "cpu", threads=1)
    ids = list(engine.generate_ids([], max_new_tokens=engine.config.max_len - 1, temperature=0))
    assert text == engine.tokenizer.decode(ids)


def test_quantized_export_loads_smaller(model_dirs, tmp_path):
    float_dir = export_ctranslate2(model_dirs / "model", tmp_path / "f32")
    int8_dir = export_ctranslate2(model_dirs / "model", tmp_path / "int8", quantization="int8")
    assert (int8_dir / "model.bin").stat().st_size < 0.6 * (float_dir / "model.bin").stat().st_size
    assert len(CTranslate2Translator(int8_dir, "cpu", threads=1).translate(SOURCES, beam=2)) == len(SOURCES)


def test_refusals_and_errors(model_dirs, tmp_path, capsys):
    classifier = tmp_path / "classifier"
    EncoderOnly(ModelConfig.tiny(vocab_size=30), num_classes=2).save_pretrained(classifier)
    with pytest.raises(CheckpointError, match="encoder-only classifier"):
        export_ctranslate2(classifier, tmp_path / "nope")
    with pytest.raises(CheckpointError, match="encoder-only classifier"):
        export_huggingface(classifier, tmp_path / "nope")
    assert main(["export", "ctranslate2", "--model", str(classifier), "--out", str(tmp_path / "x")]) == 2
    assert "encoder-only" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()

    out = export_ctranslate2(model_dirs / "model", tmp_path / "ct2")
    with pytest.raises(ConfigError, match="--overwrite"):
        export_ctranslate2(model_dirs / "model", out)
    export_ctranslate2(model_dirs / "model", out, overwrite=True)
    (out / AIAYN_FILE).unlink()
    with pytest.raises(CheckpointError, match=r"aiayn\.json"):
        aiayn.load(out)
    lm_out = export_ctranslate2(model_dirs / "lm", tmp_path / "lm-ct2")
    with pytest.raises(CheckpointError, match="'decoder_only' model, not a 'transformer'"):
        CTranslate2Translator(lm_out)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no leftovers


def test_missing_extra_names_it(model_dirs, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 -> ImportError
    assert main(["export", "ctranslate2", "--model", str(model_dirs / "model"),
                 "--out", str(tmp_path / "x")]) == 2
    assert "pip install 'aiayn[export]'" in capsys.readouterr().err
