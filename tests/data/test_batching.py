"""Batches: layout, token budget, coverage, determinism, resuming, sharding."""

import logging
import random

import pytest
import torch

from aiayn.core.errors import ConfigError
from aiayn.data import ParallelDataset, make_batch, shard, token_batches
from aiayn.data.special_tokens import TRAINED_SPECIALS, SpecialTokens

# The batches take their ids from the tokenizer: here, as a loaded one might have them, after
# the words (ids 4..99), and 0..3 ordinary words.
SPECIALS = SpecialTokens(pad_id=100, bos_id=101, eos_id=102, unk_id=None)
PAD, BOS, EOS = SPECIALS.pad_id, SPECIALS.bos_id, SPECIALS.eos_id


def random_dataset(n: int = 600, seed: int = 0, max_len: int = 40) -> ParallelDataset:
    rng = random.Random(seed)
    src = [[rng.randint(0, 99) for _ in range(rng.randint(1, max_len))] for _ in range(n)]
    tgt = [[rng.randint(0, 99) for _ in range(rng.randint(1, max_len))] for _ in range(n)]
    return ParallelDataset(src, tgt, SPECIALS)


@pytest.fixture(scope="module")
def data() -> ParallelDataset:
    return random_dataset()


def unpad(row: torch.Tensor) -> list[int]:
    return [int(t) for t in row if t != PAD]


@pytest.mark.parametrize("specials", [TRAINED_SPECIALS, SPECIALS])
def test_make_batch_layout(specials):
    pad, bos, eos = specials.pad_id, specials.bos_id, specials.eos_id
    batch = make_batch([[5, 6, 7], [8]], [[9], [10, 11, 12, 13]], indices=[4, 2], specials=specials)
    assert batch.src.tolist() == [[5, 6, 7, eos], [8, eos, pad, pad]]
    assert batch.tgt_in.tolist() == [[bos, 9, pad, pad, pad], [bos, 10, 11, 12, 13]]
    assert batch.labels.tolist() == [[9, eos, pad, pad, pad], [10, 11, 12, 13, eos]]
    assert batch.src.dtype == batch.tgt_in.dtype == batch.labels.dtype == torch.long
    assert (batch.num_src_tokens, batch.num_targets) == (6, 7)
    assert batch.indices == [4, 2] and len(batch) == 2 and batch.pad_id == pad
    assert make_batch([[5]], [[6]], specials=specials).indices == [0]
    with pytest.raises(ValueError):
        make_batch([[5]], [[6], [7]], specials=specials)


def test_batch_to_moves_every_tensor():
    batch = make_batch([[5, 6]], [[7]], indices=[3], specials=SPECIALS).to("meta")
    assert batch.src.device.type == batch.tgt_in.device.type == batch.labels.device.type == "meta"
    assert batch.indices == [3] and batch.num_targets == 2


def test_shift_right_and_nothing_lost_over_an_epoch(data):
    seen = []
    for batch in data.batches(max_tokens=500, shuffle=True, seed=1):
        tgt_in, labels = batch.tgt_in, batch.labels
        assert (tgt_in[:, 0] == BOS).all()
        mask = tgt_in[:, 1:] != PAD  # decoder inputs after <bos>: the previous labels
        assert torch.equal(tgt_in[:, 1:][mask], labels[:, :-1][mask])
        assert torch.equal(tgt_in != PAD, labels != PAD)
        for row, i in enumerate(batch.indices):
            src, tgt = data[i]
            assert unpad(batch.src[row]) == [*src, EOS]
            assert unpad(batch.labels[row]) == [*tgt, EOS]
            assert unpad(batch.tgt_in[row]) == [BOS, *tgt]
        assert batch.num_src_tokens == int((batch.src != PAD).sum())
        assert batch.num_targets == int((batch.labels != PAD).sum())
        seen += batch.indices
    assert sorted(seen) == list(range(len(data)))


@pytest.mark.parametrize("max_tokens", [41, 200, 1000])
@pytest.mark.parametrize("shuffle", [True, False])
def test_budget_and_each_index_once(data, max_tokens, shuffle):
    for epoch in range(2):
        plan = data.batch_indices(max_tokens, shuffle=shuffle, seed=5, epoch=epoch)
        flat = [i for batch in plan for i in batch]
        assert sorted(flat) == list(range(len(data)))
        for batch in data.batches(max_tokens, shuffle=shuffle, seed=5, epoch=epoch):
            assert len(batch) * max(batch.src.size(1), batch.tgt_in.size(1)) <= max_tokens


def test_batches_group_similar_lengths(data):
    plan = token_batches([len(s) for s in data.src_ids], [len(t) for t in data.tgt_ids], 1000)

    def positions(i: int) -> int:
        return max(len(data.src_ids[i]), len(data.tgt_ids[i])) + 1

    real = sum(positions(i) for i in range(len(data)))
    padded = sum(len(batch) * max(positions(i) for i in batch) for batch in plan)
    assert padded < 1.15 * real  # random batching would pad ~50% more


def test_unshuffled_batches_are_sorted_by_length():
    plan = token_batches([5, 1, 9, 3], [2, 8, 1, 3], max_tokens=10, shuffle=False)
    assert plan == [[3], [0], [1], [2]]  # sizes 4, 6, 9, 10
    assert token_batches([1, 1, 1], [1, 1, 1], max_tokens=6, shuffle=False) == [[0, 1, 2]]


def test_oversized_example_gets_its_own_batch_and_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="aiayn.data.batching"):
        plan = token_batches([2, 50, 2, 3], [2, 2, 2, 70], max_tokens=20, shuffle=True)
    assert sorted(i for b in plan for i in b) == [0, 1, 2, 3]
    assert [1] in plan and [3] in plan
    assert "2 example(s)" in caplog.text


def test_deterministic_for_seed_and_epoch(data):
    def plan(seed: int, epoch: int) -> list[list[int]]:
        return data.batch_indices(300, shuffle=True, seed=seed, epoch=epoch)

    assert plan(0, 0) == plan(0, 0)
    assert plan(0, 0) != plan(0, 1)
    assert plan(0, 0) != plan(1, 0)
    assert random_dataset(seed=0).batch_indices(300, seed=0) == plan(0, 0)


def test_start_k_equals_skipping(data):
    full = [b.indices for b in data.batches(300, shuffle=True, seed=2, epoch=3)]
    for k in (0, 1, 7, len(full) - 1, len(full)):
        resumed = [b.indices for b in data.batches(300, shuffle=True, seed=2, epoch=3, start=k)]
        assert resumed == full[k:]
    assert data.num_batches(300, shuffle=True, seed=2, epoch=3) == len(full)


def test_shard_is_disjoint_and_even():
    batches = [[i] for i in range(11)]
    parts = [shard(batches, rank, 3) for rank in range(3)]
    assert [len(p) for p in parts] == [3, 3, 3]
    flat = [b[0] for p in parts for b in p]
    assert sorted(flat) == list(range(9))  # the 2 leftover batches are dropped
    assert shard(batches, 0, 1) == batches
    for rank, world in [(3, 3), (-1, 2), (0, 0)]:
        with pytest.raises(ConfigError):
            shard(batches, rank, world)


def test_dataset_ranks_get_disjoint_examples(data):
    world = 4
    full = data.batch_indices(200, seed=9, epoch=1)
    per_rank = [
        data.batch_indices(200, seed=9, epoch=1, rank=r, world_size=world) for r in range(4)
    ]
    assert len({len(p) for p in per_rank}) == 1
    indices = [i for p in per_rank for b in p for i in b]
    assert len(indices) == len(set(indices))
    assert sorted(map(tuple, (b for p in per_rank for b in p))) == sorted(
        map(tuple, full[: len(full) - len(full) % world])
    )


def test_from_pairs_uses_the_tokenizers():
    class Letters:
        specials = SpecialTokens(pad_id=0, bos_id=1, eos_id=2, unk_id=None)

        def encode_batch(self, texts: list[str]) -> list[list[int]]:
            return [[ord(c) for c in t] for t in texts]

    ds = ParallelDataset.from_pairs([("ab", "c"), ("d", "ef")], Letters(), Letters())
    assert len(ds) == 2 and ds[1] == ([100], [101, 102]) and ds.specials == Letters.specials
