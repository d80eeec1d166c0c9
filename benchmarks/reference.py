"""The reference model for benchmarks: the same Transformer built from `torch.nn.Transformer`.

Only benchmarks and tests use `torch.nn.Transformer`; aiayn's own model never does.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from aiayn.model import ModelConfig
from aiayn.model.positional_encoding import sinusoidal_table


class ReferenceTransformer(nn.Module):
    """nn.Transformer (batch_first, ReLU, post-LN) + scaled shared embeddings + sinusoidal
    positions + tied output projection: the shape of `aiayn.Transformer(config)`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        self.embedding = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.register_buffer("positions", sinusoidal_table(c.max_len, c.d_model), persistent=False)
        self.dropout = nn.Dropout(c.dropout)
        self.transformer = nn.Transformer(
            d_model=c.d_model,
            nhead=c.num_heads,
            num_encoder_layers=c.num_encoder_layers,
            num_decoder_layers=c.num_decoder_layers,
            dim_feedforward=c.d_ff,
            dropout=c.dropout,
            batch_first=True,
            norm_first=c.norm_first,
        )
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self.output_projection.weight = self.embedding.weight

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens) * math.sqrt(self.config.d_model)
        return self.dropout(x + self.positions[: tokens.size(1)])

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """(B, S), (B, T) -> (B, T, V) logits."""
        pad = self.config.pad_id
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), dtype=torch.bool)
        hidden = self.transformer(
            self.embed(src),
            self.embed(tgt_in),
            tgt_mask=causal,
            tgt_is_causal=True,
            src_key_padding_mask=src == pad,
            tgt_key_padding_mask=tgt_in == pad,
            memory_key_padding_mask=src == pad,
        )
        return self.output_projection(hidden)


def reference_loss(model: ReferenceTransformer, src, tgt_in, labels, smoothing: float = 0.1):
    """Label-smoothed cross-entropy over all positions, padding ignored, mean per token."""
    logits = model(src, tgt_in)
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        labels.reshape(-1),
        ignore_index=model.config.pad_id,
        label_smoothing=smoothing,
    )
