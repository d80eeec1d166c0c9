"""Encoder-only model for sequence classification, from the same blocks.

The encoder stack reads the whole sequence with bidirectional self-attention; the
encoder outputs at real (non-pad) positions are averaged and a linear layer gives class
logits.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from aiayn.model import masks
from aiayn.model.config import ModelConfig
from aiayn.model.context import AttentionContext
from aiayn.model.deprecated_pretrained import PretrainedMethods
from aiayn.model.embeddings import TokenEmbedding
from aiayn.model.encoder import Encoder
from aiayn.model.initialization import init_weights
from aiayn.model.positional_encoding import positional_encoding


class EncoderOnly(PretrainedMethods, nn.Module):
    """`model(tokens)`: (B, S) ids -> (B, num_classes) logits (mean-pooled encoder output)."""

    model_type = "encoder_only"

    def __init__(self, config: ModelConfig, num_classes: int) -> None:
        super().__init__()
        if not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
        self.config = c = config
        self.num_classes = num_classes
        self.embedding = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id, c.scale_embedding)
        self.positional = positional_encoding(c.positional, c.d_model, c.max_len)
        self.embedding_dropout = nn.Dropout(c.dropout)
        self.encoder = Encoder(c)
        self.classifier = nn.Sequential(nn.Dropout(c.dropout), nn.Linear(c.d_model, num_classes))
        init_weights(self)

    def extra_json(self) -> dict[str, Any]:
        return {"num_classes": self.num_classes}

    def forward(self, tokens: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """tokens: (B, S) ids; padding_mask: (B, S) bool, True at real tokens -> (B, C) logits."""
        if padding_mask is None:
            padding_mask = masks.padding_mask(tokens, self.config.pad_id)
        x = self.embedding_dropout(self.positional(self.embedding(tokens)))  # (B, S, D)
        x = self.encoder(x, AttentionContext.bidirectional(padding_mask))
        weights = padding_mask.unsqueeze(-1).to(x.dtype)  # (B, S, 1)
        pooled = (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # mean over real tokens
        return self.classifier(pooled)
