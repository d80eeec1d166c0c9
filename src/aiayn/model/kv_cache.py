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
    """Keys and values of one attention layer, each (B, H, S, d_k), or None before filling."""

    key: Tensor | None = None
    value: Tensor | None = None

    @property
    def length(self) -> int:
        """Number of cached key positions S."""
        return 0 if self.key is None else self.key.size(2)

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add new positions (B, H, t, d_k) and return all keys/values so far."""
        if self.key is None:
            self.key, self.value = key, value
        else:
            self.key = torch.cat([self.key, key], dim=2)
            self.value = torch.cat([self.value, value], dim=2)
        return self.key, self.value

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (LongTensor (B',)), e.g. the surviving beams."""
        if self.key is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)


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
