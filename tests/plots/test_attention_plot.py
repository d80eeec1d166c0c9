"""`aiayn plot attention`: the heatmaps drawn are the model's attention probabilities."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.inference import load
from aiayn.plots.attention import attention_figure, parse_layer, select_panels
from aiayn.plots.attention_data import attention_example

from .conftest import reference_maps
from .helpers import assert_png_not_blank, assert_svg_has_content

TEXT, TARGET = "der mann liest", "the man reads"


@pytest.fixture(scope="module")
def translator(model_dir):
    return load(model_dir, "cpu")


def test_cli_png_all_layers_and_svg(model_dir, tmp_path, capsys):
    png = tmp_path / "att.png"
    argv = ["plot", "attention", "--model", str(model_dir), "--text", TEXT, "--target", TARGET]
    assert main([*argv, "--layer", "all", "--kind", "all", "--out", str(png)]) == 0
    assert "16 heads" in capsys.readouterr().out  # (2 encoder + 3 decoder + 3 cross layers) x 2 heads
    assert_png_not_blank(png, min_bytes=20_000)
    svg = tmp_path / "att.svg"
    assert main([*argv, "--layer", "2", "--kind", "cross", "--out", str(svg)]) == 0
    assert_svg_has_content(svg)


def test_cli_translates_when_no_target(model_dir, tmp_path, capsys):
    png = tmp_path / "att.png"
    argv = ["plot", "attention", "--model", str(model_dir), "--text", TEXT, "--beam", "1"]
    assert main([*argv, "--kind", "decoder", "--out", str(png)]) == 0
    assert "(model translation)" in capsys.readouterr().out
    assert_png_not_blank(png)


def test_panels_are_the_models_attention(model_dir, translator):
    example = attention_example(translator, TEXT, TARGET)
    target_ids = translator.tokenizers.target.encode(TARGET)
    expected = reference_maps(model_dir, TEXT, target_ids)
    tokenizer = translator.tokenizers.source
    assert example.source_tokens == [*tokenizer.tokens(TEXT), "<eos>"]
    assert example.target_tokens == ["<bos>", *tokenizer.tokens(TARGET)]
    panels = select_panels(example, "all", "all")
    assert len(panels) == (2 + 3 + 3) * 2
    for panel in panels:
        want = getattr(expected, panel.kind)[panel.layer][0, panel.head].numpy()
        np.testing.assert_allclose(panel.weights, want, atol=1e-6)
        assert panel.weights.shape == (len(panel.query_tokens), len(panel.key_tokens))
        np.testing.assert_allclose(panel.weights.sum(axis=1), 1.0, atol=1e-5)  # softmax rows
        assert (panel.weights >= 0).all()
        if panel.kind == "decoder":  # the subsequent mask: nothing above the diagonal
            assert np.triu(panel.weights, k=1).max() == 0.0
    # and the figure's images hold exactly those matrices, in order
    figure = attention_figure(example, panels)
    images = [axes.images[0] for axes in figure.axes if axes.images]
    assert len(images) == len(panels)
    for image, panel in zip(images, panels, strict=True):
        np.testing.assert_array_equal(np.ma.getdata(image.get_array()), panel.weights)
        labels = [t.get_text() for t in image.axes.get_xticklabels()]
        assert labels[-1] == ("<eos>" if panel.kind != "decoder" else panel.key_tokens[-1])


def test_translation_target_is_the_greedy_output(model_dir, translator):
    example = attention_example(translator, TEXT, None, beam=1)
    hyp = translator.translate_nbest([TEXT], 1, beam=1)[0][0]
    assert example.translated
    tokens = hyp.tokens[: translator.config.max_len - 1]  # room for <bos>
    expected = reference_maps(model_dir, TEXT, tokens)
    np.testing.assert_allclose(example.cross, torch.stack([m[0] for m in expected.cross]).numpy(), atol=1e-6)
    tokenizer = translator.tokenizers.target
    bos_id = translator.config.bos_id
    assert example.target_tokens == [tokenizer.id_to_token(i) for i in [bos_id, *tokens]]


def test_layer_selection(translator):
    example = attention_example(translator, TEXT, TARGET)
    assert {p.layer for p in select_panels(example, "encoder", "last")} == {1}
    assert {p.layer for p in select_panels(example, "decoder", "last")} == {2}
    assert {p.layer for p in select_panels(example, "cross", 1)} == {0}
    assert parse_layer("3") == 3 and parse_layer("all") == "all"
    with pytest.raises(ConfigError, match="2 encoder layers"):
        select_panels(example, "encoder", 3)
    with pytest.raises(ConfigError, match="counts from 1"):
        parse_layer("0")
    with pytest.raises(ConfigError, match="--layer"):
        parse_layer("top")


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--text", "   "], "the sentence is empty"),
        (["--text", "ein " * 20], "the model takes at most 39"),
        (["--text", TEXT, "--layer", "9"], "--layer 9: the model has 2 encoder layers"),
        (["--text", TEXT, "--out", "x.jpg"], "unsupported extension '.jpg'"),
    ],
)
def test_cli_errors(model_dir, tmp_path, capsys, extra, message):
    argv = [
        "plot",
        "attention",
        "--model",
        str(model_dir),
        "--target",
        TARGET,
        "--out",
        str(tmp_path / "a.png"),
    ]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_missing_model(tmp_path, capsys):
    argv = [
        "plot",
        "attention",
        "--model",
        str(tmp_path / "none"),
        "--text",
        "x",
        "--out",
        str(tmp_path / "a.png"),
    ]
    assert main(argv) == 2
    assert "none" in capsys.readouterr().err
