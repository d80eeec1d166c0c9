"""The k best next tokens of each row, found through the best columns of a few chunks.

Against the reference: `aiayn.paper`'s search takes `torch.topk` over the whole vocabulary; this
takes it over fewer columns and returns the same values. Where values tie, the columns may come
in another order (which of two equal scores is first is unspecified for `torch.topk` too); the
best alone (k = 1) is the first column holding the maximum, as `torch.max` gives it.
Proved by `tests/decoding/test_top_k.py::test_row_top_k_is_torch_topk` (any scores, with ties
and -inf) and by the searches' own tests.

Why: every step of beam search takes the 2K best of each of its R rows of V log-probabilities,
and greedy search the best one. PyTorch's CPU `topk` copies each row into (value, index) pairs
and partially sorts them: for V in the thousands, several times the cost of reading the row.
Here the row is read once, as chunks of `CHUNK` columns whose maxima are taken (a vectorised
reduction); `torch.topk` then runs on the k best chunks' columns alone (and on the last
columns, when V is not a multiple of `CHUNK`).

Exact: take the k chunks with the largest maxima. Any column outside them lies in a chunk whose
maximum is at most each of the k chosen maxima, so the chosen chunks hold k values no smaller
than it: the k largest values of the row are among the chosen chunks' columns.
"""

from __future__ import annotations

import torch
from torch import Tensor

CHUNK = 64
"""Columns per chunk: large enough that the chunk maxima are few, small enough that the k
chosen chunks are few columns (the fastest on the decoders' (R, V) shapes, benchmarks/RESULTS.md)."""


def row_top_k(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """(R, V) scores -> the k largest of each row, best first, (R, k), and their columns (R, k);
    for k = 1, `scores.max(dim=1, keepdim=True)` exactly.

    The values `torch.topk(scores, k, dim=1)` gives (see the module doc for ties); a vocabulary
    of fewer than 2k chunks goes to `torch.topk` directly.
    """
    rows, columns = scores.shape
    whole = columns // CHUNK  # full chunks; the last columns % CHUNK are always candidates
    if whole < 2 * k:
        return scores.max(dim=1, keepdim=True) if k == 1 else scores.topk(k, dim=1)
    maxima = scores[:, : whole * CHUNK].reshape(rows, whole, CHUNK).amax(dim=2)  # (R, n)
    # k = 1: the first chunk holding the maximum, then its first column (torch.max's choice).
    chosen = maxima.argmax(dim=1, keepdim=True) if k == 1 else maxima.topk(k, dim=1).indices  # (R, k)
    offsets = torch.arange(CHUNK, device=scores.device)
    candidates = (chosen[:, :, None] * CHUNK + offsets).view(rows, k * CHUNK)
    if columns > whole * CHUNK:  # the last columns, fewer than a chunk, are candidates too
        rest = torch.arange(whole * CHUNK, columns, device=scores.device).expand(rows, -1)
        candidates = torch.cat([candidates, rest], dim=1)
    values = scores.gather(1, candidates)  # (R, k * CHUNK + the last columns), columns ascending if k = 1
    best, where = values.max(dim=1, keepdim=True) if k == 1 else values.topk(k, dim=1)  # (R, k)
    return best, candidates.gather(1, where)
