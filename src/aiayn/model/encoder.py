"""The encoder stack (Sec. 3.1) and the residual + LayerNorm sub-layer connection.

"The encoder is composed of a stack of N = 6 identical layers. Each layer has two
sub-layers. The first is a multi-head self-attention mechanism, and the second is a simple,
position-wise fully connected feed-forward network. We employ a residual connection around
each of the two sub-layers, followed by layer normalization. That is, the output of each
sub-layer is LayerNorm(x + Sublayer(x))" (post-LN). "We apply dropout to the output of each
sub-layer, before it is added to the sub-layer input" (Sec. 5.4).

`norm_first=True` gives the pre-LN variant x + Sublayer(LayerNorm(x)), with a final
LayerNorm on the stack (Xiong et al., 2020), which trains without warmup troubles.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from aiayn.model.config import ModelConfig
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.multi_head_attention import MultiHeadAttention
from aiayn.model.packing import PackedLayout


class SublayerConnection(nn.Module):
    """Residual connection + LayerNorm around one sub-layer, post-LN or pre-LN."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool, eps: float = 1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        """x: (B, T, D) or packed (N, D), same shape out.

        Post-LN: LN(x + drop(f(x))); pre-LN: x + drop(f(LN(x))).
        """
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a `SublayerConnection`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = config
        self.self_attention = MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.activation_dropout, c.activation)
        self.attention_sublayer = SublayerConnection(
            c.d_model, c.dropout, c.norm_first, c.layer_norm_eps
        )
        self.feed_forward_sublayer = SublayerConnection(
            c.d_model, c.dropout, c.norm_first, c.layer_norm_eps
        )

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        layout: PackedLayout | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """x: (B, S, D), mask: (B, 1, 1, S) -> ((B, S, D), weights (B, H, S, S) or None).

        With a `layout`, x and the output are packed (N, D) real tokens (`aiayn.model.packing`).
        """
        weights = None

        def attend(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.self_attention(
                h, mask=mask, need_weights=need_weights, query_layout=layout
            )
            return out

        x = self.attention_sublayer(x, attend)
        x = self.feed_forward_sublayer(x, self.feed_forward)
        return x, weights


class Encoder(nn.Module):
    """N encoder layers (plus a final LayerNorm in the pre-LN variant)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_encoder_layers))
        self.final_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        layout: PackedLayout | None = None,
    ) -> tuple[Tensor, list[Tensor]]:
        """x: (B, S, D) embedded source, mask: (B, 1, 1, S) or None.

        Returns the encoder output (B, S, D) and, when `need_weights`, one (B, H, S, S)
        attention map per layer (else an empty list). With a `layout`, x and the output are
        packed (N, D) real tokens.
        """
        weights = []
        for layer in self.layers:
            x, layer_weights = layer(x, mask, need_weights, layout)
            if need_weights:
                weights.append(layer_weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, weights
