"""Position-wise feed-forward network (Sec. 3.3, Eq. 2).

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

"applied to each position separately and identically": two linear maps with a ReLU between
them, inner width d_ff. Other activations are options, for imported models: the exact GELU,
its tanh approximation ("gelu_new", GPT-2) and SiLU ("swish", Marian / OPUS-MT).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

ACTIVATION_FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_new": functools.partial(F.gelu, approximate="tanh"),
    "swish": F.silu,
}


class PositionwiseFeedForward(nn.Module):
    """(B, T, d_model) -> (B, T, d_model) through an inner layer of width d_ff."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        if activation not in ACTIVATION_FUNCTIONS:
            names = ", ".join(ACTIVATION_FUNCTIONS)
            raise ValueError(f"activation must be one of {names}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)  # W_1, b_1
        self.linear2 = nn.Linear(d_ff, d_model)  # W_2, b_2
        self.activation = ACTIVATION_FUNCTIONS[activation]
        # Dropout on the inner activations is not in the paper (Sec. 5.4 names only sub-layer
        # outputs and embeddings); off by default (ModelConfig.activation_dropout).
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        """x: (B, T, d_model) -> (B, T, d_model)."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
