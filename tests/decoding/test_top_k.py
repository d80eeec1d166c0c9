"""`row_top_k` gives `torch.topk`'s values, whatever the scores."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.decoding.top_k import CHUNK, row_top_k


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 5),
    columns=st.integers(1, 40 * CHUNK),
    k=st.integers(1, 6),
    levels=st.sampled_from([None, 3]),
    blocked=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_row_top_k_is_torch_topk(rows, columns, k, levels, blocked, seed):
    """Values equal `torch.topk`'s, bit for bit; columns distinct, in range, holding those values;
    with distinct scores, the same columns. Scores may tie (`levels`: few distinct values) and be
    -inf (`blocked` share: forbidden tokens, a forced prefix)."""
    k = min(k, columns)
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(rows, columns, generator=generator)
    if levels is not None:
        scores = scores.mul(levels).round()
    scores[torch.rand(rows, columns, generator=generator) < blocked] = float("-inf")
    values, where = row_top_k(scores, k)
    expected, expected_where = scores.topk(k, dim=1)
    assert torch.equal(values, expected)
    assert where.min() >= 0 and where.max() < columns
    assert all(len(set(row)) == k for row in where.tolist())
    assert torch.equal(scores.gather(1, where), values)
    if levels is None and blocked == 0.0:
        assert torch.equal(where, expected_where)
    first_best = scores.max(dim=1, keepdim=True)  # greedy search's choice: the first column of a tie
    assert all(torch.equal(a, b) for a, b in zip(row_top_k(scores, 1), first_best, strict=True))


@pytest.mark.parametrize("columns", [40 * CHUNK, 40 * CHUNK + 7])
def test_the_best_column_may_sit_in_any_chunk(columns):
    """The k best spread over chunks, in the short last one, or all in one chunk."""
    for placed in (
        [5, 6, 7, 8],
        [columns - 1, 3, CHUNK * 20, CHUNK * 20 + 1],
        [CHUNK * 7 + i for i in range(4)],
    ):
        scores = torch.zeros(2, columns)
        scores[:, placed] = torch.tensor([4.0, 3.0, 2.0, 1.0])
        values, where = row_top_k(scores, 4)
        assert where.tolist() == [placed, placed] and values[0].tolist() == [4.0, 3.0, 2.0, 1.0]
