"""`aiayn explore`: one self-contained HTML page with the model's attention embedded."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from aiayn.cli.main import main
from aiayn.explorer import explorer_page
from aiayn.inference import load
from aiayn.plots.attention_data import AttentionExample
from plots.conftest import SOURCES, TARGETS, reference_maps


def page_data(html: str) -> dict:
    match = re.search(r'<script id="aiayn-data" type="application/json">(.*?)</script>', html, re.S)
    assert match, "no embedded data"
    return json.loads(match.group(1))


@pytest.fixture
def inputs(tmp_path):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text(f"{SOURCES[0]}\n\n{SOURCES[1]}\n", encoding="utf-8")  # the empty line is skipped
    ref.write_text(f"{TARGETS[0]}\n\n{TARGETS[1]}\n", encoding="utf-8")
    return src, ref


def test_page_is_self_contained_and_holds_the_models_weights(model_dir, tmp_path, inputs, capsys):
    src, ref = inputs
    out = tmp_path / "page.html"
    argv = ["explore", "--model", str(model_dir), "--input", str(src), "--ref", str(ref), "--out", str(out)]
    assert main(argv) == 0
    assert "2 sentence(s)" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    # offline: no external resource of any kind, and a policy that forbids network access
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", html, re.I)
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", html, re.I)
    assert "default-src 'none'" in html
    data = page_data(html)
    assert data["model"] == {"d_model": 32, "num_heads": 2, "num_encoder_layers": 2, "num_decoder_layers": 3}
    assert [s["source"] for s in data["sentences"]] == SOURCES[:2]
    tokenizer = load(model_dir, "cpu").tokenizers.target
    for sentence, target in zip(data["sentences"], TARGETS[:2], strict=True):
        assert sentence["target"] == target and not sentence["translated"]
        assert sentence["source_tokens"][-1] == "<eos>" and sentence["target_tokens"][0] == "<bos>"
        expected = reference_maps(model_dir, sentence["source"], tokenizer.encode(target))
        for kind in ("encoder", "decoder", "cross"):
            got = np.array(sentence[kind])  # (L, H, Q, K)
            want = np.stack([m[0].numpy() for m in getattr(expected, kind)])
            np.testing.assert_allclose(got, want, atol=1e-5)


def test_translations_by_default(model_dir, tmp_path, inputs):
    src, _ = inputs
    out = tmp_path / "page.html"
    argv = ["explore", "--model", str(model_dir), "--input", str(src), "--beam", "1", "--out", str(out)]
    assert main([*argv, "--max-sentences", "1"]) == 0
    sentences = page_data(out.read_text(encoding="utf-8"))["sentences"]
    assert len(sentences) == 1 and sentences[0]["translated"]
    translator = load(model_dir, "cpu")
    tokens = translator.translate_nbest([SOURCES[0]], 1, beam=1)[0][0].tokens
    tokens = tokens[: translator.config.max_len - 1]  # what fits after <bos>
    assert sentences[0]["target"] == translator.tokenizers.target.decode(tokens)
    assert len(sentences[0]["target_tokens"]) == len(tokens) + 1


def test_embedded_text_cannot_break_out_of_the_script():
    zeros = np.zeros((1, 1, 2, 2), dtype=np.float32)
    example = AttentionExample(
        source="</script><script>alert(1)</script>",
        target="a & b",
        translated=False,
        source_tokens=["<", "<eos>"],
        target_tokens=["<bos>", " "],
        encoder=zeros,
        decoder=zeros,
        cross=zeros,
    )
    html = explorer_page([example], title="<b>t</b> __AIAYN_DATA__")
    assert html.count("</script>") == 3  # the template's own three scripts only (data, view, explorer)
    assert "<title>&lt;b&gt;t&lt;/b&gt; __AIAYN_DATA__</title>" in html
    data = page_data(html)
    assert data["sentences"][0]["source"] == example.source
    assert data["sentences"][0]["target_tokens"] == ["<bos>", "␣"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--out", "page.txt"], "must be an .html file"),
        (["--input", "missing.txt"], "--input missing.txt: file not found"),
        (["--ref", "short.txt"], "has 3 lines but --ref short.txt 1"),
        (["--input", "blank.txt"], "no non-empty line"),
        (["--max-sentences", "0"], "argument --max-sentences: must be an integer >= 1"),
    ],
)
def test_errors(model_dir, tmp_path, inputs, monkeypatch, capsys, extra, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "short.txt").write_text("x\n")
    (tmp_path / "blank.txt").write_text("\n  \n")
    argv = ["explore", "--model", str(model_dir), "--input", str(inputs[0]), "--out", "page.html", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
