"""Positional encodings (Sec. 3.5)."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.model import sinusoidal_table
from aiayn.model.positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

from .helpers import build, random_tokens


# ----------------------------------------------------------------- sinusoidal
@pytest.mark.parametrize("d_model", [64, 512])
@pytest.mark.parametrize("pos", [0, 1, 7, 50, 99])
def test_sinusoidal_table_matches_the_formula(d_model: int, pos: int) -> None:
    table = sinusoidal_table(100, d_model)
    assert table.shape == (100, d_model) and table.dtype == torch.float32
    for i in (0, 1, 5, d_model // 4, d_model // 2 - 1):
        angle = pos / 10000 ** (2 * i / d_model)
        assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
        assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_table_first_row_and_odd_width() -> None:
    table = sinusoidal_table(5, 8)
    assert torch.equal(table[0, 0::2], torch.zeros(4)) and torch.equal(table[0, 1::2], torch.ones(4))
    odd = sinusoidal_table(10, 7)  # d_model odd: 4 sines, 3 cosines
    assert odd[3, 6].item() == pytest.approx(math.sin(3 / 10000 ** (6 / 7)), abs=1e-6)
    assert odd[3, 5].item() == pytest.approx(math.cos(3 / 10000 ** (4 / 7)), abs=1e-6)


def test_sinusoidal_encoding_adds_the_table_from_an_offset() -> None:
    encoding = SinusoidalPositionalEncoding(16, 20)
    assert list(encoding.parameters()) == [] and "table" not in encoding.state_dict()
    x = torch.randn(2, 4, 16)
    torch.testing.assert_close(encoding(x, offset=3), x + sinusoidal_table(20, 16)[3:7])


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_positions_past_max_len_raise(positional: str) -> None:
    model = build("transformer", max_len=8, positional=positional)
    ok = random_tokens(1, 8)
    model(ok, ok)  # exactly max_len positions is fine
    too_long = random_tokens(1, 9)
    with pytest.raises(ValueError, match="max_len"):
        model(too_long, ok)
    with pytest.raises(ValueError, match="max_len"):
        model(ok, too_long)
    with pytest.raises(ValueError, match="max_len"):
        build("lm", max_len=8, positional=positional)(too_long)
    with pytest.raises(ValueError, match="max_len"):
        build("encoder", max_len=8, positional=positional)(too_long)
    memory, cache = model.encode(ok), model.new_cache()
    model.decode(ok, memory, cache=cache)
    with pytest.raises(ValueError, match="max_len"):  # the 9th position, decoded step by step
        model.decode(ok[:, :1], memory, cache=cache)


def test_learned_positions_are_parameters_and_are_used() -> None:
    model = build("transformer", positional="learned")
    for positional in (model.src_positional, model.tgt_positional):
        assert isinstance(positional, LearnedPositionalEmbedding)
        assert positional.embedding.weight.shape == (32, 64)
    names = dict(model.named_parameters())
    assert "src_positional.embedding.weight" in names and "tgt_positional.embedding.weight" in names
    sinusoidal = build("transformer")
    assert not any("positional" in name for name, _ in sinusoidal.named_parameters())

    src, tgt_in = random_tokens(2, 5, seed=1), random_tokens(2, 4, seed=2)
    with torch.no_grad():
        before = model(src, tgt_in)
        model.tgt_positional.embedding.weight[2].add_(1.0)  # move target position 2 only
        after = model(src, tgt_in)
    torch.testing.assert_close(after[:, :2], before[:, :2], atol=1e-6, rtol=0)
    assert (after[:, 2:] - before[:, 2:]).abs().max() > 1e-3

    encoding = LearnedPositionalEmbedding(8, 10)
    x = torch.randn(1, 3, 8)
    torch.testing.assert_close(encoding(x, offset=2), x + encoding.embedding.weight[2:5])
