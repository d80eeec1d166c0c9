"""Incremental decoding with the key/value cache gives the full pass's logits."""

from __future__ import annotations

import pytest
import torch

from aiayn.model import AttentionCache, DecoderCache

from .helpers import build, pad_to_lengths, random_tokens

ATOL = 1e-5


def transformer_inputs(batch: int = 3, src_len: int = 8, tgt_len: int = 7):
    """A padded source (rows of different lengths) and an unpadded shifted target."""
    src = pad_to_lengths(random_tokens(batch, src_len, seed=11), [src_len, 5, 2][:batch])
    tgt_in = random_tokens(batch, tgt_len, seed=12)
    return src, tgt_in


def decode_in_chunks(model, src, tgt_in, chunks: list[int]):
    """Decode `tgt_in` through one cache, `chunks` positions at a time; concatenated logits."""
    src_padding_mask = src != 0
    memory = model.encode(src)
    cache = model.new_cache()
    assert isinstance(cache, DecoderCache) and cache.length == 0
    outputs, start = [], 0
    for size in chunks:
        outputs.append(model.decode(tgt_in[:, start : start + size], memory, src_padding_mask, cache=cache))
        start += size
        assert cache.length == start
    assert start == tgt_in.size(1)
    return torch.cat(outputs, dim=1)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_transformer_step_by_step_matches_full_pass(norm_first: bool, positional: str) -> None:
    model = build("transformer", norm_first=norm_first, positional=positional)
    src, tgt_in = transformer_inputs()
    with torch.no_grad():
        full = model(src, tgt_in)
        stepped = decode_in_chunks(model, src, tgt_in, [1] * tgt_in.size(1))
    assert stepped.shape == full.shape
    for t in range(tgt_in.size(1)):  # every step on its own
        torch.testing.assert_close(stepped[:, t], full[:, t], atol=ATOL, rtol=0)


@pytest.mark.parametrize("chunks", [[4, 1, 1, 1], [3, 2, 2], [7], [1, 3, 1, 2]])
def test_transformer_prefix_then_steps(chunks: list[int]) -> None:
    model = build("transformer")
    src, tgt_in = transformer_inputs()
    with torch.no_grad():
        full = model(src, tgt_in)
        chunked = decode_in_chunks(model, src, tgt_in, chunks)
    torch.testing.assert_close(chunked, full, atol=ATOL, rtol=0)


def test_cache_without_source_padding_mask_matches_unpadded_source() -> None:
    model = build("transformer")
    src = random_tokens(2, 6, seed=13)
    tgt_in = random_tokens(2, 5, seed=14)
    with torch.no_grad():
        memory, cache = model.encode(src), model.new_cache()
        steps = [model.decode(tgt_in[:, t : t + 1], memory, cache=cache) for t in range(5)]
        torch.testing.assert_close(torch.cat(steps, 1), model(src, tgt_in), atol=ATOL, rtol=0)


def test_cache_respects_source_padding() -> None:
    """Sanity: without the source padding mask the cached logits differ (pads are attended)."""
    model = build("transformer")
    src, tgt_in = transformer_inputs()
    with torch.no_grad():
        memory, cache = model.encode(src), model.new_cache()
        step = model.decode(tgt_in[:, :1], memory, None, cache=cache)
        full = model(src, tgt_in)
    assert (step[1:, 0] - full[1:, 0]).abs().max() > 1e-3


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("chunks", [[1] * 7, [3, 1, 1, 2]], ids=["steps", "prefix"])
def test_decoder_only_step_by_step_matches_full_pass(norm_first: bool, chunks: list[int]) -> None:
    model = build("lm", norm_first=norm_first)
    tokens = random_tokens(3, 7, seed=15)
    with torch.no_grad():
        full = model(tokens)
        cache, outputs, start = model.new_cache(), [], 0
        for size in chunks:
            outputs.append(model(tokens[:, start : start + size], cache=cache))
            start += size
            assert cache.length == start
    stepped = torch.cat(outputs, dim=1)
    for t in range(tokens.size(1)):
        torch.testing.assert_close(stepped[:, t], full[:, t], atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match="padding_mask"):
        model(tokens[:, :1], padding_mask=torch.ones(3, 1, dtype=torch.bool), cache=model.new_cache())


def test_reorder_selects_rows_and_decoding_continues() -> None:
    """As beam search does: keep rows [2, 0, 0], then go on decoding those rows."""
    model = build("transformer")
    src, tgt_in = transformer_inputs()
    index = torch.tensor([2, 0, 0])
    with torch.no_grad():
        memory, cache = model.encode(src), model.new_cache()
        model.decode(tgt_in[:, :3], memory, src != 0, cache=cache)
        before = [(c.key.clone(), c.value.clone()) for c in (*cache.self_attention, *cache.cross_attention)]
        cache.reorder(index)
        after = [(c.key, c.value) for c in (*cache.self_attention, *cache.cross_attention)]
        for (key, value), (new_key, new_value) in zip(before, after, strict=True):
            assert torch.equal(new_key, key[index]) and torch.equal(new_value, value[index])
        rest = [
            model.decode(tgt_in[index, t : t + 1], memory[index], src[index] != 0, cache=cache)
            for t in range(3, 7)
        ]
        expected = model(src[index], tgt_in[index])[:, 3:]
    torch.testing.assert_close(torch.cat(rest, 1), expected, atol=ATOL, rtol=0)


def test_attention_cache_append_and_reorder() -> None:
    cache = AttentionCache()
    assert cache.length == 0
    cache.reorder(torch.tensor([0]))  # no-op while empty
    first, second = torch.randn(2, 1, 3, 4), torch.randn(2, 1, 2, 4)
    key, value = cache.append(first, -first)
    assert torch.equal(key, first) and torch.equal(value, -first)
    key, value = cache.append(second, -second)
    assert cache.length == 5 and torch.equal(key, torch.cat([first, second], 2))
    cache.reorder(torch.tensor([1]))
    assert torch.equal(cache.key, torch.cat([first, second], 2)[1:])
    assert torch.equal(cache.value, -torch.cat([first, second], 2)[1:])
    decoder_cache = DecoderCache.empty(3)
    assert len(decoder_cache.self_attention) == len(decoder_cache.cross_attention) == 3
    assert DecoderCache().length == 0


@pytest.mark.parametrize("rows", [[0, 0, 1], [1, 0]])
def test_a_reorder_of_a_full_cache_leaves_room_for_the_next_step(rows: list[int]) -> None:
    """Beam search reorders after every step: a cache whose buffers are full grows in that copy,
    so the next step only writes (a compiled step runs), and every kept row is the one asked for."""
    cache = AttentionCache()
    keys = torch.randn(2, 2, 16, 4)
    cache.append(keys, -keys)  # 16 positions: the first buffer's whole capacity
    assert not cache.has_room(1)
    index = torch.tensor(rows)
    cache.reorder(index)
    assert cache.has_room(1)
    assert torch.equal(cache.key, keys[index]) and torch.equal(cache.value, -keys[index])
    step = torch.randn(len(rows), 2, 1, 4)
    key, value = cache.append(step, -step)
    assert torch.equal(key, torch.cat([keys[index], step], 2)) and torch.equal(value, -key)
    cache.reorder(index.flip(0))  # back into the first buffer, too small now: replaced
    assert torch.equal(cache.key, key[index.flip(0)]) and cache.has_room(1)
