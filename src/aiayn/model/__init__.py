"""The Transformer model, one paper concept per module.

masks (Sec. 3.2.3) -> attention (3.2.1) -> multi_head_attention (3.2.2) -> feed_forward (3.3)
-> embeddings (3.4) -> positional_encoding (3.5) -> sublayer, encoder / decoder (3.1)
-> transformer (3, Figure 1). Around them: config, context (what travels with the states
through one pass), kv_cache and packing (decoding and training speed), and initialization.
Reading and writing model directories is not a paper concept: `aiayn.formats`.
"""

from aiayn.model.attention import scaled_dot_product_attention
from aiayn.model.config import ModelConfig
from aiayn.model.context import AttentionContext
from aiayn.model.decoder_only import DecoderOnlyLM
from aiayn.model.encoder_only import EncoderOnly
from aiayn.model.kv_cache import AttentionCache, DecoderCache
from aiayn.model.masks import attention_mask, padding_mask, subsequent_mask
from aiayn.model.multi_head_attention import MultiHeadAttention
from aiayn.model.packing import PackedLayout
from aiayn.model.positional_encoding import sinusoidal_table
from aiayn.model.transformer import AttentionMaps, Transformer

__all__ = [
    "AttentionCache", "AttentionContext", "AttentionMaps", "DecoderCache", "DecoderOnlyLM", "EncoderOnly",
    "ModelConfig", "MultiHeadAttention",
    "PackedLayout", "Transformer", "attention_mask",
    "padding_mask", "scaled_dot_product_attention", "sinusoidal_table", "subsequent_mask",
]
