"""The Transformer: encoder-decoder model for sequence transduction (Sec. 3, Figure 1).

    logits = Decoder(shift_right(target), Encoder(source)) W_emb^T

Source tokens are embedded (Sec. 3.4), positions added (Sec. 3.5), dropout applied
(Sec. 5.4), and the encoder stack run. The decoder reads the target shifted right by one
(`<bos>` first), attends to itself under the subsequent mask and to the encoder output, and
a final linear projection (sharing the embedding matrix, Sec. 3.4) gives next-token logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from aiayn.model.config import ModelConfig
from aiayn.model.decoder import Decoder
from aiayn.model.embeddings import TokenEmbedding, check_token_ids
from aiayn.model.encoder import Encoder
from aiayn.model.kv_cache import DecoderCache
from aiayn.model.masks import attention_mask, padding_mask_or_none
from aiayn.model.packing import packed_layout_or_none
from aiayn.model.positional_encoding import positional_encoding
from aiayn.model.pretrained import PretrainedMixin


def init_linear_weights(module: nn.Module, skip: tuple[nn.Module, ...] = ()) -> None:
    """Xavier-uniform weights and zero biases for every nn.Linear in `module` but `skip`."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear) and not any(sub is s for s in skip):
            nn.init.xavier_uniform_(sub.weight)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)


@dataclass
class AttentionMaps:
    """All attention probabilities of one forward pass, one tensor per layer.

    encoder: (B, H, S, S) each; decoder: (B, H, T, T) each (masked self-attention);
    cross: (B, H, T, S) each (encoder-decoder attention).
    """

    encoder: list[Tensor]
    decoder: list[Tensor]
    cross: list[Tensor]


class Transformer(PretrainedMixin, nn.Module):
    """The encoder-decoder Transformer.

    `model(src, tgt_in)` maps (B, S) source ids and (B, T) shifted-right target ids to
    (B, T, V) logits. Padding masks are derived from `config.pad_id` unless given.
    """

    model_type = "transformer"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embedding = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id)
        self.tgt_embedding = (
            self.src_embedding
            if c.share_embeddings
            else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id)
        )
        self.src_positional = positional_encoding(c.positional, c.d_model, c.max_len)
        self.tgt_positional = positional_encoding(c.positional, c.d_model, c.max_len)
        self.embedding_dropout = nn.Dropout(c.dropout)
        self.encoder = Encoder(c)
        self.decoder = Decoder(c, cross_attention=True)
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.tie_output:
            self.output_projection.weight = self.tgt_embedding.weight
        else:
            nn.init.normal_(self.output_projection.weight, std=c.d_model**-0.5)
        init_linear_weights(self, skip=(self.output_projection,))

    # ------------------------------------------------------------------ encoder
    def encode(
        self, src: Tensor, src_padding_mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor:
        """Run the encoder.

        Args:
            src: (B, S) source token ids.
            src_padding_mask: (B, S) bool, True at real tokens; derived from pad_id if None.

        Returns:
            memory: (B, S, D) encoder output.
        """
        return self._encode(src, src_padding_mask, need_weights=False)[0]

    def _encode(
        self, src: Tensor, src_padding_mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, list[Tensor]]:
        check_token_ids(src, "src", self.config.src_vocab_size)
        if src_padding_mask is None:
            src_padding_mask = padding_mask_or_none(src, self.config.pad_id)
        x = self.embedding_dropout(self.src_positional(self.src_embedding(src)))
        return self.encoder(x, attention_mask(src_padding_mask), need_weights)

    # ------------------------------------------------------------------ decoder
    def new_cache(self) -> DecoderCache:
        """An empty key/value cache for step-by-step `decode`."""
        return DecoderCache.empty(self.config.num_decoder_layers)

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_padding_mask: Tensor | None = None,
        tgt_padding_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        return_hidden: bool = False,
    ) -> Tensor:
        """Run the decoder and the output projection.

        Args:
            tgt_in: (B, T) target ids shifted right (`<bos>` first); with a cache, only the
                new positions (usually T = 1), which continue the cached prefix.
            memory: (B, S, D) encoder output.
            src_padding_mask: (B, S) bool, True at real source tokens (pass
                `padding_mask(src)`); None means no source padding.
            tgt_padding_mask: (B, T) bool, True at real target tokens; derived from pad_id if
                None. Not used with a cache (all cached rows advance together).
            cache: a `DecoderCache` from `new_cache()`, filled in place.
            return_hidden: return the final decoder states (B, T, D) instead of logits.

        Returns:
            logits: (B, T, V) (or hidden states (B, T, D)).
        """
        hidden = self._decode(tgt_in, memory, src_padding_mask, tgt_padding_mask, cache, False)[0]
        return hidden if return_hidden else self.output_projection(hidden)

    def _decode(self, tgt_in, memory, src_padding_mask, tgt_padding_mask, cache, need_weights):
        check_token_ids(tgt_in, "tgt_in", self.config.tgt_vocab_size)
        if memory.dim() != 3 or memory.size(0) != tgt_in.size(0):
            raise ValueError(
                f"memory must be (B, S, D) with B = {tgt_in.size(0)}, got {tuple(memory.shape)}"
            )
        offset = cache.length if cache is not None else 0
        length = tgt_in.size(1)
        is_causal = False
        if cache is not None:
            # Query i (absolute position offset + i) sees cached keys and new keys up to itself.
            self_mask = None
            if length > 1:
                total = offset + length
                self_mask = torch.ones(length, total, dtype=torch.bool, device=tgt_in.device)
                self_mask = self_mask.tril(diagonal=offset)[None, None]
        else:
            if tgt_padding_mask is None:
                tgt_padding_mask = padding_mask_or_none(tgt_in, self.config.pad_id)
            is_causal = tgt_padding_mask is None
            self_mask = None if is_causal else attention_mask(tgt_padding_mask, causal=True)
        x = self.embedding_dropout(self.tgt_positional(self.tgt_embedding(tgt_in), offset))
        return self.decoder(
            x, memory,
            self_mask=self_mask,
            cross_mask=attention_mask(src_padding_mask),
            cache=cache,
            need_weights=need_weights,
            is_causal=is_causal,
        )

    # ------------------------------------------------------------------ full pass
    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_padding_mask: Tensor | None = None,
        tgt_padding_mask: Tensor | None = None,
        output_mask: Tensor | None = None,
    ) -> Tensor:
        """(B, S) source ids, (B, T) shifted-right target ids -> (B, T, V) logits.

        `output_mask` (B, T) bool selects the real target positions to project to the
        vocabulary (the non-pad targets during training): the result is then (N, V) logits
        for the N selected positions, in row-major order. This is the training pass: it runs
        packed (`aiayn.model.packing`), every position-wise layer on real tokens only, and
        the output projection on the selected positions only.
        """
        if src.dim() == 2 and tgt_in.dim() == 2 and src.size(0) != tgt_in.size(0):
            raise ValueError(
                f"src and tgt_in must have the same batch size, got {tuple(src.shape)} "
                f"and {tuple(tgt_in.shape)}"
            )
        if src_padding_mask is None:  # check the ids before deriving a mask from them
            check_token_ids(src, "src", self.config.src_vocab_size)
            src_padding_mask = padding_mask_or_none(src, self.config.pad_id)
        if output_mask is None:
            return self.decode(tgt_in, self.encode(src, src_padding_mask), src_padding_mask, tgt_padding_mask)
        return self._packed_logits(src, tgt_in, src_padding_mask, tgt_padding_mask, output_mask)

    def _packed_logits(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_padding_mask: Tensor | None,
        tgt_padding_mask: Tensor | None,
        output_mask: Tensor,
    ) -> Tensor:
        """`forward` with an `output_mask`: (N, V) logits, states packed between attentions."""
        check_token_ids(src, "src", self.config.src_vocab_size)
        check_token_ids(tgt_in, "tgt_in", self.config.tgt_vocab_size)
        if tgt_padding_mask is None:
            tgt_padding_mask = padding_mask_or_none(tgt_in, self.config.pad_id)
        src_layout = packed_layout_or_none(src_padding_mask)
        tgt_layout = packed_layout_or_none(tgt_padding_mask)

        def embed(ids, embedding, positional, layout):
            x = positional(embedding(ids))  # (B, T, D)
            return self.embedding_dropout(layout.pack(x) if layout is not None else x)

        x = embed(src, self.src_embedding, self.src_positional, src_layout)
        memory, _ = self.encoder(x, attention_mask(src_padding_mask), layout=src_layout)
        y = embed(tgt_in, self.tgt_embedding, self.tgt_positional, tgt_layout)
        hidden, _ = self.decoder(
            y, memory,
            self_mask=attention_mask(tgt_padding_mask, causal=True) if tgt_layout is not None else None,
            cross_mask=attention_mask(src_padding_mask),
            is_causal=tgt_layout is None,
            layout=tgt_layout,
            memory_layout=src_layout,
        )
        if tgt_layout is None:
            return self.output_projection(hidden[output_mask])
        if bool((output_mask & ~tgt_padding_mask).any()):
            raise ValueError("output_mask selects padding positions of tgt_in; select real tokens only")
        selected = output_mask[tgt_padding_mask]  # (N_tgt,) over the packed rows
        if not bool(selected.all()):
            hidden = hidden[selected]
        return self.output_projection(hidden)

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> AttentionMaps:
        """Attention probabilities of every layer and head for one (source, target) pass."""
        check_token_ids(src, "src", self.config.src_vocab_size)
        src_padding_mask = padding_mask_or_none(src, self.config.pad_id)
        memory, encoder_maps = self._encode(src, src_padding_mask, need_weights=True)
        _, decoder_maps = self._decode(tgt_in, memory, src_padding_mask, None, None, True)
        return AttentionMaps(encoder_maps, decoder_maps.self_attention, decoder_maps.cross_attention)
