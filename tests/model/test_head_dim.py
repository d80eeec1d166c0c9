"""`ModelConfig.head_dim`: d_k = d_v of each head at fixed d_model and h (Table 3 row B).

Unset, the model is the paper's (d_k = d_model / h, Sec. 3.2.2) and its config.json has no new
key; set to d_model / h it is that same model; set to another width the projections become
(3 h d_k, d_model) and (d_model, h d_k), and every path (padded, packed, cached, beams sharing
a memory) still computes the same attention.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from aiayn import formats
from aiayn.core.errors import ConfigError
from aiayn.formats import load_model
from aiayn.model import ModelConfig, MultiHeadAttention, Transformer
from aiayn.tasks import load_config

from .helpers import PAD, build, pad_to_lengths, random_tokens

REPO = Path(__file__).resolve().parents[2]
LEGACY = REPO / "tests" / "fixtures" / "legacy_dates"
NARROW = {"num_heads": 3, "head_dim": 8}  # tiny: d_model 64, not divisible by 3; h d_k = 24


def attention_layers(model: torch.nn.Module) -> list[MultiHeadAttention]:
    return [m for m in model.modules() if isinstance(m, MultiHeadAttention)]


def test_projections_have_h_d_k_rows_and_columns() -> None:
    model = build("transformer", **NARROW)
    layers = attention_layers(model)
    assert len(layers) == 2 + 2 * 2  # encoder self; decoder self and cross (tiny: 2 + 2 layers)
    for layer in layers:
        assert (layer.num_heads, layer.head_dim) == (3, 8)
        assert layer.in_proj.weight.shape == (3 * 24, 64) and layer.in_proj.bias.shape == (72,)
        assert layer.out_proj.weight.shape == (64, 24) and layer.out_proj.bias.shape == (64,)
    wide = build("transformer", num_heads=2, head_dim=48)  # h d_k = 96 > d_model
    assert {tuple(m.out_proj.weight.shape) for m in attention_layers(wide)} == {(64, 96)}


def test_head_dim_lifts_the_divisibility_rule_and_is_range_checked() -> None:
    with pytest.raises(ValueError, match=r"d_model.*num_heads.*head_dim"):
        ModelConfig.tiny(num_heads=3)
    assert ModelConfig.tiny(**NARROW).d_k == 8
    assert ModelConfig.tiny().d_k == 32 and ModelConfig.tiny().head_dim is None
    with pytest.raises(ValueError, match="head_dim"):
        ModelConfig.tiny(head_dim=0)


@pytest.mark.parametrize("kind", ["transformer", "lm", "encoder"])
def test_head_dim_d_model_over_h_is_todays_model(kind: str) -> None:
    today, explicit = build(kind, seed=3), build(kind, seed=5, head_dim=32)
    shapes = {name: tensor.shape for name, tensor in today.state_dict().items()}
    assert {name: tensor.shape for name, tensor in explicit.state_dict().items()} == shapes
    explicit.load_state_dict(today.state_dict())
    src = pad_to_lengths(random_tokens(3, 7, seed=1), [7, 4, 2])
    with torch.no_grad():
        if kind == "transformer":
            tgt_in = random_tokens(3, 5, seed=2)
            assert torch.equal(explicit(src, tgt_in), today(src, tgt_in))
        else:
            assert torch.equal(explicit(src), today(src))


def test_config_json_gains_no_key_unless_head_dim_is_set(tmp_path) -> None:
    today = ModelConfig.tiny()
    assert "head_dim" not in today.to_dict()
    assert ModelConfig.from_dict(today.to_dict()) == today
    narrow = ModelConfig.tiny(**NARROW)
    assert narrow.to_dict()["head_dim"] == 8 and ModelConfig.from_dict(narrow.to_dict()) == narrow
    stored = json.loads((LEGACY / "config.json").read_text())["config"]
    assert "head_dim" not in stored
    legacy = load_model(LEGACY, "cpu")
    assert legacy.config.head_dim is None and legacy.config.d_k == legacy.config.d_model // 2

    model = build("transformer", **NARROW)
    formats.save_pretrained(model, tmp_path)
    loaded = load_model(tmp_path, "cpu").eval()
    assert loaded.config == model.config
    src, tgt_in = random_tokens(2, 6, seed=1), random_tokens(2, 4, seed=2)
    with torch.no_grad():
        assert torch.equal(loaded(src, tgt_in), model(src, tgt_in))


def test_every_path_agrees_with_narrow_heads() -> None:
    """Packed vs padded, step by step vs the full pass, beams sharing one memory vs a copy each."""
    model = build("transformer", seed=2, **NARROW)
    src = pad_to_lengths(random_tokens(3, 7, seed=1), [7, 4, 2])
    tgt_in = pad_to_lengths(random_tokens(3, 6, seed=2), [3, 6, 1])
    keep = tgt_in != PAD
    with torch.no_grad():
        full = model(src, tgt_in)
        torch.testing.assert_close(model(src, tgt_in, output_mask=keep), full[keep], atol=1e-5, rtol=0)

        memory, src_mask = model.encode(src), src != PAD
        cache, steps = model.new_cache(), []
        for t in range(tgt_in.size(1)):
            steps.append(model.decode(tgt_in[:, t : t + 1], memory, src_mask, cache=cache))
        torch.testing.assert_close(torch.cat(steps, dim=1)[keep], full[keep], atol=1e-5, rtol=0)

        beams = tgt_in.repeat_interleave(2, dim=0)  # rows 2i, 2i+1 belong to sentence i
        shared = model.decode(beams, memory, src_mask, groups=2)
        copied = model.decode(beams, memory.repeat_interleave(2, 0), src_mask.repeat_interleave(2, 0))
        torch.testing.assert_close(shared, copied, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("rows", "groups"), [(6, 1), (5, 2), (3, 2)])
def test_a_wrong_beam_grouping_is_a_one_line_error(rows: int, groups: int) -> None:
    """Beams share a memory row only when told so, and only as B == groups * b: a batch that
    does not match is refused (naming the shapes), not reshaped."""
    model = build("transformer", seed=2, **NARROW).eval()
    src = random_tokens(3, 7, seed=1)
    memory, tgt_in = model.encode(src), random_tokens(rows, 1, seed=2)
    with torch.no_grad(), pytest.raises(ValueError) as error:
        model.decode(tgt_in, memory, src != PAD, groups=groups)
    message = str(error.value)
    assert "\n" not in message and f"needs B == groups * b, got {rows} != {groups} * 3" in message
    assert f"query ({rows}, 1, 64) over memory (3, 7, 64)" in message


def test_train_accepts_head_dim_as_a_setting() -> None:
    config = load_config(None, ["model.head_dim=16", "model.preset=tiny"])
    assert config.model.overrides["head_dim"] == 16
    with pytest.raises(ConfigError, match="model.head_dim"):
        load_config(None, ["model.head_dim=0"])
    with pytest.raises(ConfigError, match="model.head_dim"):
        load_config(None, ["model.head_dim=eight"])


def test_a_transformer_built_from_the_run_config_has_the_heads_asked_for() -> None:
    config = load_config(None, ["model.head_dim=16", "model.preset=tiny"])
    model = Transformer(ModelConfig.preset(config.model.preset, vocab_size=30, **config.model.overrides))
    assert {m.head_dim for m in attention_layers(model)} == {16}
