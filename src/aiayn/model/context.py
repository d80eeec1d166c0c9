"""`AttentionContext`: what travels with the states through one pass of a stack.

The tensors flowing through the encoder and decoder are just (B, T, D) states (or packed
(N, D) states, `aiayn.model.packing`). Everything else an attention sub-layer needs to know
about the call is the same for every layer of the stack, so it is built once per pass and
handed down as one small object instead of a row of keyword flags:

- `mask`: bool, broadcastable to (B, H, T, S), True where a query may attend (the mask
  convention of `aiayn.model.masks`), or None when nothing is masked;
- `is_causal`: no mask, but the plain subsequent mask applies (T == S), which lets the fast
  attention path use its causal kernel;
- `memory`: the (B, S, D) encoder output for encoder-decoder attention, None for
  self-attention ("the queries come from the previous decoder layer, and the memory keys
  and values come from the output of the encoder", Sec. 3.2.3);
- `groups`: g, the consecutive query rows that share one memory row (the g beams of a
  sentence in beam search: B = g * b queries over b memory rows; 1 otherwise);
- `query_layout` / `memory_layout`: the queries (the memory) are packed real tokens;
- `attention_maps`: a list to collect each layer's attention probabilities into, or None.

The key/value cache of incremental decoding is per layer, not per pass: it is handed to each
layer beside the context (`aiayn.model.kv_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.model.masks import attention_mask
from aiayn.model.packing import PackedLayout


@dataclass
class AttentionContext:
    """How every attention sub-layer of one stack attends during one pass (see module doc)."""

    mask: Tensor | None = None
    is_causal: bool = False
    memory: Tensor | None = None
    groups: int = 1
    query_layout: PackedLayout | None = None
    memory_layout: PackedLayout | None = None
    attention_maps: list[Tensor] | None = None

    @classmethod
    def bidirectional(
        cls, padding_mask: Tensor | None, packed: bool = False, attention_maps: list[Tensor] | None = None
    ) -> AttentionContext:
        """Encoder self-attention: every real token sees every real token.

        padding_mask: (B, S) bool, True at real tokens, or None for no padding. With `packed`
        the states are the (N, D) real tokens of that mask.
        """
        layout = PackedLayout.from_padding_mask(padding_mask) if packed and padding_mask is not None else None
        return cls(mask=attention_mask(padding_mask), query_layout=layout, attention_maps=attention_maps)

    @classmethod
    def causal(
        cls,
        padding_mask: Tensor | None,
        packed: bool = False,
        attention_maps: list[Tensor] | None = None,
    ) -> AttentionContext:
        """Masked (decoder) self-attention over a whole sequence: position i sees positions <= i.

        padding_mask: (B, T) bool, True at real tokens, or None for no padding (then the fast
        path's causal kernel applies).
        """
        if padding_mask is None:
            return cls(is_causal=True, attention_maps=attention_maps)
        layout = PackedLayout.from_padding_mask(padding_mask) if packed else None
        return cls(
            mask=attention_mask(padding_mask, causal=True), query_layout=layout, attention_maps=attention_maps
        )

    @classmethod
    def continuing(cls, cached_length: int, length: int, device: torch.device) -> AttentionContext:
        """Masked self-attention of `length` new positions after `cached_length` cached ones.

        Query i (absolute position cached_length + i) sees the cached keys and the new keys up
        to itself: a (1, 1, length, cached_length + length) mask, or none for a single step.
        """
        if length == 1:
            return cls()
        mask = torch.ones(length, cached_length + length, dtype=torch.bool, device=device)
        return cls(mask=mask.tril(diagonal=cached_length)[None, None])

    @classmethod
    def encoder_decoder(
        cls,
        memory: Tensor,
        source: AttentionContext,
        target: AttentionContext,
        attention_maps: list[Tensor] | None = None,
    ) -> AttentionContext:
        """Encoder-decoder attention: target queries over the real source positions.

        memory: (B, S, D) encoder output (packed (N_src, D) when `source` is packed).
        source: the encoder's context (its (B, 1, 1, S) padding mask is exactly this mask).
        target: the decoder's self-attention context (for its packed layout).
        """
        return cls(
            mask=source.mask,
            memory=memory,
            query_layout=target.query_layout,
            memory_layout=source.query_layout,
            attention_maps=attention_maps,
        )

    def record(self, probabilities: Tensor | None) -> None:
        """Keep one layer's (B, H, T, S) attention probabilities when they are being collected."""
        if self.attention_maps is not None and probabilities is not None:
            self.attention_maps.append(probabilities)

    @property
    def wants_weights(self) -> bool:
        """Whether attention probabilities are being collected (forces the explicit path)."""
        return self.attention_maps is not None
