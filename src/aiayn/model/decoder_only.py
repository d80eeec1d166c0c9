"""Decoder-only (GPT-style) language model from the same blocks.

The decoder stack without encoder-decoder attention: each position attends to itself and
earlier positions (the subsequent mask of Sec. 3.2.3) and predicts the next token. Uses
the target vocabulary (`tgt_vocab_size`) and `num_decoder_layers` blocks.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiayn.model.config import ModelConfig
from aiayn.model.context import AttentionContext
from aiayn.model.decoder import Decoder
from aiayn.model.deprecated_pretrained import PretrainedMethods
from aiayn.model.embeddings import TokenEmbedding
from aiayn.model.initialization import init_weights
from aiayn.model.kv_cache import DecoderCache
from aiayn.model.positional_encoding import positional_encoding


class DecoderOnlyLM(PretrainedMethods, nn.Module):
    """`model(tokens)`: (B, T) ids -> (B, T, V) next-token logits."""

    model_type = "decoder_only"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = c = config
        self.embedding = TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id, c.scale_embedding)
        self.positional = positional_encoding(c.positional, c.d_model, c.max_len)
        self.embedding_dropout = nn.Dropout(c.dropout)
        self.decoder = Decoder(c, cross_attention=False)
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size, bias=c.output_bias)
        if c.tie_output:
            self.output_projection.weight = self.embedding.weight
        init_weights(self, self.output_projection)

    def new_cache(self) -> DecoderCache:
        """An empty key/value cache for step-by-step generation."""
        return DecoderCache.empty(self.config.num_decoder_layers)

    def forward(
        self,
        tokens: Tensor,
        padding_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        return_hidden: bool = False,
    ) -> Tensor:
        """Next-token logits.

        Args:
            tokens: (B, T) token ids (with a cache: only the new positions).
            padding_mask: (B, T) bool, True at real tokens. Language-model windows hold no
                padding, so by default none is assumed (pure causal attention).
            cache: a `DecoderCache` from `new_cache()`, filled in place.
            return_hidden: return the final states (B, T, D) instead of logits.

        Returns:
            (B, T, V) logits (or (B, T, D) hidden states).
        """
        if cache is not None and padding_mask is not None:
            raise ValueError("padding_mask is not supported together with a cache")
        if cache is not None:
            context = AttentionContext.continuing(cache.length, tokens.size(1), tokens.device)
        else:
            context = AttentionContext.causal(padding_mask)
        offset = cache.length if cache is not None else 0
        x = self.embedding_dropout(self.positional(self.embedding(tokens), offset))  # (B, T, D)
        hidden = self.decoder(x, context, cache=cache)
        return hidden if return_hidden else self.output_projection(hidden)

    @torch.no_grad()
    def attention_maps(self, tokens: Tensor) -> list[Tensor]:
        """Masked self-attention probabilities of every layer (Sec. 3.2.3) for one pass over
        `tokens` (B, T): one (B, H, T, T) tensor per layer, zero above the diagonal."""
        maps: list[Tensor] = []
        context = AttentionContext.causal(None, attention_maps=maps)
        self.decoder(self.embedding_dropout(self.positional(self.embedding(tokens))), context)
        return maps
