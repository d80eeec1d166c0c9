"""Key/value cache for incremental (step-by-step) decoding.

At decoding step t the decoder needs the keys and values of all earlier target positions
in each masked self-attention layer, and the keys and values of the encoder output in each
encoder-decoder attention layer. Recomputing them every step would re-run the whole decoder
over the prefix; the cache keeps them instead:

- self-attention keys/values grow by one position per step;
- cross-attention keys/values are computed once per source and reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class AttentionCache:
    """Keys and values of one attention layer, each (B, H, S, d_k), or None before filling.

    Appended keys/values (self-attention) live in preallocated (B, H, capacity, d_k) buffers:
    a step writes its positions in place instead of copying the whole prefix, and `reorder`
    (beam search's surviving beams) copies the prefix once, into a second buffer kept for the
    next reorder. `key`/`value` are then views of the filled part. Keys/values set directly
    (cross-attention, computed once) are plain tensors, reordered by selection.
    """

    key: Tensor | None = None
    value: Tensor | None = None
    buffers: list[tuple[Tensor, Tensor]] = field(default_factory=list, repr=False)

    @property
    def length(self) -> int:
        """Number of cached key positions S."""
        return 0 if self.key is None else self.key.size(2)

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add new positions (B, H, t, d_k) and return all keys/values so far."""
        cached, rows = self.length, key.size(0)
        needed = cached + key.size(2)
        current = self._current()
        if current is None or current[0].size(2) < needed:  # first append, or out of room
            current = self._allocate(rows, max(needed, 2 * cached, 16), key)
            if self.key is not None:
                current[0][:rows, :, :cached] = self.key
                current[1][:rows, :, :cached] = self.value
            self.buffers = [current]
        current[0][:rows, :, cached:needed] = key
        current[1][:rows, :, cached:needed] = value
        self.key, self.value = current[0][:rows, :, :needed], current[1][:rows, :, :needed]
        return self.key, self.value

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (LongTensor (B',)), e.g. the surviving beams."""
        if self.key is None:
            return
        current = self._current()
        if current is None:  # set directly (cross-attention): plain tensors
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)
            return
        rows, cached = index.size(0), self.length
        spare = next((b for b in self.buffers if b is not current), None)
        if spare is None or spare[0].size(0) < rows or spare[0].size(2) < current[0].size(2):
            spare = self._allocate(max(rows, current[0].size(0)), current[0].size(2), self.key)
        key = torch.index_select(self.key, 0, index, out=spare[0][:rows, :, :cached])
        value = torch.index_select(self.value, 0, index, out=spare[1][:rows, :, :cached])
        self.key, self.value = key, value
        self.buffers = [spare, current]

    def _current(self) -> tuple[Tensor, Tensor] | None:
        """The buffer pair `key`/`value` are views of (None before the first append, or for
        keys/values set directly)."""
        if self.buffers and self.key is not None and self.buffers[0][0].data_ptr() == self.key.data_ptr():
            return self.buffers[0]
        return None

    @staticmethod
    def _allocate(rows: int, capacity: int, like: Tensor) -> tuple[Tensor, Tensor]:
        shape = (rows, like.size(1), capacity, like.size(3))
        return like.new_empty(shape), like.new_empty(shape)


@dataclass
class DecoderCache:
    """The cache of a whole decoder stack: one (self, cross) pair of caches per layer."""

    self_attention: list[AttentionCache] = field(default_factory=list)
    cross_attention: list[AttentionCache] = field(default_factory=list)

    @classmethod
    def empty(cls, num_layers: int) -> DecoderCache:
        return cls(
            [AttentionCache() for _ in range(num_layers)],
            [AttentionCache() for _ in range(num_layers)],
        )

    @property
    def length(self) -> int:
        """Number of target positions decoded so far (the position of the next token)."""
        return self.self_attention[0].length if self.self_attention else 0

    def reorder(self, index: Tensor) -> None:
        """Select batch rows `index` (B',) in every layer: used by beam search."""
        for cache in (*self.self_attention, *self.cross_attention):
            cache.reorder(index)
