"""Properties of the token store (Hypothesis): any sentences round-trip through the files, and a batch
plan covers every pair exactly once per epoch, for any seed and any number of processes. Each property
is also run against a planted bug, which it must catch."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from aiayn.data import batching
from aiayn.data.batching import plan_token_batches, shard
from aiayn.data.token_store import StoreWriter, TokenStore, ids_dtype

FEW = settings(max_examples=40, deadline=None, database=None)
PLANTED = settings(FEW, phases=[Phase.generate], derandomize=True)
"""For a planted bug: the same examples every run (so it is caught every run), not shrunk (finding a
failing example is the point, shrinking it only costs time)."""
VOCABS = st.sampled_from([5, 1 << 16, (1 << 16) + 1, 1 << 20])  # both sides of the uint16/uint32 edge


@st.composite
def corpora(draw) -> tuple[int, list[list[int]], list[list[int]]]:
    """A vocabulary size and pairs of sentences of its ids (empty sentences too)."""
    vocab = draw(VOCABS)
    sentence = st.lists(st.integers(0, vocab - 1), max_size=12)
    pairs = draw(st.lists(st.tuples(sentence, sentence), max_size=20))
    return vocab, [p[0] for p in pairs], [p[1] for p in pairs]


def write_pairs(final: Path, vocab: int, src: list[list[int]], tgt: list[list[int]]) -> Path:
    """A pair store of `src`/`tgt` written as `encode_into` writes one (in two chunks per side)."""
    with StoreWriter(final, ids_dtype(vocab), "pairs") as writer:
        for side, rows in (("src", src), ("tgt", tgt)):
            half = len(rows) // 2
            starts = np.concatenate([writer.append(f"{side}_ids.bin", rows[:half]),
                                     writer.append(f"{side}_ids.bin", rows[half:])]).astype(np.int64)
            writer.save_array(f"{side}_starts.npy", starts)
            writer.save_array(f"{side}_lengths.npy", np.array([len(r) for r in rows], dtype=np.int32))
        writer.save_array("corpus.npy", np.zeros(len(src), dtype=np.uint8))
        return writer.finish({"pairs": len(src)})


def check_round_trip(config: settings = FEW) -> None:
    @config
    @given(corpora())
    def round_trip(corpus) -> None:
        vocab, src, tgt = corpus
        with tempfile.TemporaryDirectory() as directory:
            store = TokenStore.open(write_pairs(Path(directory) / "store", vocab, src, tgt))
            assert store.num_pairs == len(src)
            for side, rows in (("src", src), ("tgt", tgt)):
                assert [store.row(side, i).tolist() for i in range(len(rows))] == rows

    round_trip()


def test_any_sentences_round_trip_through_a_store():
    check_round_trip()


def test_the_round_trip_catches_a_planted_bug(monkeypatch):
    """Starts counted from each chunk rather than from the file: the second chunk's rows go wrong."""
    real = StoreWriter.append

    def forgetful(self, name, rows):
        starts = real(self, name, rows)
        return starts - (self._positions[name] - sum(len(row) for row in rows))

    monkeypatch.setattr(StoreWriter, "append", forgetful)
    with pytest.raises(AssertionError):
        check_round_trip(PLANTED)


LENGTHS = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=60)


def check_plan_covers_each_pair_once(config: settings = FEW) -> None:
    @config
    @given(LENGTHS, st.integers(1, 300), st.integers(0, 2**32), st.integers(0, 5), st.booleans(),
           st.integers(1, 8))
    def covers(lengths, max_tokens, seed, epoch, shuffle, world_size) -> None:
        src = np.array([s for s, _ in lengths], dtype=np.int32)
        tgt = np.array([t for _, t in lengths], dtype=np.int32)
        plan = plan_token_batches(src, tgt, max_tokens, shuffle=shuffle, seed=seed, epoch=epoch)
        every = np.concatenate(plan) if plan else np.zeros(0, dtype=np.int64)
        assert sorted(every.tolist()) == list(range(len(lengths)))  # each pair exactly once
        size = np.maximum(src, tgt) + 1
        for batch in plan:  # under the budget, unless one pair alone is over it
            assert len(batch) == 1 or len(batch) * int(size[batch].max()) <= max_tokens
        shards = [shard(plan, rank, world_size) for rank in range(world_size)]
        assert len({len(s) for s in shards}) == 1  # every process gets as many batches
        taken = [int(i) for s in shards for batch in s for i in batch]
        assert len(taken) == len(set(taken))  # no pair read by two processes, nor twice by one
        left_out = len(plan) % world_size  # the last batches, so that no process waits
        assert sorted(taken) == sorted(int(i) for batch in plan[: len(plan) - left_out] for i in batch)
        again = plan_token_batches(src, tgt, max_tokens, shuffle=shuffle, seed=seed, epoch=epoch)
        assert [b.tolist() for b in again] == [b.tolist() for b in plan]  # the plan of (seed, epoch)

    covers()


def test_a_batch_plan_covers_each_pair_once_per_epoch_for_any_seed_and_process_count():
    check_plan_covers_each_pair_once()


def test_the_plan_property_catches_a_planted_bug(monkeypatch):
    """A shuffle that repeats one index (and so drops another) gives some pair twice in an epoch."""
    real = batching._shuffled_range

    def duplicating(count, rng):
        order = real(count, rng).copy()
        if count > 1:
            order[0] = order[-1]
        return order

    monkeypatch.setattr(batching, "_shuffled_range", duplicating)
    with pytest.raises(AssertionError):
        check_plan_covers_each_pair_once(PLANTED)
