"""`aiayn.runtime.beam_history`: the keys and values the model's copying cache holds, bit for bit,
with a reorder that moves none of them."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.decoding import beam_search, greedy_search
from aiayn.model import AttentionCache
from aiayn.model.kv_cache import DecoderCache
from aiayn.runtime.beam_history import BeamHistoryCache
from aiayn.runtime.steps import EagerStep
from decoding.helpers import tiny_transformer

HEADS, HEAD_DIM = 2, 3


def assert_same_contents(ours: BeamHistoryCache, theirs: AttentionCache) -> None:
    assert (ours.rows, ours.length) == (theirs.rows, theirs.length)
    assert torch.equal(ours.key, theirs.key) and torch.equal(ours.value, theirs.value)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_the_history_reads_what_the_copying_cache_holds(data):
    """Any run of appends (one position or several) and reorders (repeated rows, rows that leave,
    rows that grow in number, as beam search's first step makes them) reads the same keys and
    values from both caches, and each append returns them."""
    ours, theirs = BeamHistoryCache(), AttentionCache()
    rows = data.draw(st.integers(1, 3), label="first rows")
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    for _ in range(data.draw(st.integers(1, 12), label="steps")):
        positions = data.draw(st.integers(1, 3), label="positions")
        key = torch.randn(rows, HEADS, positions, HEAD_DIM, generator=generator)
        value = torch.randn(rows, HEADS, positions, HEAD_DIM, generator=generator)
        for got, expected in zip(ours.append(key, value), theirs.append(key, value), strict=True):
            assert torch.equal(got, expected)
        assert_same_contents(ours, theirs)
        new_rows = data.draw(st.integers(1, 2 * rows + 1), label="rows after the reorder")
        kept = st.lists(st.integers(0, rows - 1), min_size=new_rows, max_size=new_rows)
        index = torch.tensor(data.draw(kept, label="rows kept"))
        ours.reorder(index)
        theirs.reorder(index)
        assert_same_contents(ours, theirs)
        rows = new_rows


def test_a_reorder_moves_no_key_and_leaves_room_for_the_next_step():
    """The history is neither copied nor written by a reorder, only the table of slots; a full
    history grows in the reorder, so the next step only writes; the part a step reads is never
    a whole buffer (a compiler would see another layout)."""
    cache, generator = BeamHistoryCache(), torch.Generator().manual_seed(0)
    rows = 3
    for step in range(40):
        key = torch.randn(rows, HEADS, 1, HEAD_DIM, generator=generator)
        cache.append(key, -key)
        assert cache.length < cache.slots.size(0) and cache.rows < cache.slots.size(1)
        history = cache.history
        before = [tensor.clone() for tensor in history]
        rows = 4 if step == 0 else rows
        index = torch.randint(0, cache.rows, (rows,), generator=generator)
        expected = cache.key[index]
        cache.reorder(index)
        assert torch.equal(cache.key, expected) and torch.equal(cache.value, -expected)
        assert cache.has_room(1) and rows <= cache.row_capacity
        if cache.history is history:  # not grown: then not written either (bit for bit: the
            # unwritten part of a buffer is whatever memory held, NaN included)
            pairs = zip(history, before, strict=True)
            assert all(torch.equal(now.view(torch.int32), then.view(torch.int32)) for now, then in pairs)


class HistoryStep(EagerStep):
    """The eager step with the history cache in place of the model's."""

    def new_cache(self) -> DecoderCache:
        return DecoderCache.empty(self.config.num_decoder_layers, BeamHistoryCache)


@pytest.mark.parametrize("search", ["beam", "greedy"])
def test_searches_with_the_history_find_what_they_find_with_the_copying_cache(search):
    """Same hypotheses and the same scores, bit for bit, sentences finishing at different steps."""
    model = tiny_transformer(3)
    src = torch.randint(4, 20, (6, 7), generator=torch.Generator().manual_seed(1))
    src[:, -1] = model.config.eos_id
    src[3:, 4:] = model.config.pad_id
    src[3:, 3] = model.config.eos_id
    with torch.no_grad():
        if search == "beam":
            ours = beam_search(HistoryStep(model), src, beam_size=3, nbest=2, max_len_extra=8)
            theirs = beam_search(EagerStep(model), src, beam_size=3, nbest=2, max_len_extra=8)
            assert [[(h.tokens, h.score) for h in hyps] for hyps in ours] == [
                [(h.tokens, h.score) for h in hyps] for hyps in theirs
            ]
        else:
            ours = greedy_search(HistoryStep(model), src, max_len_extra=8)
            theirs = greedy_search(EagerStep(model), src, max_len_extra=8)
            assert ours == theirs
