"""Token embeddings (Sec. 3.4).

"We use learned embeddings to convert the input tokens and output tokens to vectors of
dimension d_model ... In the embedding layers, we multiply those weights by sqrt(d_model)."
"""

from __future__ import annotations

import math

from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    """(B, T) token ids -> (B, T, d_model) vectors, scaled by sqrt(d_model) (unless `scale` is off).

    The weights are initialised in `aiayn.model.initialization`.
    """

    def __init__(self, vocab_size: int, d_model: int, pad_id: int | None = 0, scale: bool = True) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model) if scale else 1.0  # GPT-2 (imported) does not scale
        self.pad_id = pad_id

    @property
    def weight(self) -> nn.Parameter:
        """The (V, d_model) embedding matrix (shared with the output projection when tied)."""
        return self.embedding.weight

    def forward(self, tokens: Tensor) -> Tensor:
        """tokens: (B, T) LongTensor -> (B, T, d_model)."""
        return self.embedding(tokens) * self.scale

