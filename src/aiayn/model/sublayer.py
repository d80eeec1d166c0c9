"""The residual connection and layer normalization around every sub-layer (Sec. 3.1, 5.4).

"We employ a residual connection around each of the two sub-layers, followed by layer
normalization. That is, the output of each sub-layer is LayerNorm(x + Sublayer(x))" (post-LN).
"We apply dropout to the output of each sub-layer, before it is added to the sub-layer
input" (Sec. 5.4).

`norm_first=True` gives the pre-LN variant x + Sublayer(LayerNorm(x)), with a final
LayerNorm on the stack (Xiong et al., 2020), which trains without warmup troubles.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.model.context import AttentionContext
from aiayn.model.kv_cache import AttentionCache


class SublayerConnection(nn.Module):
    """Residual connection + LayerNorm around one sub-layer, post-LN or pre-LN."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(
        self,
        x: Tensor,
        sublayer: nn.Module,
        context: AttentionContext | None = None,
        cache: AttentionCache | None = None,
    ) -> Tensor:
        """Post-LN: LN(x + drop(f(x))); pre-LN: x + drop(f(LN(x))).

        x: (B, T, D) or packed (N, D), same shape out. `sublayer` is an attention module,
        called as f(x, context, cache), or the feed-forward network (no context), called f(x).
        """
        h = self.norm(x) if self.norm_first else x
        h = sublayer(h) if context is None else sublayer(h, context, cache)
        if self.norm_first:
            return x + self.dropout(h)
        return self.norm(x + self.dropout(h))
