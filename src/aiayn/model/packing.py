"""Packed tokens: run the position-wise layers on real tokens only.

Against the reference: `aiayn.paper` runs every sub-layer on the padded (B, T, D) batch, and
its loss ignores the padding positions; the packed training pass runs the position-wise layers
on the N real tokens alone. A position-wise layer's output at a position depends on that
position only, and attention masks padding keys in both, so every real position gets the
padded pass's value and gradient. Proved by
`tests/paper/test_equality.py::test_gradients_equal_after_one_step` (the engine's packed
training loss and the reference's loss give the same gradients) and
`tests/model/test_packing.py::test_packed_pass_matches_padded_values_and_gradients`.

Every layer of the Transformer but attention is position-wise: the Q/K/V and output
projections, the feed-forward network (Sec. 3.3), LayerNorm, dropout and the residual
additions treat each position on its own. In a padded (B, T, D) batch they also compute
every padding position, which the loss then throws away (benchmarks/RESULTS.md has the
share on Multi30k batches).

`PackedLayout` records where the N real tokens of a padded batch sit. Between attention
calls the training pass keeps its states *packed* as (N, D); each attention layer unpacks
its projected queries/keys/values to (B, T, .) for the (B, H, T, S) score matmuls and packs
its result again (the `query_layout` / `memory_layout` of an `AttentionContext`). The real
positions get exactly the values of the padded computation; padding positions read zeros.

Why packing reaches into attention, rather than stopping at the feed-forward sub-layers and
the loss (where attention and the stacks would see one (B, T, D) shape): the Q/K/V and output
projections of an attention sub-layer hold 4 d_model^2 weights against the FFN's 8 d_model^2,
so an encoder layer has half as many position-wise weights around attention as in its FFN and
a decoder layer (two attention sub-layers) as many, each sub-layer with its own LayerNorm,
dropout and residual. Packing the feed-forward
sub-layers alone, each packing and unpacking around its call, keeps too small a part of the
packed pass's gain in training speed to justify the simpler shape (the measurement is
`benchmarks/packing_share.py`; its figures are in benchmarks/RESULTS.md).

The one host synchronisation of the model: a layout's size N (`from_padding_mask`'s
`nonzero`, and the count `Transformer._select` checks) is read on the host, once per packed
training pass; every other pass of the model reads nothing (`tests/model/test_no_host_sync.py`).
It stays here, not where batches are made: the layout is the model's business (the data code
knows no model), and a training step waits for the host anyway (the loss selects its labels
with the same mask, the trainer reads the gradient norm), so moving it would not make the step
free of synchronisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class PackedLayout:
    """The real-token positions of a padded (B, T) batch, row-major.

    index: (N,) flat positions b * T + t of the real tokens.
    batch, length: B and T of the padded layout.
    """

    index: Tensor
    batch: int
    length: int

    @classmethod
    def from_padding_mask(cls, padding_mask: Tensor) -> PackedLayout:
        """(B, T) bool mask, True at real tokens (see `aiayn.model.masks`)."""
        if padding_mask.dim() != 2 or padding_mask.dtype != torch.bool:
            raise ValueError(f"padding_mask must be a (B, T) bool tensor, got {tuple(padding_mask.shape)}")
        batch, length = padding_mask.shape
        return cls(padding_mask.reshape(-1).nonzero().squeeze(1), batch, length)

    @property
    def num_tokens(self) -> int:
        """N, the number of real tokens."""
        return self.index.numel()

    def pack(self, x: Tensor) -> Tensor:
        """(B, T, F) -> (N, F): the rows of the real tokens, row-major."""
        return x.reshape(self.batch * self.length, -1).index_select(0, self.index)

    def unpack(self, x: Tensor) -> Tensor:
        """(N, F) -> (B, T, F), zeros at the padding positions."""
        padded = x.new_zeros(self.batch * self.length, x.size(-1))
        return padded.index_copy(0, self.index, x).view(self.batch, self.length, -1)


def padded(x: Tensor, layout: PackedLayout | None) -> Tensor:
    """(N, F) packed rows -> (B, T, F) with `layout`; `x` itself when there is no layout."""
    return layout.unpack(x) if layout is not None else x
