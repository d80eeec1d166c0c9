"""The encoder stack (Sec. 3.1).

"The encoder is composed of a stack of N = 6 identical layers. Each layer has two
sub-layers. The first is a multi-head self-attention mechanism, and the second is a simple,
position-wise fully connected feed-forward network." Each sub-layer sits inside a
`SublayerConnection` (residual + LayerNorm, `aiayn.model.sublayer`).
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.model.config import ModelConfig
from aiayn.model.context import AttentionContext
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.multi_head_attention import MultiHeadAttention
from aiayn.model.sublayer import SublayerConnection


class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = config
        self.self_attention = MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout, c.head_dim)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.activation_dropout, c.activation)
        self.attention_sublayer = SublayerConnection(c.d_model, c.dropout, c.norm_first, c.layer_norm_eps)
        self.feed_forward_sublayer = SublayerConnection(c.d_model, c.dropout, c.norm_first, c.layer_norm_eps)

    def forward(self, x: Tensor, context: AttentionContext) -> Tensor:
        """x: (B, S, D) (or packed (N, D)) -> the same shape."""
        x = self.attention_sublayer(x, self.self_attention, context)
        return self.feed_forward_sublayer(x, self.feed_forward)


class Encoder(nn.Module):
    """N encoder layers (plus a final LayerNorm in the pre-LN variant)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_encoder_layers))
        self.final_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def forward(self, x: Tensor, context: AttentionContext) -> Tensor:
        """x: (B, S, D) embedded source (or packed (N, D)) -> encoder output, same shape."""
        for layer in self.layers:
            x = layer(x, context)
        return self.final_norm(x) if self.final_norm is not None else x
