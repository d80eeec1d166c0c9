"""Classification batches: what the loss counts, and each process's share of an epoch."""

import torch

from aiayn.classify.dataset import ClassificationDataset


def dataset(count: int = 40) -> ClassificationDataset:
    ids = [[1] + [5] * (1 + i % 7) for i in range(count)]
    return ClassificationDataset(ids, [i % 2 for i in range(count)], pad_id=0)


def test_a_batch_counts_its_examples():
    batch = next(dataset().batches(32, shuffle=False))
    assert batch.num_targets == len(batch) == batch.labels.numel() == len(batch.indices)
    assert batch.tokens.shape[0] == len(batch)
    assert not hasattr(batch, "num_tgt_tokens")  # one name for the count, in every task's batch


def test_ranks_read_disjoint_equal_shares_of_the_epoch_plan():
    data = dataset()
    plan = [b.indices for b in data.batches(24, seed=3, epoch=1)]
    shares = [[b.indices for b in data.batches(24, seed=3, epoch=1, rank=r, world_size=2)] for r in range(2)]
    assert len(shares[0]) == len(shares[1]) == len(plan) // 2
    assert shares[0] == plan[0::2][: len(plan) // 2] and shares[1] == plan[1::2][: len(plan) // 2]
    resumed = [b.indices for b in data.batches(24, seed=3, epoch=1, start=2, rank=1, world_size=2)]
    assert resumed == shares[1][2:]
    labels = torch.cat([b.labels for b in data.batches(24, seed=3, epoch=1)])
    assert labels.numel() == len(data)  # one process reads every example once
