"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), as the paper writes it.

A reference to read in one sitting: each formula is written once, where the paper states it, and
nothing is optimised. Every layer takes the paper's values as its defaults (Sec. 3, Table 3's
base model): d_model = 512, h = 8, d_k = d_v = 64, d_ff = 2048, P_drop = 0.1, N = 6. This file
imports nothing from aiayn; `aiayn.paper.bridge` reads aiayn's model directories into it.

    model = Transformer(src_vocab_size=8000, tgt_vocab_size=8000)   # the base model
    log_probs = model.log_probs(src, tgt_in)                        # (B, S), (B, T) ids -> (B, T, V)
    outputs = greedy_decode(model.eval(), src)                      # B lists of token ids

Shapes: B batch, S source length, T target length, D = d_model, H = h heads, V vocabulary.
Masks are bool and True where attention is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# ---------------------------------------------------------------------------------------- masks


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """(B, T) ids -> (B, T) bool, True at real tokens. Sec. 5.1: "Sentence pairs were batched
    together by approximate sequence length"; the padding that fills the shorter ones is masked
    like the illegal connections of Sec. 3.2.3, so that no position attends to it."""
    return tokens != pad_id


def subsequent_mask(length: int, device: torch.device | None = None) -> Tensor:
    """(T, T) bool, True where position i may attend to j <= i.

    Sec. 3.2.3: "We need to prevent leftward information flow in the decoder to preserve the
    auto-regressive property. We implement this inside of scaled dot-product attention by
    masking out (setting to -inf) all values in the input of the softmax which correspond to
    illegal connections."
    """
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def target_mask(tgt_in: Tensor) -> Tensor:
    """(B, T) shifted-right target ids -> (1, 1, T, T): Sec. 3.2.3's mask of later positions.

    Targets are padded on the right, so a real position i sees only positions j <= i, all real:
    the padding needs no mask of its own here (what a padded query computes is never scored).
    """
    return subsequent_mask(tgt_in.size(1), tgt_in.device)[None, None]


# ------------------------------------------------------------------------------------ attention


def attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention, Sec. 3.2.1, Eq. 1:

        Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

    query (B, H, T, d_k), key (B, H, S, d_k), value (B, H, S, d_v); mask broadcastable to
    (B, H, T, S). Returns the output (B, H, T, d_v) and the probabilities (B, H, T, S).
    "We suspect that for large values of d_k, the dot products grow large in magnitude ...
    To counteract this effect, we scale the dot products by 1/sqrt(d_k)."
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, H, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    probabilities = scores.softmax(dim=-1)
    return probabilities @ value, probabilities


class MultiHeadAttention(nn.Module):
    """Multi-head attention, Sec. 3.2.2:

        MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O
        where head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

    "we employ h = 8 parallel attention layers, or heads. For each of these we use
    d_k = d_v = d_model / h = 64." The h maps W_i^Q (D x d_k each) sit side by side in one
    D x h d_k map `w_q` (head i is columns i d_k .. (i+1) d_k of its output); so for `w_k`, `w_v`.
    """

    def __init__(self, d_model: int = 512, heads: int = 8, d_k: int = 64) -> None:
        super().__init__()
        self.heads, self.d_k = heads, d_k
        self.w_q = nn.Linear(d_model, heads * d_k)  # W_1^Q .. W_h^Q side by side
        self.w_k = nn.Linear(d_model, heads * d_k)  # W_1^K .. W_h^K
        self.w_v = nn.Linear(d_model, heads * d_k)  # W_1^V .. W_h^V (d_v = d_k)
        self.w_o = nn.Linear(heads * d_k, d_model)  # W^O

    def split(self, x: Tensor) -> Tensor:
        """(B, T, h d_k) -> (B, H, T, d_k): the h heads' projections apart."""
        return x.view(x.size(0), x.size(1), self.heads, self.d_k).transpose(1, 2)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        """query (B, T, D), key and value (B, S, D), mask broadcastable to (B, 1, T, S) -> (B, T, D)."""
        q, k, v = self.split(self.w_q(query)), self.split(self.w_k(key)), self.split(self.w_v(value))
        heads, _ = attention(q, k, v, mask)  # (B, H, T, d_k): head_1 .. head_h
        concat = heads.transpose(1, 2).reshape(query.size(0), query.size(1), -1)  # (B, T, h d_k)
        return self.w_o(concat)


# ------------------------------------------------------------------------------ the sub-layers


class PositionwiseFeedForward(nn.Module):
    """Position-wise feed-forward network, Sec. 3.3, Eq. 2:

        FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

    "applied to each position separately and identically ... The dimensionality of input and
    output is d_model = 512, and the inner-layer has dimensionality d_ff = 2048."
    """

    def __init__(self, d_model: int = 512, d_ff: int = 2048) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)  # W_1, b_1
        self.linear2 = nn.Linear(d_ff, d_model)  # W_2, b_2

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D) -> (B, T, D)."""
        return self.linear2(torch.relu(self.linear1(x)))


class SublayerConnection(nn.Module):
    """Residual connection and layer normalization, Sec. 3.1, with dropout, Sec. 5.4:

    "the output of each sub-layer is LayerNorm(x + Sublayer(x))" and "We apply dropout to the
    output of each sub-layer, before it is added to the sub-layer input and normalized."
    The paper does not state LayerNorm's epsilon; `eps` defaults to PyTorch's.
    """

    def __init__(self, d_model: int = 512, dropout: float = 0.1, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer_output: Tensor) -> Tensor:
        """x and Sublayer(x), both (B, T, D) -> LayerNorm(x + Dropout(Sublayer(x)))."""
        return self.norm(x + self.dropout(sublayer_output))


class EncoderLayer(nn.Module):
    """Sec. 3.1: "Each layer has two sub-layers. The first is a multi-head self-attention
    mechanism, and the second is a simple, position-wise fully connected feed-forward network."
    """

    def __init__(
        self, d_model: int = 512, heads: int = 8, d_k: int = 64, d_ff: int = 2048, dropout: float = 0.1,
        eps: float = 1e-5,
    ) -> None:  # fmt: skip
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, heads, d_k)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff)
        self.attention_sublayer = SublayerConnection(d_model, dropout, eps)
        self.feed_forward_sublayer = SublayerConnection(d_model, dropout, eps)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (B, S, D), mask (B, 1, 1, S) -> (B, S, D)."""
        x = self.attention_sublayer(x, self.self_attention(x, x, x, mask))
        return self.feed_forward_sublayer(x, self.feed_forward(x))


class DecoderLayer(nn.Module):
    """Sec. 3.1: "In addition to the two sub-layers in each encoder layer, the decoder inserts a
    third sub-layer, which performs multi-head attention over the output of the encoder stack."
    Sec. 3.2.3: "the queries come from the previous decoder layer, and the memory keys and
    values come from the output of the encoder."
    """

    def __init__(
        self, d_model: int = 512, heads: int = 8, d_k: int = 64, d_ff: int = 2048, dropout: float = 0.1,
        eps: float = 1e-5,
    ) -> None:  # fmt: skip
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, heads, d_k)
        self.cross_attention = MultiHeadAttention(d_model, heads, d_k)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff)
        self.self_attention_sublayer = SublayerConnection(d_model, dropout, eps)
        self.cross_attention_sublayer = SublayerConnection(d_model, dropout, eps)
        self.feed_forward_sublayer = SublayerConnection(d_model, dropout, eps)

    def forward(self, x: Tensor, memory: Tensor, source_mask: Tensor, target_mask: Tensor) -> Tensor:
        """x (B, T, D), memory (B, S, D), source_mask (B, 1, 1, S), target_mask (1, 1, T, T)."""
        x = self.self_attention_sublayer(x, self.self_attention(x, x, x, target_mask))
        x = self.cross_attention_sublayer(x, self.cross_attention(x, memory, memory, source_mask))
        return self.feed_forward_sublayer(x, self.feed_forward(x))


class Encoder(nn.Module):
    """Sec. 3.1: "The encoder is composed of a stack of N = 6 identical layers." """

    def __init__(self, layers: Iterable[EncoderLayer]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (B, S, D) embedded source -> (B, S, D) memory."""
        for layer in self.layers:
            x = layer(x, mask)
        return x


class Decoder(nn.Module):
    """Sec. 3.1: "The decoder is also composed of a stack of N = 6 identical layers." """

    def __init__(self, layers: Iterable[DecoderLayer]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor, memory: Tensor, source_mask: Tensor, target_mask: Tensor) -> Tensor:
        """x (B, T, D) embedded target, memory (B, S, D) -> (B, T, D)."""
        for layer in self.layers:
            x = layer(x, memory, source_mask, target_mask)
        return x


# ---------------------------------------------------------------------- embeddings, positions


class Embeddings(nn.Module):
    """Sec. 3.4: "we use learned embeddings to convert the input tokens and output tokens to
    vectors of dimension d_model ... In the embedding layers, we multiply those weights by
    sqrt(d_model)."
    """

    def __init__(self, vocab_size: int, d_model: int = 512) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model)

    def forward(self, tokens: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, D)."""
        return self.embedding(tokens) * self.scale


class PositionalEncoding(nn.Module):
    """Sec. 3.5: "we add 'positional encodings' to the input embeddings at the bottoms of the
    encoder and decoder stacks":

        PE(pos, 2i) = sin(pos / 10000^(2i / d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))
    """

    def __init__(self, d_model: int = 512, max_len: int = 5000) -> None:
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float64)[:, None]  # pos
        inverse = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model, dtype=torch.float64)
        table[:, 0::2] = torch.sin(position * inverse)
        table[:, 1::2] = torch.cos(position * inverse[: d_model // 2])
        self.register_buffer("table", table.float(), persistent=False)  # computed, not learned

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D) -> x + PE[0:T]."""
        return x + self.table[: x.size(1)]


class LearnedPositions(nn.Module):
    """Table 3, row (E): "positional embedding instead of sinusoids"; Sec. 3.5: "We also
    experimented with using learned positional embeddings instead, and found that the two
    versions produced nearly identical results."
    """

    def __init__(self, d_model: int = 512, max_len: int = 5000) -> None:
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D) -> x + P[0:T]."""
        return x + self.embedding.weight[: x.size(1)]


# ------------------------------------------------------------------------------ the Transformer


class Transformer(nn.Module):
    """The Transformer, Sec. 3, Figure 1: "The encoder maps an input sequence of symbol
    representations (x_1, ..., x_n) to a sequence of continuous representations
    z = (z_1, ..., z_n). Given z, the decoder then generates an output sequence (y_1, ..., y_m)
    of symbols one element at a time."

    Sec. 3.4: "we share the same weight matrix between the two embedding layers and the
    pre-softmax linear transformation" (`share_embeddings`: one source and target embedding;
    `tie_output`: the target embedding is the pre-softmax projection). Sec. 5.4: "we apply
    dropout to the sums of the embeddings and the positional encodings".

    The defaults are the base model of Table 3; `d_k` defaults to d_model / h. The token ids a
    vocabulary reserves (padding, start, end) are the caller's: the paper does not name them.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        *,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        d_model: int = 512,
        heads: int = 8,
        d_k: int | None = None,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        positional: str = "sinusoidal",
        share_embeddings: bool = True,
        tie_output: bool = True,
        layer_norm_eps: float = 1e-5,
        pad_id: int = 0,
        bos_id: int = 1,
        eos_id: int = 2,
    ) -> None:
        super().__init__()
        d_k = d_model // heads if d_k is None else d_k
        self.d_model, self.max_len = d_model, max_len
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.src_embedding = Embeddings(src_vocab_size, d_model)
        self.tgt_embedding = self.src_embedding if share_embeddings else Embeddings(tgt_vocab_size, d_model)
        positions = {"sinusoidal": PositionalEncoding, "learned": LearnedPositions}[positional]
        self.src_positional = positions(d_model, max_len)
        self.tgt_positional = positions(d_model, max_len)
        self.embedding_dropout = nn.Dropout(dropout)
        sizes = (d_model, heads, d_k, d_ff, dropout, layer_norm_eps)
        self.encoder = Encoder(EncoderLayer(*sizes) for _ in range(num_encoder_layers))
        self.decoder = Decoder(DecoderLayer(*sizes) for _ in range(num_decoder_layers))
        self.output_projection = nn.Linear(d_model, tgt_vocab_size, bias=False)
        if tie_output:
            self.output_projection.weight = self.tgt_embedding.embedding.weight

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """(B, S) source ids -> memory z (B, S, D) and its mask (B, 1, 1, S)."""
        source_mask = padding_mask(src, self.pad_id)[:, None, None, :]
        x = self.embedding_dropout(self.src_positional(self.src_embedding(src)))
        return self.encoder(x, source_mask), source_mask

    def decode(self, tgt_in: Tensor, memory: Tensor, source_mask: Tensor) -> Tensor:
        """(B, T) target ids shifted right (Sec. 3.1: "the output embeddings are offset by one
        position") -> (B, T, V) logits, the "learned linear transformation" before the softmax."""
        y = self.embedding_dropout(self.tgt_positional(self.tgt_embedding(tgt_in)))
        hidden = self.decoder(y, memory, source_mask, target_mask(tgt_in))
        return self.output_projection(hidden)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """(B, S) source ids, (B, T) shifted-right target ids -> (B, T, V) logits."""
        memory, source_mask = self.encode(src)
        return self.decode(tgt_in, memory, source_mask)

    def log_probs(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Sec. 3.4: "convert the decoder output to predicted next-token probabilities" with the
        softmax: (B, T, V) log-probabilities (the log of the softmax)."""
        return F.log_softmax(self(src, tgt_in), dim=-1)


# ----------------------------------------------------------------------------------- training


def label_smoothed_loss(log_probs: Tensor, labels: Tensor, smoothing: float, pad_id: int) -> Tensor:
    """Sec. 5.4, Label Smoothing: "During training, we employed label smoothing of value
    eps_ls = 0.1. This hurts perplexity, as the model learns to be more unsure, but improves
    accuracy and BLEU score."

    The target distribution is (1 - eps) on the label plus eps / V on every token, and the loss
    its cross-entropy with the model's, summed over the non-pad positions:
    -sum_t [(1 - eps) log p(y_t) + eps / V sum_v log p(v)]. log_probs (B, T, V), labels (B, T).
    """
    picked = log_probs.gather(-1, labels[..., None]).squeeze(-1)  # (B, T): log p(y_t)
    spread = log_probs.sum(dim=-1) / log_probs.size(-1)  # (B, T): mean over v of log p(v)
    loss = -((1.0 - smoothing) * picked + smoothing * spread)
    return loss.masked_fill(labels == pad_id, 0.0).sum()


ADAM_BETAS = (0.9, 0.98)
ADAM_EPS = 1e-9


def rate(step: int, d_model: int = 512, warmup: int = 4000) -> float:
    """Sec. 5.3, Eq. 3, the learning rate at training step `step` (counted from 1):

        lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)

    "This corresponds to increasing the learning rate linearly for the first warmup_steps
    training steps, and decreasing it thereafter proportionally to the inverse square root of
    the step number. We used warmup_steps = 4000."
    """
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def optimizer(
    model: nn.Module, d_model: int = 512, warmup: int = 4000
) -> tuple[torch.optim.Adam, torch.optim.lr_scheduler.LambdaLR]:
    """Sec. 5.3: "We used the Adam optimizer with beta_1 = 0.9, beta_2 = 0.98 and eps = 10^-9",
    its learning rate varied by `rate`. Each training step: `adam.step()`, then `schedule.step()`."""
    adam = torch.optim.Adam(model.parameters(), lr=1.0, betas=ADAM_BETAS, eps=ADAM_EPS)
    return adam, torch.optim.lr_scheduler.LambdaLR(adam, lambda done: rate(done + 1, d_model, warmup))


# ----------------------------------------------------------------------------------- decoding


@torch.no_grad()
def greedy_decode(model: Transformer, src: Tensor, max_len_extra: int = 50) -> list[list[int]]:
    """Greedy decoding. Sec. 3: "At each step the model is auto-regressive, consuming the
    previously generated symbols as additional input when generating the next."

    src (B, S): right-padded ids, each row ending with the end token. Each step re-runs the
    decoder over the whole prefix and takes the most probable next token. Sec. 6.1: "We set the
    maximum output length during inference to input length + 50" (and at most `max_len`
    positions). Put the model in eval mode first (no dropout at inference). Returns B lists of
    token ids, without the start and end tokens.
    """
    memory, source_mask = model.encode(src)
    limits = (padding_mask(src, model.pad_id).sum(dim=1) + max_len_extra).clamp(1, model.max_len).tolist()
    out = torch.full((src.size(0), 1), model.bos_id, dtype=torch.long, device=src.device)
    for _ in range(max(limits)):
        logits = model.decode(out, memory, source_mask)[:, -1]  # (B, V): the next token's
        out = torch.cat([out, logits.argmax(dim=-1, keepdim=True)], dim=1)
        rows = zip(out[:, 1:].tolist(), limits, strict=True)
        if all(model.eos_id in row or len(row) >= limit for row, limit in rows):
            break
    outputs = []
    for row, limit in zip(out[:, 1:].tolist(), limits, strict=True):
        row = row[:limit]
        outputs.append(row[: row.index(model.eos_id)] if model.eos_id in row else row)
    return outputs
