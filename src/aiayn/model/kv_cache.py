"""Key/value cache for incremental (step-by-step) decoding.

Against the reference: `aiayn.paper.greedy_decode` re-runs the decoder over the whole prefix at
every step; with the cache a step computes the new position's keys and values only and reads
the earlier ones. Earlier positions never attend to later ones (Sec. 3.2.3), so the cached keys
and values are the numbers the full pass computes, and a step's output is the full pass's at
its position. Proved by
`tests/model/test_decoding_cache.py::test_transformer_step_by_step_matches_full_pass` and, on
the trained `dates` model,
`tests/paper/test_equality.py::test_dates_model_log_probs_and_greedy_outputs_equal` (the
engine's cached greedy search gives the reference's outputs).

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


class AttentionCache:
    """Keys and values of one attention layer, each (B, H, S, d_k), or None before filling.

    Appended keys/values (self-attention) live in preallocated (B, H, capacity, d_k) buffers:
    a step writes its positions in place instead of copying the whole prefix, and `reorder`
    (beam search's surviving beams) copies the prefix once, into a second buffer kept for the
    next reorder (a larger one when the next position would not fit). The cache holds the
    buffers and how much of `buffers[0]` is filled (`rows`, `length`); `key`/`value` are views
    of that part, made when asked for (a compiled step then sees the buffers themselves, not
    views of them). Keys/values stored whole (`store`: cross-attention, computed once) are plain
    tensors, reordered by selection.
    """

    def __init__(self) -> None:
        self.buffers: list[tuple[Tensor, Tensor]] = []
        self.rows = 0  # filled rows of buffers[0]
        self.length = 0  # number of cached key positions S
        self.stored: tuple[Tensor, Tensor] | None = None

    @property
    def key(self) -> Tensor | None:
        """(B, H, S, d_k) cached keys, or None before filling."""
        if self.stored is not None:
            return self.stored[0]
        return self.buffers[0][0][: self.rows, :, : self.length] if self.buffers else None

    @property
    def value(self) -> Tensor | None:
        """(B, H, S, d_v) cached values, or None before filling."""
        if self.stored is not None:
            return self.stored[1]
        return self.buffers[0][1][: self.rows, :, : self.length] if self.buffers else None

    def store(self, key: Tensor, value: Tensor) -> None:
        """Keep keys/values (B, H, S, d_k) computed once (cross-attention), contiguous (one
        layout whatever their source, for a compiled step)."""
        self.stored, self.rows, self.length = (key.contiguous(), value.contiguous()), key.size(0), key.size(2)

    def has_room(self, positions: int) -> bool:
        """Whether `append` can write `positions` more positions without growing its buffers."""
        return bool(self.buffers) and self.buffers[0][0].size(2) >= self.length + positions

    def grown_capacity(self, needed: int) -> int:
        """Positions of a new buffer that must hold `needed`: at least twice the cached ones
        (so that a growing prefix is copied O(log S) times)."""
        return max(needed, 2 * self.length, 16)

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add new positions (B, H, t, d_k) and return all keys/values so far."""
        cached, rows = self.length, key.size(0)
        needed = cached + key.size(2)
        if not self.has_room(key.size(2)):  # first append, or out of room
            current = self._allocate(rows, self.grown_capacity(needed), key)
            if self.buffers:
                current[0][:rows, :, :cached] = self.key
                current[1][:rows, :, :cached] = self.value
            self.buffers = [current]
        current = self.buffers[0]
        current[0][:rows, :, cached:needed] = key
        current[1][:rows, :, cached:needed] = value
        self.rows, self.length = rows, needed
        return current[0][:rows, :, :needed], current[1][:rows, :, :needed]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (LongTensor (B',)), e.g. the surviving beams."""
        if self.stored is not None:
            key, value = self.stored
            self.store(key.index_select(0, index), value.index_select(0, index))
            return
        if not self.buffers:
            return
        rows, cached, current = index.size(0), self.length, self.buffers[0]
        # The copy goes where the next position fits: a full cache grows here, where its
        # prefix is copied anyway, rather than in the next step.
        capacity = current[0].size(2) if self.has_room(1) else self.grown_capacity(cached + 1)
        spare = next((b for b in self.buffers if b is not current), None)
        if spare is None or spare[0].size(0) < rows or spare[0].size(2) < capacity:
            spare = self._allocate(max(rows, current[0].size(0)), capacity, current[0])
        torch.index_select(self.key, 0, index, out=spare[0][:rows, :, :cached])
        torch.index_select(self.value, 0, index, out=spare[1][:rows, :, :cached])
        self.buffers, self.rows = [spare, current], rows

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
    def empty(cls, num_layers: int, layer_cache: type[AttentionCache] = AttentionCache) -> DecoderCache:
        """Empty caches for `num_layers` layers, each a `layer_cache` (a runtime may keep its
        buffers another way)."""
        return cls([layer_cache() for _ in range(num_layers)], [layer_cache() for _ in range(num_layers)])

    @property
    def length(self) -> int:
        """Number of target positions decoded so far (the position of the next token)."""
        return self.self_attention[0].length if self.self_attention else 0

    def has_room(self, positions: int) -> bool:
        """Whether a step of `positions` new positions only writes into existing buffers: every
        self-attention buffer has room and the cross-attention keys/values are computed."""
        return all(cache.has_room(positions) for cache in self.self_attention) and all(
            cache.stored is not None for cache in self.cross_attention
        )

    def reorder(self, index: Tensor) -> None:
        """Select batch rows `index` (B',) in every layer: used by beam search."""
        for cache in (*self.self_attention, *self.cross_attention):
            cache.reorder(index)

    def select_sentences(self, index: Tensor) -> None:
        """Keep the sentences `index` (b',) of the cross-attention keys/values (one row per
        sentence, shared by its beams)."""
        for cache in self.cross_attention:
            cache.reorder(index)

    def reorder_beams(self, index: Tensor) -> None:
        """Select decoder rows `index` (R,) of the self-attention keys/values: each surviving
        beam takes the history of the beam it extends."""
        for cache in self.self_attention:
            cache.reorder(index)
