"""A self-attention cache that beam search reorders without copying keys and values.

Against the reference: `aiayn.paper.greedy_decode` re-runs the decoder over the whole prefix at
every step. The engine's cache (`aiayn.model.kv_cache.AttentionCache`) keeps each row's earlier
keys and values in that row's slice of a buffer, so when beam search keeps the beams that
survive a step it copies every surviving row's prefix: all layers' keys and values, every step.
This cache keeps them where they were computed instead, and each row's *ancestry*: which row
computed its key at each earlier position. Attention reads a row's keys through its ancestry.
The keys and values read are the same numbers in the same order: an eager step with this cache
computes what it computes with the copying one, bit for bit; compiled, attention's loops read
through the table and sum in their own order, as the compiled step always did (equal up to float
rounding). Proved by `tests/runtime/test_beam_history.py` (any appends and reorders read the
copying cache's keys and values; beam and greedy search with this cache give its hypotheses and
scores) and, compiled, by `tests/decoding/test_compiled_decoding.py` (the eager decoder's
hypotheses).

Why: the reorder copy reads and writes R x S x D floats per layer, twice (keys and values), on
every step; on a CPU it is bound by memory bandwidth and grows with the prefix, and at a full
beam batch it costs a noticeable share of a decode (benchmarks/RESULTS.md). Here the reorder
selects columns of the ancestry table, S x R integers, where keys and values are read; a compiled step
(`aiayn.runtime.compiled`) folds the lookup into attention's loop, which reads each key once
either way. An eager step gathers the keys into a tensor, a copy as large as the one saved, so
only compiled runners use this cache.

Layout: `history` (capacity + 1, row_capacity, H, d_k), the keys (and values) of position s
computed by row r at [s, r]; `slots` (capacity + 1, row_capacity + 1) int64, row r's key at
position s at flat index slots[s, r] = s * row_capacity + (the row that computed it). A step
writes position t of each row r at [t, r] (slots[t, r] = t * row_capacity + r); a reorder keeps
the columns `index` of `slots`. The table is position-major so that, compiled, attention's
loops run along d_k, not along the positions (Inductor vectorises the dimension most of a
loop's reads are contiguous in). Both keep a position spare, and the table a row, so the part
a step reads is never a whole buffer (a view of a whole buffer is another layout to a
compiler: compiled again).
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.model.kv_cache import AttentionCache

FIRST_CAPACITY = 32
"""Positions the history first holds: most sentences' outputs are shorter (benchmarks/RESULTS.md)."""


class BeamHistoryCache(AttentionCache):
    """An `AttentionCache` whose appended keys/values stay where they were computed (see the
    module doc); keys/values stored whole (cross-attention) are the base class's."""

    def __init__(self) -> None:
        super().__init__()
        self.history: tuple[Tensor, Tensor] | None = None  # (capacity + 1, row_capacity, H, d_k) keys, values
        self.slots: Tensor | None = None  # (capacity + 1, row_capacity + 1) flat positions in history
        self.spare_slots: Tensor | None = None  # a second table, where a reorder writes

    @property
    def key(self) -> Tensor | None:
        """(B, H, S, d_k) cached keys (gathered), or None before filling."""
        if self.stored is not None:  # not `super().key`, which the compiler cannot trace
            return self.stored[0]
        return None if self.history is None else self._read(self.history[0])

    @property
    def value(self) -> Tensor | None:
        """(B, H, S, d_v) cached values (gathered), or None before filling."""
        if self.stored is not None:  # not `super().value`, which the compiler cannot trace
            return self.stored[1]
        return None if self.history is None else self._read(self.history[1])

    @property
    def capacity(self) -> int:
        """Positions the history holds, one kept spare."""
        return 0 if self.history is None else self.history[0].size(0) - 1

    @property
    def row_capacity(self) -> int:
        """Rows the history holds per position."""
        return 0 if self.history is None else self.history[0].size(1)

    def grown_capacity(self, needed: int) -> int:
        """Positions of a new history that must hold `needed`: at least twice the cached ones
        and at least `FIRST_CAPACITY`, so that most outputs never outgrow the first (growing
        copies the whole history)."""
        return max(super().grown_capacity(needed), FIRST_CAPACITY)

    def has_room(self, positions: int) -> bool:
        """Whether `append` can write `positions` more positions without growing."""
        return self.history is not None and self.capacity >= self.length + positions

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add new positions (B, H, t, d_k) and return all keys/values so far, (B, H, S, d_k)."""
        rows, positions = key.size(0), key.size(2)
        start, needed = self.length, self.length + positions
        key, value = key.permute(2, 0, 1, 3), value.permute(2, 0, 1, 3)  # (t, B, H, d_k)
        if not self.has_room(positions) or rows > self.row_capacity:
            self._grow(max(rows, self.row_capacity), self.grown_capacity(needed), key)
        assert self.history is not None and self.slots is not None
        keys, values = self.history
        keys[start:needed, :rows] = key
        values[start:needed, :rows] = value
        row_capacity = keys.size(1)
        written = torch.arange(start, needed, device=key.device) * row_capacity  # (t,)
        self.slots[start:needed, :rows] = written[:, None] + torch.arange(rows, device=key.device)
        self.rows, self.length = rows, needed
        return self._read(keys), self._read(values)

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (LongTensor (B',)): each takes the ancestry of the row it
        continues; nothing is copied but the table."""
        if self.stored is not None or self.history is None:
            super().reorder(index)
            return
        assert self.slots is not None
        rows = index.size(0)
        if rows > self.row_capacity or not self.has_room(1):  # grow here, not in the next step
            self._grow(max(rows, self.row_capacity), self.grown_capacity(self.length + 1), self.history[0])
        assert self.slots is not None
        if self.spare_slots is None or self.spare_slots.shape != self.slots.shape:
            self.spare_slots = torch.empty_like(self.slots)
        torch.index_select(self.slots[: self.length], 1, index, out=self.spare_slots[: self.length, :rows])
        self.slots, self.spare_slots = self.spare_slots, self.slots
        self.rows = rows

    def varying(self) -> list[tuple[Tensor, tuple[int, ...]]]:
        """The tensors a compiled step reads, each with its dimensions that vary from call to
        call (for `aiayn.runtime.kept`'s examples)."""
        if self.stored is not None:
            return [(tensor, (0, 2)) for tensor in self.stored]
        assert self.history is not None and self.slots is not None
        return [(self.history[0], (0, 1)), (self.history[1], (0, 1)), (self.slots, (0, 1))]

    def _read(self, history: Tensor) -> Tensor:
        """The filled rows' keys (or values) at every cached position, through their slots:
        (B, H, S, d_k)."""
        assert self.slots is not None
        flat = history.view(-1, history.size(2), history.size(3))  # (capacity * row_capacity, H, d_k)
        return flat[self.slots[: self.length, : self.rows].t()].permute(0, 2, 1, 3)

    def _grow(self, row_capacity: int, capacity: int, like: Tensor) -> None:
        """New buffers of `capacity` positions (one more kept spare) and `row_capacity` rows of
        (H, d_k), `like`'s last two sizes, dtype and device, holding what is cached; the table's
        flat positions follow the new row count."""
        shape = (capacity + 1, row_capacity, like.size(-2), like.size(-1))
        history = (like.new_empty(shape), like.new_empty(shape))
        slots = torch.zeros(capacity + 1, row_capacity + 1, dtype=torch.long, device=like.device)
        if self.history is not None and self.slots is not None:
            old_rows, filled = self.row_capacity, self.length
            for new, old in zip(history, self.history, strict=True):
                new[:filled, :old_rows] = old[:filled]
            used = self.slots[:filled, : self.rows]
            slots[:filled, : self.rows] = used // old_rows * row_capacity + used % old_rows
        self.history, self.slots, self.spare_slots = history, slots, None
