"""`aiayn.paper`: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017), as written.

A reference to read in one sitting, beside the engine (`aiayn.model`), which adds packing, a
key/value cache, beam search and kernels for speed. Nothing here is optimised: each formula is
written once, where the paper states it. Tests (tests/paper) bind the two: equal log-probabilities,
equal greedy outputs and equal gradients from the same weights.

    model, tokenizers = aiayn.paper.load("runs/dates")  # an aiayn post-LN, ReLU translation model
    log_probs = model.log_probs(src, tgt_in)             # (B, S), (B, T) ids -> (B, T, V)
    outputs = greedy_decode(model, src)                  # B lists of token ids

Shapes: B batch, S source length, T target length, D = d_model, H = h heads, V vocabulary.
Masks are bool and True where attention is allowed.

The engine's weights and these. Sec. 3.2.2 writes W_i^Q, W_i^K, W_i^V (D x d_k for each head i)
and W^O (h d_v x D). Here the h heads' W_i^Q sit side by side in one D x h d_k map `w_q` (head i
is columns i d_k .. (i+1) d_k of its output), and so for `w_k`, `w_v`; `w_o` is W^O. The engine
stacks the three as the rows of one fused (3 h d_k, D) `in_proj` (weight and bias): its first
third is W^Q, the second W^K, the last W^V, and calls W^O `out_proj`. (h d_k = D unless the config
sets `head_dim`, as Table 3 row B does.) `paper_state_dict` slices an engine
state dict into these names and `engine_state_dict` concatenates them back; every other
parameter has the same name in both. `load` uses the first, the training adapter
(`aiayn.translation.paper_adapter`) both.
"""

from __future__ import annotations

import math
from typing import Any

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


def target_mask(tgt_in: Tensor, pad_id: int) -> Tensor:
    """(B, T) shifted-right target ids -> (B, 1, T, T): no padding key, no later position.

    Sec. 3.2.3's masking of later positions, and of padding. Position 0 holds the start token
    and is real even where that token is the padding id.
    """
    real = padding_mask(tgt_in, pad_id)
    real[:, 0] = True
    return real[:, None, None, :] & subsequent_mask(tgt_in.size(1), tgt_in.device)


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
    d_k = d_v = d_model / h = 64." (Table 3 row B varies d_k; the engine's fused `in_proj`: see
    the module docstring.)
    """

    def __init__(self, d_model: int, heads: int, d_k: int) -> None:
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
        """query (B, T, D), key and value (B, S, D), mask (B, 1, T, S) or (B, 1, 1, S) -> (B, T, D)."""
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

    def __init__(self, d_model: int, d_ff: int) -> None:
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
    """

    def __init__(self, d_model: int, dropout: float, eps: float) -> None:
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

    def __init__(self, c: Any) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(c.d_model, c.num_heads, c.d_k)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff)
        self.attention_sublayer = SublayerConnection(c.d_model, c.dropout, c.layer_norm_eps)
        self.feed_forward_sublayer = SublayerConnection(c.d_model, c.dropout, c.layer_norm_eps)

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

    def __init__(self, c: Any) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(c.d_model, c.num_heads, c.d_k)
        self.cross_attention = MultiHeadAttention(c.d_model, c.num_heads, c.d_k)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff)
        self.self_attention_sublayer = SublayerConnection(c.d_model, c.dropout, c.layer_norm_eps)
        self.cross_attention_sublayer = SublayerConnection(c.d_model, c.dropout, c.layer_norm_eps)
        self.feed_forward_sublayer = SublayerConnection(c.d_model, c.dropout, c.layer_norm_eps)

    def forward(self, x: Tensor, memory: Tensor, source_mask: Tensor, target_mask: Tensor) -> Tensor:
        """x (B, T, D), memory (B, S, D), source_mask (B, 1, 1, S), target_mask (B, 1, T, T)."""
        x = self.self_attention_sublayer(x, self.self_attention(x, x, x, target_mask))
        x = self.cross_attention_sublayer(x, self.cross_attention(x, memory, memory, source_mask))
        return self.feed_forward_sublayer(x, self.feed_forward(x))


class Encoder(nn.Module):
    """Sec. 3.1: "The encoder is composed of a stack of N = 6 identical layers." """

    def __init__(self, c: Any) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.num_encoder_layers))

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (B, S, D) embedded source -> (B, S, D) memory."""
        for layer in self.layers:
            x = layer(x, mask)
        return x


class Decoder(nn.Module):
    """Sec. 3.1: "The decoder is also composed of a stack of N = 6 identical layers." """

    def __init__(self, c: Any) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_decoder_layers))

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

    def __init__(self, vocab_size: int, d_model: int) -> None:
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

    def __init__(self, d_model: int, max_len: int) -> None:
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

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D) -> x + P[0:T]."""
        return x + self.embedding.weight[: x.size(1)]


# ------------------------------------------------------------------------------ the Transformer


def check_config(config: Any, model_type: str = "transformer") -> None:
    """Raise `ValueError` naming the first setting of an aiayn `ModelConfig` the paper does not
    have: this module implements only the encoder-decoder of Sec. 3 (post-LN, ReLU, scaled
    embeddings, no output bias, dropout only where Sec. 5.4 puts it)."""
    refusals = [
        (model_type != "transformer", f"model_type={model_type!r} (the paper's model is an encoder-decoder)"),
        (config.norm_first, "norm_first=True (pre-LN; the paper normalises after each sub-layer)"),
        (config.activation != "relu", f"activation={config.activation!r} (the paper's FFN uses ReLU, Eq. 2)"),
        (config.output_bias, "output_bias=True (the paper's pre-softmax projection has no bias)"),
        (not config.scale_embedding, "scale_embedding=False (Sec. 3.4 scales by sqrt(d_model))"),
        (config.attention_dropout > 0, "attention_dropout > 0 (Sec. 5.4 drops sub-layer outputs only)"),
        (config.activation_dropout > 0, "activation_dropout > 0 (Sec. 5.4 drops sub-layer outputs only)"),
    ]
    for refused, setting in refusals:
        if refused:
            raise ValueError(f"aiayn.paper does not implement {setting}")


class Transformer(nn.Module):
    """The Transformer, Sec. 3, Figure 1: "The encoder maps an input sequence of symbol
    representations (x_1, ..., x_n) to a sequence of continuous representations
    z = (z_1, ..., z_n). Given z, the decoder then generates an output sequence (y_1, ..., y_m)
    of symbols one element at a time."

    Sec. 3.4: "we share the same weight matrix between the two embedding layers and the
    pre-softmax linear transformation" (`share_embeddings`: one source and target embedding;
    `tie_output`: the target embedding is the pre-softmax projection). Sec. 5.4: "we apply
    dropout to the sums of the embeddings and the positional encodings".

    `config` is an aiayn `ModelConfig` (or anything with its fields) that `check_config` passes.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        check_config(config)
        self.config = c = config
        self.src_embedding = Embeddings(c.src_vocab_size, c.d_model)
        self.tgt_embedding = (
            self.src_embedding if c.share_embeddings else Embeddings(c.tgt_vocab_size, c.d_model)
        )
        positions = PositionalEncoding if c.positional == "sinusoidal" else LearnedPositions
        self.src_positional = positions(c.d_model, c.max_len)
        self.tgt_positional = positions(c.d_model, c.max_len)
        self.embedding_dropout = nn.Dropout(c.dropout)
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.tie_output:
            self.output_projection.weight = self.tgt_embedding.embedding.weight

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """(B, S) source ids -> memory z (B, S, D) and its mask (B, 1, 1, S)."""
        source_mask = padding_mask(src, self.config.pad_id)[:, None, None, :]
        x = self.embedding_dropout(self.src_positional(self.src_embedding(src)))
        return self.encoder(x, source_mask), source_mask

    def decode(self, tgt_in: Tensor, memory: Tensor, source_mask: Tensor) -> Tensor:
        """(B, T) target ids shifted right (Sec. 3.1: "the output embeddings are offset by one
        position") -> (B, T, V) logits, the "learned linear transformation" before the softmax."""
        y = self.embedding_dropout(self.tgt_positional(self.tgt_embedding(tgt_in)))
        hidden = self.decoder(y, memory, source_mask, target_mask(tgt_in, self.config.pad_id))
        return self.output_projection(hidden)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """(B, S) source ids, (B, T) shifted-right target ids -> (B, T, V) logits."""
        memory, source_mask = self.encode(src)
        return self.decode(tgt_in, memory, source_mask)

    def log_probs(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Sec. 3.4: "convert the decoder output to predicted next-token probabilities" with the
        softmax: (B, T, V) log-probabilities (the log of the softmax)."""
        return F.log_softmax(self(src, tgt_in), dim=-1)


# ------------------------------------------------------------------------- training, decoding


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


@torch.no_grad()
def greedy_decode(model: Transformer, src: Tensor, max_len_extra: int = 50) -> list[list[int]]:
    """Greedy decoding. Sec. 3: "At each step the model is auto-regressive, consuming the
    previously generated symbols as additional input when generating the next."

    src (B, S): right-padded ids, each row ending with <eos>. Each step re-runs the decoder over
    the whole prefix and takes the most probable next token; <pad> and <bos> are never chosen
    (unless <bos> is also <eos>). Sec. 6.1: "We set the maximum output length during inference
    to input length + 50" (and at most `max_len` positions). Returns B lists of token ids,
    without <bos> and <eos>.
    """
    was_training = model.training
    model.eval()
    c = model.config
    memory, source_mask = model.encode(src)
    limits = (padding_mask(src, c.pad_id).sum(dim=1) + max_len_extra).clamp(1, c.max_len).tolist()
    out = torch.full((src.size(0), 1), c.bos_id, dtype=torch.long, device=src.device)
    never = sorted({c.pad_id, c.bos_id} - {c.eos_id})
    for _ in range(max(limits)):
        logits = model.decode(out, memory, source_mask)[:, -1]  # (B, V): the next token's
        logits[:, never] = float("-inf")
        out = torch.cat([out, logits.argmax(dim=-1, keepdim=True)], dim=1)
        rows = zip(out[:, 1:].tolist(), limits, strict=True)
        if all(c.eos_id in row or len(row) >= limit for row, limit in rows):
            break
    model.train(was_training)
    outputs = []
    for row, limit in zip(out[:, 1:].tolist(), limits, strict=True):
        row = row[:limit]
        outputs.append(row[: row.index(c.eos_id)] if c.eos_id in row else row)
    return outputs


# ----------------------------------------------------------------------------- engine weights


def paper_state_dict(engine: dict[str, Tensor]) -> dict[str, Tensor]:
    """An engine state dict in this module's names: each fused `in_proj` sliced into W^Q, W^K,
    W^V (its first, second and third h d_k rows), `out_proj` renamed W^O (module docstring)."""
    out = {}
    for name, tensor in engine.items():
        if ".in_proj." in name:
            for part, piece in zip(("w_q", "w_k", "w_v"), tensor.chunk(3, dim=0), strict=True):
                out[name.replace("in_proj", part)] = piece
        else:
            out[name.replace(".out_proj.", ".w_o.")] = tensor
    return out


def engine_state_dict(paper: dict[str, Tensor]) -> dict[str, Tensor]:
    """The inverse of `paper_state_dict`: W^Q, W^K, W^V stacked into the engine's `in_proj`."""
    out = {}
    for name, tensor in paper.items():
        if ".w_k." in name or ".w_v." in name:
            continue
        if ".w_q." in name:
            parts = [paper[name.replace(".w_q.", f".{p}.")] for p in ("w_q", "w_k", "w_v")]
            out[name.replace(".w_q.", ".in_proj.")] = torch.cat(parts, dim=0)
        else:
            out[name.replace(".w_o.", ".out_proj.")] = tensor
    return out


def load(model_dir: Any) -> tuple[Transformer, Any]:
    """The model of an aiayn translation model directory, and its `TokenizerPair`.

    The directory is read by the engine's own reader (`aiayn.model_dir`: config.json,
    model.safetensors, every tensor's name and shape checked), then its weights are put into
    this module's names (`paper_state_dict`). A config this module does not implement is
    refused first with one line naming the setting (`check_config`).
    """
    from aiayn.errors import CheckpointError
    from aiayn.model_dir import load_model_of, load_tokenizers, read_model_dir

    record = read_model_dir(model_dir)
    config = record.config
    try:
        check_config(config, record.model_type)
    except ValueError as error:
        raise CheckpointError(f"{record.config_path}: {error}") from None
    model = Transformer(config)
    model.load_state_dict(paper_state_dict(load_model_of(record).state_dict()))
    return model.eval(), load_tokenizers(record.path, config, record.model_type)
