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

from dataclasses import dataclass, field

from torch import Tensor, nn

from aiayn.model.config import ModelConfig
from aiayn.model.encoder import SublayerConnection
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.kv_cache import AttentionCache, DecoderCache
from aiayn.model.multi_head_attention import MultiHeadAttention
from aiayn.model.packing import PackedLayout


@dataclass
class DecoderAttention:
    """Per-layer attention maps of a decoder pass: self (B, H, T, T), cross (B, H, T, S)."""

    self_attention: list[Tensor] = field(default_factory=list)
    cross_attention: list[Tensor] = field(default_factory=list)


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention (optional), feed-forward."""

    def __init__(self, config: ModelConfig, cross_attention: bool = True) -> None:
        super().__init__()
        c = config

        def sublayer() -> SublayerConnection:
            return SublayerConnection(c.d_model, c.dropout, c.norm_first, c.layer_norm_eps)

        self.self_attention = MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout)
        self.self_attention_sublayer = sublayer()
        if cross_attention:
            self.cross_attention = MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout)
            self.cross_attention_sublayer = sublayer()
        else:
            self.cross_attention = None
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.activation_dropout, c.activation)
        self.feed_forward_sublayer = sublayer()

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        self_mask: Tensor | None = None,
        cross_mask: Tensor | None = None,
        self_cache: AttentionCache | None = None,
        cross_cache: AttentionCache | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
        layout: PackedLayout | None = None,
        memory_layout: PackedLayout | None = None,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """One decoder layer.

        Args:
            x: (B, T, D) target-side states.
            memory: (B, S, D) encoder output (None for decoder-only).
            self_mask: (B|1, 1, T, T_total) bool mask for self-attention, or None.
            cross_mask: (B, 1, 1, S) source padding mask, or None.
            self_cache, cross_cache: key/value caches for incremental decoding.
            need_weights: return attention maps.
            is_causal: `self_mask` is None and the plain subsequent mask applies.
            layout, memory_layout: `x` (resp. `memory`) is packed (N, D) real tokens of that
                padded layout (`aiayn.model.packing`); the output is then packed like `x`.

        Returns:
            (B, T, D) (or packed) output, self-attention map (B, H, T, T_total) or None,
            cross-attention map (B, H, T, S) or None.
        """
        self_weights = cross_weights = None

        def self_attend(h: Tensor) -> Tensor:
            nonlocal self_weights
            out, self_weights = self.self_attention(
                h, mask=self_mask, cache=self_cache, need_weights=need_weights, is_causal=is_causal,
                query_layout=layout,
            )
            return out

        def cross_attend(h: Tensor) -> Tensor:
            nonlocal cross_weights
            out, cross_weights = self.cross_attention(
                h, memory, mask=cross_mask, cache=cross_cache, need_weights=need_weights,
                query_layout=layout, memory_layout=memory_layout,
            )
            return out

        x = self.self_attention_sublayer(x, self_attend)
        if self.cross_attention is not None:
            if memory is None:
                raise ValueError("this decoder layer has cross-attention and needs `memory`")
            x = self.cross_attention_sublayer(x, cross_attend)
        x = self.feed_forward_sublayer(x, self.feed_forward)
        return x, self_weights, cross_weights


class Decoder(nn.Module):
    """N decoder layers (plus a final LayerNorm in the pre-LN variant)."""

    def __init__(self, config: ModelConfig, cross_attention: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(config, cross_attention) for _ in range(config.num_decoder_layers)
        )
        self.final_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        self_mask: Tensor | None = None,
        cross_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
        layout: PackedLayout | None = None,
        memory_layout: PackedLayout | None = None,
    ) -> tuple[Tensor, DecoderAttention]:
        """x: (B, T, D) embedded target prefix -> (B, T, D) states and attention maps.

        With `layout`/`memory_layout`, x (and the output) and memory are packed (N, D).
        """
        attention = DecoderAttention()
        for i, layer in enumerate(self.layers):
            x, self_weights, cross_weights = layer(
                x, memory, self_mask, cross_mask,
                self_cache=cache.self_attention[i] if cache is not None else None,
                cross_cache=cache.cross_attention[i] if cache is not None else None,
                need_weights=need_weights,
                is_causal=is_causal,
                layout=layout,
                memory_layout=memory_layout,
            )
            if need_weights:
                attention.self_attention.append(self_weights)
                if cross_weights is not None:
                    attention.cross_attention.append(cross_weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, attention
