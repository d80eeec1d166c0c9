"""Positional encoding (Sec. 3.5): sinusoidal, or learned as an option.

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

"We also experimented with using learned positional embeddings instead, and found that the
two versions produced nearly identical results" (Table 3, row E): `LearnedPositionalEmbedding`.
Both add positions to (B, T, d_model) embeddings, starting at `offset` (used when decoding
one step at a time), and refuse sequences past their table's `max_len`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The (max_len, d_model) table PE of Sec. 3.5 (float32)."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # pos
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )  # 1 / 10000^(2i / d_model)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * div_term)
    table[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return table.float()


def _check_length(offset: int, length: int, max_len: int) -> None:
    if offset + length > max_len:
        raise ValueError(
            f"sequence positions {offset}..{offset + length - 1} exceed the positional table "
            f"(max_len={max_len}); raise ModelConfig.max_len or shorten the input"
        )


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table; precomputed once, not a parameter, not saved."""

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def reset_buffers(self) -> None:
        """Recompute the table in place (on its device), e.g. once a layout built without
        storage has been given some."""
        with torch.no_grad():
            self.table.copy_(sinusoidal_table(self.max_len, self.d_model))

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (B, T, d_model) -> x + PE[offset : offset + T]."""
        _check_length(offset, x.size(1), self.max_len)
        return x + self.table[offset : offset + x.size(1)].to(x.dtype)


class LearnedPositionalEmbedding(nn.Module):
    """Adds a learned (max_len, d_model) position embedding."""

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)  # initialised in aiayn.model.initialization

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (B, T, d_model) -> x + P[offset : offset + T]."""
        _check_length(offset, x.size(1), self.max_len)
        return x + self.embedding.weight[offset : offset + x.size(1)].to(x.dtype)


def positional_encoding(kind: str, d_model: int, max_len: int) -> nn.Module:
    """Build 'sinusoidal' or 'learned' positions."""
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, max_len)
    if kind == "learned":
        return LearnedPositionalEmbedding(d_model, max_len)
    raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {kind!r}")
