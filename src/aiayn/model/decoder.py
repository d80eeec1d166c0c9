"""The decoder stack (Sec. 3.1).

"In addition to the two sub-layers in each encoder layer, the decoder inserts a third
sub-layer, which performs multi-head attention over the output of the encoder stack ...
We also modify the self-attention sub-layer in the decoder stack to prevent positions from
attending to subsequent positions. This masking, combined with fact that the output
embeddings are offset by one position, ensures that the predictions for position i can
depend only on the known outputs at positions less than i."

`cross_attention=False` drops the middle sub-layer: the GPT-style decoder-only block.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.model.config import ModelConfig
from aiayn.model.context import AttentionContext
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.kv_cache import AttentionCache, DecoderCache
from aiayn.model.multi_head_attention import MultiHeadAttention
from aiayn.model.sublayer import SublayerConnection


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention (optional), feed-forward."""

    def __init__(self, config: ModelConfig, cross_attention: bool = True) -> None:
        super().__init__()
        c = config

        def sublayer() -> SublayerConnection:
            return SublayerConnection(c.d_model, c.dropout, c.norm_first, c.layer_norm_eps)

        self.self_attention = MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout, c.head_dim)
        self.self_attention_sublayer = sublayer()
        if cross_attention:
            self.cross_attention = MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout, c.head_dim)
            self.cross_attention_sublayer = sublayer()
        else:
            self.cross_attention = None
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.activation_dropout, c.activation)
        self.feed_forward_sublayer = sublayer()

    def forward(
        self,
        x: Tensor,
        target: AttentionContext,
        source: AttentionContext | None = None,
        self_cache: AttentionCache | None = None,
        cross_cache: AttentionCache | None = None,
    ) -> Tensor:
        """One decoder layer.

        Args:
            x: (B, T, D) target-side states (or packed (N, D)).
            target: the masked self-attention's context.
            source: the encoder-decoder attention's context (holds the memory); None for
                decoder-only.
            self_cache, cross_cache: this layer's key/value caches for incremental decoding.

        Returns:
            The same shape as x.
        """
        x = self.self_attention_sublayer(x, self.self_attention, target, self_cache)
        if self.cross_attention is not None:
            x = self.cross_attention_sublayer(x, self.cross_attention, source, cross_cache)
        return self.feed_forward_sublayer(x, self.feed_forward)


class Decoder(nn.Module):
    """N decoder layers (plus a final LayerNorm in the pre-LN variant)."""

    def __init__(self, config: ModelConfig, cross_attention: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(config, cross_attention) for _ in range(config.num_decoder_layers)
        )
        self.has_cross_attention = cross_attention
        self.final_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def forward(
        self,
        x: Tensor,
        target: AttentionContext,
        source: AttentionContext | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """x: (B, T, D) embedded target prefix (or packed (N, D)) -> states, same shape.

        `source` is the encoder-decoder attention's context (None for decoder-only); `cache`
        a `DecoderCache`, filled in place, for step-by-step decoding.
        """
        if self.has_cross_attention and (source is None or source.memory is None):
            raise ValueError("this decoder has encoder-decoder attention and needs the encoder output")
        no_caches = [None] * len(self.layers)
        self_caches = cache.self_attention if cache is not None else no_caches
        cross_caches = cache.cross_attention if cache is not None else no_caches
        for layer, self_cache, cross_cache in zip(self.layers, self_caches, cross_caches, strict=True):
            x = layer(x, target, source, self_cache, cross_cache)
        return self.final_norm(x) if self.final_norm is not None else x
