"""`ModelConfig`: presets (Table 3), validation, parameter counts."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from aiayn.model import DecoderOnlyLM, EncoderOnly, ModelConfig, Transformer

PRESET_SIZES = {
    # name: (d_model, num_heads, encoder layers, decoder layers, d_ff, dropout)
    "base": (512, 8, 6, 6, 2048, 0.1),
    "big": (1024, 16, 6, 6, 4096, 0.3),
    "small": (256, 8, 3, 3, 1024, 0.1),
    "tiny": (64, 2, 2, 2, 256, 0.0),
}


@pytest.mark.parametrize("name", PRESET_SIZES)
def test_preset_sizes(name: str) -> None:
    config = getattr(ModelConfig, name)()
    sizes = (config.d_model, config.num_heads, config.num_encoder_layers,
             config.num_decoder_layers, config.d_ff, config.dropout)
    assert sizes == PRESET_SIZES[name]
    assert config.d_k * config.num_heads == config.d_model and config.head_dim is None
    assert ModelConfig.preset(name) == config
    assert getattr(ModelConfig, name)(dropout=0.25).dropout == 0.25
    assert not config.share_embeddings and not config.norm_first
    assert config.positional == "sinusoidal" and config.activation == "relu"


def test_base_head_dim_is_64() -> None:
    """d_k = d_v = d_model / h = 64 (Sec. 3.2.2)."""
    assert ModelConfig.base().d_k == 64 and ModelConfig.big().d_k == 64


@pytest.mark.parametrize("name", PRESET_SIZES)
def test_vocab_size_shares_embeddings_and_ties_output(name: str) -> None:
    config = ModelConfig.preset(name, vocab_size=101)
    assert (config.src_vocab_size, config.tgt_vocab_size) == (101, 101)
    assert config.share_embeddings and config.tie_output
    if name in ("small", "tiny"):  # base/big are checked on the meta device below
        model = Transformer(config)
        assert model.src_embedding is model.tgt_embedding
        assert model.output_projection.weight is model.src_embedding.weight
        matrices = [p for p in model.parameters() if p.shape == (101, config.d_model)]
        assert len(matrices) == 1  # one embedding matrix object in the whole model


def test_separate_vocabularies_get_separate_embeddings() -> None:
    config = ModelConfig.tiny(src_vocab_size=11, tgt_vocab_size=13, tie_output=False)
    model = Transformer(config)
    assert model.src_embedding is not model.tgt_embedding
    assert model.output_projection.weight is not model.tgt_embedding.weight
    assert model.output_projection.weight.shape == (13, 64)
    tied = Transformer(dataclasses.replace(config, tie_output=True))
    assert tied.output_projection.weight is tied.tgt_embedding.weight
    lm = DecoderOnlyLM(ModelConfig.tiny(vocab_size=17))
    assert lm.output_projection.weight is lm.embedding.weight


# ------------------------------------------------------------- parameter counts
def count_parameters(config: ModelConfig) -> int:
    """Parameters of the Transformer, built on the meta device (no memory, no init cost)."""
    with torch.device("meta"):
        model = Transformer(config)
    assert model.output_projection.weight is model.src_embedding.weight
    return sum(p.numel() for p in model.parameters())  # shared parameters counted once


@pytest.mark.parametrize(("preset", "paper"), [("base", 65e6), ("big", 213e6)])
def test_parameter_count_matches_table_3(preset: str, paper: float) -> None:
    count = count_parameters(ModelConfig.preset(preset, vocab_size=37000))
    assert abs(count - paper) / paper <= 0.04, count
    # Exactly: embeddings V*D + 6 encoder layers + 6 decoder layers (weights, biases, norms).
    d, d_ff, vocab = (512, 2048, 37000) if preset == "base" else (1024, 4096, 37000)
    attention = 4 * d * d + 4 * d
    ffn = 2 * d * d_ff + d_ff + d
    encoder_layer = attention + ffn + 2 * 2 * d
    decoder_layer = 2 * attention + ffn + 3 * 2 * d
    assert count == vocab * d + 6 * encoder_layer + 6 * decoder_layer


# ------------------------------------------------------------------- validation
BAD_CONFIGS = [
    (dict(d_model=30, num_heads=4), "num_heads"),
    (dict(d_model=-8), "d_model"),
    (dict(d_model=0), "d_model"),
    (dict(num_heads=-1), "num_heads"),
    (dict(d_ff=-5), "d_ff"),
    (dict(max_len=0), "max_len"),
    (dict(src_vocab_size=-3), "src_vocab_size"),
    (dict(tgt_vocab_size=0), "tgt_vocab_size"),
    (dict(num_encoder_layers=-1), "num_encoder_layers"),
    (dict(num_decoder_layers=-2), "num_decoder_layers"),
    (dict(d_model=64.0), "d_model"),
    (dict(d_ff=True), "d_ff"),
    (dict(dropout=1.0), "dropout"),
    (dict(dropout=-0.1), "dropout"),
    (dict(attention_dropout=1.0), "attention_dropout"),
    (dict(positional="rotary"), "positional"),
    (dict(activation="tanh"), "activation"),
    (dict(share_embeddings=True, src_vocab_size=10, tgt_vocab_size=20), "share_embeddings"),
    (dict(pad_id=8000), "pad_id"),
    (dict(layer_norm_eps=0.0), "layer_norm_eps"),
    (dict(layer_norm_eps=float("nan")), "layer_norm_eps"),
    (dict(layer_norm_eps=float("inf")), "layer_norm_eps"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_CONFIGS, ids=[f for _, f in BAD_CONFIGS])
def test_bad_config_raises_value_error_naming_the_field(overrides: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ModelConfig(**overrides)


def test_d_model_not_divisible_by_heads_names_both_fields() -> None:
    with pytest.raises(ValueError, match=r"d_model.*num_heads"):
        ModelConfig.tiny(num_heads=3)


def test_unknown_preset_override_or_preset_name() -> None:
    with pytest.raises(ValueError, match="d_modle"):
        ModelConfig.base(d_modle=256)
    with pytest.raises(ValueError, match="huge"):
        ModelConfig.preset("huge")


def test_dict_round_trip_and_unknown_keys() -> None:
    config = ModelConfig.small(vocab_size=300, norm_first=True, positional="learned", extra={"task": "x"})
    data = config.to_dict()
    assert "format_version" not in data  # the model directory format (`aiayn.formats`) versions it
    assert ModelConfig.from_dict(data) == config
    with pytest.raises(ValueError, match="colour"):
        ModelConfig.from_dict(data | {"colour": "red"})


def test_encoder_only_needs_two_classes() -> None:
    with pytest.raises(ValueError, match="num_classes"):
        EncoderOnly(ModelConfig.tiny(vocab_size=11), num_classes=1)
