"""CTranslate2 exports: the directory, its README snippets, and the CLI on it (`aiayn translate/
evaluate/score/lm generate --model EXPORT`); what the runtime computes is tests/inference."""

from __future__ import annotations

import contextlib
import io
import json
import re
import runpy
import sys

import pytest

import aiayn
from aiayn import formats
from aiayn.cli.main import main
from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.export import export_ctranslate2, export_huggingface
from aiayn.export.ctranslate2 import AIAYN_FILE
from aiayn.inference import CTranslate2Generator, CTranslate2Translator
from aiayn.model import EncoderOnly, ModelConfig

from .helpers import SOURCES, TARGETS, make_lm_dir, make_translation_dir


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
    formats.save_pretrained(EncoderOnly(ModelConfig.tiny(vocab_size=30), num_classes=2), classifier)
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
