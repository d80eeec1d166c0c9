"""One `aiayn translate --model DIR` reads the model directory once: the one reader
(`aiayn.formats.read_model_dir`) runs once, Python opens `config.json` once, the
safetensors header is read once and the weights loaded once, and the model class is constructed
once (on the meta device, where its layout is checked against the weights before it is given
storage); that one construction gives the model that a second, real construction would."""

from __future__ import annotations

import builtins
import io
from collections import Counter
from pathlib import Path

import pytest
import torch

from aiayn import formats
from aiayn.cli.main import main
from aiayn.formats import layout, model_class
from aiayn.formats import model_dir as model_dir_module
from aiayn.model.config import ModelConfig
from aiayn.model.decoder_only import DecoderOnlyLM
from aiayn.model.encoder_only import EncoderOnly
from aiayn.model.transformer import Transformer

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_dates"


@pytest.mark.parametrize("copies", [1, 2])
def test_translate_reads_the_model_directory_once(model_dir, monkeypatch, capsys, copies) -> None:
    """`copies` 2: an ensemble (`--model DIR --model DIR`) reads each of its directories once."""
    counts: Counter[str] = Counter()

    def counted(name, function, condition=lambda *args, **kwargs: True):
        def wrapper(*args, **kwargs):
            if condition(*args, **kwargs):
                counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    def opens_config(file, *args, **kwargs) -> bool:
        return isinstance(file, (str, Path)) and Path(file).name == model_dir_module.CONFIG_FILE

    opener = counted("open config.json", builtins.open, opens_config)
    monkeypatch.setattr(builtins, "open", opener)
    monkeypatch.setattr(io, "open", opener)
    monkeypatch.setattr(layout, "safe_open", counted("safe_open", layout.safe_open))
    monkeypatch.setattr(model_dir_module, "load_file", counted("load_file", model_dir_module.load_file))
    monkeypatch.setattr(model_dir_module.ModelDirectory, "__init__",
                        counted("read_model_dir", model_dir_module.ModelDirectory.__init__))
    real_init = Transformer.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        counts["Transformer"] += 1

    monkeypatch.setattr(Transformer, "__init__", init)

    models = ["--model", str(model_dir)] * copies
    assert main(["translate", *models, "--text", "abc", "--beam", "2"]) == 0
    assert capsys.readouterr().out.count("\n") == 1
    assert counts == {
        "read_model_dir": copies, "open config.json": copies, "safe_open": copies, "load_file": copies,
        "Transformer": copies,
    }


def test_one_construction_gives_the_model_of_a_real_construction(model_dir) -> None:
    for directory in (model_dir, LEGACY):
        record = model_dir_module.read_model_dir(directory)
        built = model_dir_module.build_model(record, model_class(record))  # constructed for real
        model_dir_module.load_weights(built, record.weights_path, record.weights)
        built.eval()
        opened = model_dir_module.open_model(record, model_class(record))
        assert (opened.output_projection.weight is opened.tgt_embedding.weight) == record.config.tie_output
        expected = dict(built.named_buffers()) | built.state_dict()
        got = dict(opened.named_buffers()) | opened.state_dict()
        assert expected.keys() == got.keys()
        for name, tensor in expected.items():
            assert torch.equal(got[name], tensor), name
        source = torch.randint(4, record.config.src_vocab_size, (2, 7))
        target = torch.randint(4, record.config.tgt_vocab_size, (2, 5))
        with torch.no_grad():
            assert torch.equal(opened(source, target), built(source, target))


def test_one_construction_of_a_language_model_and_a_classifier(tmp_path) -> None:
    config = ModelConfig(
        src_vocab_size=23, tgt_vocab_size=23, d_model=16, num_heads=2, d_ff=32,
        num_encoder_layers=1, num_decoder_layers=1,
    )
    tokens = torch.randint(4, 23, (2, 6))
    for name, model in (("lm", DecoderOnlyLM(config)), ("classifier", EncoderOnly(config, num_classes=3))):
        formats.save_pretrained(model, tmp_path / name)
        record = model_dir_module.read_model_dir(tmp_path / name)
        opened = model_dir_module.open_model(record, model_class(record))
        expected = dict(model.eval().named_buffers()) | model.state_dict()
        got = dict(opened.named_buffers()) | opened.state_dict()
        assert expected.keys() == got.keys()
        for key, tensor in expected.items():
            assert torch.equal(got[key], tensor), (name, key)
        with torch.no_grad():
            assert torch.equal(opened(tokens), model(tokens)), name
