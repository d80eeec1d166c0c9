"""The Transformer: encoder-decoder model for sequence transduction (Sec. 3, Figure 1).

    logits = Decoder(shift_right(target), Encoder(source)) W_emb^T

Source tokens are embedded (Sec. 3.4), positions added (Sec. 3.5), dropout applied
(Sec. 5.4), and the encoder stack run. The decoder reads the target shifted right by one
(`<bos>` first), attends to itself under the subsequent mask and to the encoder output, and
a final linear projection (sharing the embedding matrix, Sec. 3.4) gives next-token logits.

`forward` is the whole pass (training); `encode` and `decode` are its two halves, for
decoding one token at a time. All three are built from the same pieces: `embed_source`,
`embed_target`, the two stacks, and the contexts of `aiayn.model.context`.

None of them checks its inputs' values or reads a tensor on the host: token ids and shapes are
checked where data enters aiayn (the tokenizer-vs-vocabulary check of every loader, the
datasets, the command line, the service), so a decoding step never waits for the device. The
one exception is the packed training pass (`output_mask`, `aiayn.model.packing`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from aiayn.model.config import ModelConfig
from aiayn.model.context import AttentionContext
from aiayn.model.decoder import Decoder
from aiayn.model.deprecated_pretrained import PretrainedMethods
from aiayn.model.embeddings import TokenEmbedding
from aiayn.model.encoder import Encoder
from aiayn.model.initialization import init_weights
from aiayn.model.kv_cache import DecoderCache
from aiayn.model.masks import attention_mask, padding_mask, target_padding_mask
from aiayn.model.positional_encoding import positional_encoding


@dataclass
class AttentionMaps:
    """All attention probabilities of one forward pass, one tensor per layer.

    encoder: (B, H, S, S) each; decoder: (B, H, T, T) each (masked self-attention);
    cross: (B, H, T, S) each (encoder-decoder attention).
    """

    encoder: list[Tensor]
    decoder: list[Tensor]
    cross: list[Tensor]


class Transformer(PretrainedMethods, nn.Module):
    """The encoder-decoder Transformer.

    `model(src, tgt_in)` maps (B, S) source ids and (B, T) shifted-right target ids to
    (B, T, V) logits. Padding masks are derived from `config.pad_id` unless given; position 0
    of a target is always its start token, real even when the start token is the padding token
    (Marian's decoders start with `<pad>`, `masks.target_padding_mask`).
    """

    model_type = "transformer"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embedding = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id, c.scale_embedding)
        self.tgt_embedding = (
            self.src_embedding
            if c.share_embeddings
            else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id, c.scale_embedding)
        )
        self.src_positional = positional_encoding(c.positional, c.d_model, c.max_len)
        self.tgt_positional = positional_encoding(c.positional, c.d_model, c.max_len)
        self.embedding_dropout = nn.Dropout(c.dropout)
        self.encoder = Encoder(c)
        self.decoder = Decoder(c, cross_attention=True)
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size, bias=c.output_bias)
        if c.tie_output:
            self.output_projection.weight = self.tgt_embedding.weight
        init_weights(self, self.output_projection)

    # ------------------------------------------------------------------ the whole pass
    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_padding_mask: Tensor | None = None,
        tgt_padding_mask: Tensor | None = None,
        output_mask: Tensor | None = None,
        return_hidden: bool = False,
    ) -> Tensor:
        """(B, S) source ids, (B, T) shifted-right target ids -> (B, T, V) logits.

        The padding masks, (B, S) and (B, T) bool and True at real tokens, are derived from
        pad_id when not given. The ids must lie in the vocabulary (not checked here; see the
        module docstring). `output_mask` (B, T) bool selects the real target positions to
        project to the vocabulary (the non-pad targets during training): the result is then
        (N, V) logits for the N selected positions, in row-major order, and the pass runs
        packed (`aiayn.model.packing`): every position-wise layer on real tokens only.
        With `return_hidden` the final decoder states, (B, T, D) or (N, D), come back instead
        of logits (a loss can then project them itself, a slice at a time).
        """
        src_padding_mask, tgt_padding_mask = self._padding_masks(
            src, tgt_in, src_padding_mask, tgt_padding_mask
        )
        packed = output_mask is not None
        source = AttentionContext.bidirectional(src_padding_mask, packed)
        target = AttentionContext.causal(tgt_padding_mask, packed)
        memory = self.encoder(self.embed_source(src, source), source)
        cross = AttentionContext.encoder_decoder(memory, source, target)
        hidden = self.decoder(self.embed_target(tgt_in, target), target, cross)
        if output_mask is not None:
            hidden = self._select(hidden, output_mask, target)
        return hidden if return_hidden else self.output_projection(hidden)

    # ------------------------------------------------------------------ the two halves
    def encode(self, src: Tensor, src_padding_mask: Tensor | None = None) -> Tensor:
        """(B, S) source ids -> (B, S, D) encoder output.

        src_padding_mask: (B, S) bool, True at real tokens; derived from pad_id if None.
        """
        if src_padding_mask is None:
            src_padding_mask = padding_mask(src, self.config.pad_id)
        source = AttentionContext.bidirectional(src_padding_mask)
        return self.encoder(self.embed_source(src, source), source)

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
        groups: int = 1,
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
            groups: g, the consecutive rows of `tgt_in` that share one row of `memory` (the
                beams of a sentence: B = g * b for a (b, S, D) memory; checked).

        Returns:
            logits: (B, T, V) (or hidden states (B, T, D)).
        """
        if cache is not None:
            target = AttentionContext.continuing(cache.length, tgt_in.size(1), tgt_in.device)
        else:
            if tgt_padding_mask is None:
                tgt_padding_mask = target_padding_mask(tgt_in, self.config.pad_id)
            target = AttentionContext.causal(tgt_padding_mask)
        cross = AttentionContext(mask=attention_mask(src_padding_mask), memory=memory, groups=groups)
        offset = cache.length if cache is not None else 0
        hidden = self.decoder(self.embed_target(tgt_in, target, offset), target, cross, cache)
        return hidden if return_hidden else self.output_projection(hidden)

    def incremental_step(
        self, last: Tensor, memory: Tensor, src_padding_mask: Tensor | None, cache: DecoderCache,
        groups: int = 1,
    ) -> Tensor:
        """One step of incremental decoding: the next token's logits after the cached prefix.

        last: (B, 1) the last token of each row; memory: (B, S, D), or (b, S, D) shared by
        groups of g = `groups` consecutive rows (the beams of a sentence, B = g * b);
        src_padding_mask: (b, S) or None; cache: filled in place. Returns (B, V) float32 logits:
        `decode` of the last token, projected. The searches call it through a step runner
        (`aiayn.runtime.steps`), which may compute it another way.
        """
        hidden = self.decode(
            last, memory, src_padding_mask, cache=cache, return_hidden=True, groups=groups
        )  # (B, 1, D)
        return self.output_projection(hidden[:, -1]).float()  # (B, V)

    def decode_step(
        self, last: Tensor, memory: Tensor, src_padding_mask: Tensor | None, cache: DecoderCache,
        groups: int = 1,
    ) -> Tensor:
        """`incremental_step` (its earlier name, kept for callers of the previous release)."""
        return self.incremental_step(last, memory, src_padding_mask, cache, groups)

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> AttentionMaps:
        """Attention probabilities of every layer and head for one (source, target) pass."""
        src_padding_mask, tgt_padding_mask = self._padding_masks(src, tgt_in, None, None)
        maps = AttentionMaps([], [], [])
        source = AttentionContext.bidirectional(src_padding_mask, attention_maps=maps.encoder)
        target = AttentionContext.causal(tgt_padding_mask, attention_maps=maps.decoder)
        memory = self.encoder(self.embed_source(src, source), source)
        cross = AttentionContext.encoder_decoder(memory, source, target, attention_maps=maps.cross)
        self.decoder(self.embed_target(tgt_in, target), target, cross)
        return maps

    # ------------------------------------------------------------------ pieces
    def embed_source(self, src: Tensor, context: AttentionContext) -> Tensor:
        """(B, S) ids -> dropout(embedding * sqrt(d_model) + positions) (Sec. 3.4, 3.5, 5.4).

        (B, S, D), or packed (N, D) when `context` is packed.
        """
        x = self.src_positional(self.src_embedding(src))  # (B, S, D)
        if context.query_layout is not None:
            x = context.query_layout.pack(x)  # (B, S, D) -> (N, D)
        return self.embedding_dropout(x)

    def embed_target(self, tgt_in: Tensor, context: AttentionContext, offset: int = 0) -> Tensor:
        """(B, T) ids at positions offset.. -> (B, T, D) (or packed (N, D)), as `embed_source`."""
        x = self.tgt_positional(self.tgt_embedding(tgt_in), offset)  # (B, T, D)
        if context.query_layout is not None:
            x = context.query_layout.pack(x)  # (B, T, D) -> (N, D)
        return self.embedding_dropout(x)

    def _padding_masks(
        self, src: Tensor, tgt_in: Tensor, src_padding_mask: Tensor | None, tgt_padding_mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """The (B, S) and (B, T) padding masks: the given ones, else derived from pad_id."""
        if src_padding_mask is None:
            src_padding_mask = padding_mask(src, self.config.pad_id)
        if tgt_padding_mask is None:
            tgt_padding_mask = target_padding_mask(tgt_in, self.config.pad_id)
        return src_padding_mask, tgt_padding_mask

    @staticmethod
    def _select(hidden: Tensor, output_mask: Tensor, target: AttentionContext) -> Tensor:
        """The (N, D) states of the positions `output_mask` (B, T) selects, row-major.

        Part of the packed pass, the one place the model reads tensors on the host
        (`aiayn.model.packing`): one read gives both counts.
        """
        layout = target.query_layout
        if layout is None:  # states not packed: hidden is (B, T, D)
            return hidden[output_mask]
        selected = output_mask.reshape(-1).index_select(0, layout.index)  # (N_tgt,) over packed rows
        num_selected, num_wanted = torch.stack([selected.sum(), output_mask.sum()]).tolist()
        if num_selected != num_wanted:
            raise ValueError("output_mask selects padding positions of tgt_in; select real tokens only")
        return hidden if num_selected == layout.num_tokens else hidden[selected]
