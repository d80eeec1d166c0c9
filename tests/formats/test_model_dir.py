"""Model directories: save_pretrained / from_pretrained / aiayn.load_model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import aiayn
from aiayn import formats
from aiayn.core.errors import CheckpointError
from aiayn.model import DecoderOnlyLM, EncoderOnly, Transformer
from model.helpers import build, pad_to_lengths, random_tokens

SRC = pad_to_lengths(random_tokens(2, 6, seed=1, vocab=19), [6, 3])  # valid in every variant
TGT = random_tokens(2, 5, seed=2, vocab=19)
OUTPUTS = {
    "transformer": lambda model: model(SRC, TGT),
    "lm": lambda model: model(TGT),
    "encoder": lambda model: model(SRC),
}
CLASSES = {"transformer": Transformer, "lm": DecoderOnlyLM, "encoder": EncoderOnly}
MODEL_TYPES = {"transformer": "transformer", "lm": "decoder_only", "encoder": "encoder_only"}


@pytest.mark.parametrize("kind", ["transformer", "lm", "encoder"])
@pytest.mark.parametrize(
    "overrides",
    [{}, {"norm_first": True, "positional": "learned", "activation": "gelu", "vocab_size": None,
          "src_vocab_size": 19, "tgt_vocab_size": 21, "tie_output": False}],
    ids=["default", "variant"],
)
def test_round_trip_gives_identical_outputs(tmp_path: Path, kind: str, overrides: dict) -> None:
    model = build(kind, seed=3, **overrides)
    assert formats.save_pretrained(model, tmp_path / "m") == tmp_path / "m"
    for loaded in (formats.from_pretrained(CLASSES[kind], tmp_path / "m"), aiayn.load_model(tmp_path / "m")):
        assert type(loaded) is CLASSES[kind]
        assert not loaded.training
        assert loaded.config == model.config
        with torch.no_grad():
            assert torch.equal(OUTPUTS[kind](loaded), OUTPUTS[kind](model))
        saved = model.state_dict()
        for name, tensor in loaded.state_dict().items():
            assert torch.equal(tensor, saved[name]), name

    data = json.loads((tmp_path / "m" / "config.json").read_text())
    assert data["format_version"] == 1
    assert data["model_type"] == MODEL_TYPES[kind]
    assert data["config"]["d_model"] == 64
    if kind == "encoder":
        assert data["num_classes"] == 3 and loaded.num_classes == 3


def test_tied_weights_stay_tied_after_loading(tmp_path: Path) -> None:
    model = build("transformer")
    formats.save_pretrained(model, tmp_path)
    stored = load_file(str(tmp_path / "model.safetensors"))
    assert sum(t.shape == (23, 64) for t in stored.values()) == 1  # one shared matrix stored once
    loaded = formats.from_pretrained(Transformer, tmp_path)
    assert loaded.src_embedding is loaded.tgt_embedding
    assert loaded.output_projection.weight is loaded.tgt_embedding.weight
    assert torch.equal(loaded.output_projection.weight, model.output_projection.weight)
    lm = build("lm")
    formats.save_pretrained(lm, tmp_path / "lm")
    loaded_lm = formats.from_pretrained(DecoderOnlyLM, tmp_path / "lm")
    assert loaded_lm.output_projection.weight is loaded_lm.embedding.weight
    assert torch.equal(loaded_lm.embedding.weight, lm.embedding.weight)


def test_load_model_dispatches_on_model_type(tmp_path: Path) -> None:
    for kind in CLASSES:
        formats.save_pretrained(build(kind), tmp_path / kind)
        assert type(aiayn.load_model(tmp_path / kind)) is CLASSES[kind]
    with pytest.raises(CheckpointError, match="decoder_only"):
        formats.from_pretrained(Transformer, tmp_path / "lm")
    path = tmp_path / "lm" / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"model_type": "rnn"}))
    with pytest.raises(CheckpointError, match="rnn"):
        aiayn.load_model(tmp_path / "lm")


def rewrite_weights(directory: Path, change) -> None:
    path = directory / "model.safetensors"
    tensors = load_file(str(path))
    change(tensors)
    save_file(tensors, str(path))


def test_shape_mismatch_names_the_tensor(tmp_path: Path) -> None:
    formats.save_pretrained(build("transformer"), tmp_path)
    name = "encoder.layers.1.feed_forward.linear1.weight"
    rewrite_weights(tmp_path, lambda t: t.__setitem__(name, torch.zeros(128, 64)))
    with pytest.raises(CheckpointError, match=rf"{name}.*\(128, 64\).*\(256, 64\)"):
        formats.from_pretrained(Transformer, tmp_path)


def test_config_disagreeing_with_weights_names_a_tensor(tmp_path: Path) -> None:
    formats.save_pretrained(build("lm"), tmp_path)
    path = tmp_path / "config.json"
    data = json.loads(path.read_text())
    data["config"]["d_ff"] = 128
    path.write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=r"feed_forward\.linear1\.(weight|bias)"):
        aiayn.load_model(tmp_path)


def test_missing_or_unexpected_tensor_is_named(tmp_path: Path) -> None:
    formats.save_pretrained(build("encoder"), tmp_path)
    rewrite_weights(tmp_path, lambda t: t.pop("encoder.layers.0.feed_forward.linear2.bias"))
    with pytest.raises(CheckpointError, match=r"encoder\.layers\.0\.feed_forward\.linear2\.bias"):
        formats.from_pretrained(EncoderOnly, tmp_path)
    formats.save_pretrained(build("encoder"), tmp_path)
    rewrite_weights(tmp_path, lambda t: t.__setitem__("encoder.extra", torch.zeros(2)))
    with pytest.raises(CheckpointError, match=r"encoder\.extra"):
        formats.from_pretrained(EncoderOnly, tmp_path)


@pytest.mark.parametrize(
    "damage",
    ["missing", "garbage", "truncated", "empty"],
)
def test_corrupt_or_missing_weights_raise_checkpoint_error(tmp_path: Path, damage: str) -> None:
    formats.save_pretrained(build("transformer"), tmp_path)
    path = tmp_path / "model.safetensors"
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"this is not a safetensors file at all" * 10)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        formats.from_pretrained(Transformer, tmp_path)
    with pytest.raises(CheckpointError):
        aiayn.load_model(tmp_path)


@pytest.mark.parametrize("damage", ["missing", "not_json", "no_model_type", "future_version"])
def test_bad_config_json_raises_checkpoint_error(tmp_path: Path, damage: str) -> None:
    formats.save_pretrained(build("lm"), tmp_path)
    path = tmp_path / "config.json"
    data = json.loads(path.read_text())
    if damage == "missing":
        path.unlink()
    elif damage == "not_json":
        path.write_text("{not json")
    elif damage == "no_model_type":
        path.write_text(json.dumps({k: v for k, v in data.items() if k != "model_type"}))
    else:
        path.write_text(json.dumps(data | {"format_version": 99}))
    with pytest.raises(CheckpointError):
        aiayn.load_model(tmp_path)
