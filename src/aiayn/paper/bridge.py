"""Between aiayn and the reference: its configs checked, its weights renamed, its directories read.

`aiayn.paper.transformer` is the paper alone and knows nothing of aiayn. This module is the
plumbing that lets the two be compared: it refuses the `ModelConfig` settings the paper does not
have, builds the reference's `Transformer` from a config, and converts between the engine's
weights and the reference's.

The engine's weights and the reference's. Sec. 3.2.2 writes W_i^Q, W_i^K, W_i^V (D x d_k for
each head i) and W^O (h d_v x D). The reference keeps the h heads' W_i^Q side by side in one
map `w_q`, and so for `w_k`, `w_v`; `w_o` is W^O. The engine stacks the three as the rows of one
fused (3 h d_k, D) `in_proj` (weight and bias): its first third is W^Q, the second W^K, the last
W^V, and calls W^O `out_proj`. `paper_state_dict` slices an engine state dict into the
reference's names and `engine_state_dict` concatenates them back; every other parameter has the
same name in both.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from aiayn.core.errors import CheckpointError
from aiayn.data.tokenizer import TokenizerPair
from aiayn.formats import load_model_of, load_tokenizers, read_model_dir
from aiayn.model.config import ModelConfig
from aiayn.paper.transformer import Transformer


def check_config(config: ModelConfig, model_type: str = "transformer") -> None:
    """Raise `ValueError` naming the first setting of `config` the paper does not have: the
    reference implements only the encoder-decoder of Sec. 3 (post-LN, ReLU, scaled embeddings,
    no output bias, dropout only where Sec. 5.4 puts it)."""
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


def transformer_arguments(config: ModelConfig) -> dict:
    """The keyword arguments of the reference's `Transformer` for an aiayn `ModelConfig`."""
    check_config(config)
    return dict(
        src_vocab_size=config.src_vocab_size, tgt_vocab_size=config.tgt_vocab_size,
        num_encoder_layers=config.num_encoder_layers, num_decoder_layers=config.num_decoder_layers,
        d_model=config.d_model, heads=config.num_heads, d_k=config.head_dim, d_ff=config.d_ff,
        dropout=config.dropout, max_len=config.max_len, positional=config.positional,
        share_embeddings=config.share_embeddings, tie_output=config.tie_output,
        layer_norm_eps=config.layer_norm_eps,
        pad_id=config.pad_id, bos_id=config.bos_id, eos_id=config.eos_id,
    )  # fmt: skip


def from_config(config: ModelConfig) -> Transformer:
    """The reference `Transformer` of the sizes and switches in `config` (freshly initialised)."""
    return Transformer(**transformer_arguments(config))


def paper_state_dict(engine: dict[str, Tensor]) -> dict[str, Tensor]:
    """An engine state dict in the reference's names: each fused `in_proj` sliced into W^Q, W^K,
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


def load(model_dir: str | Path) -> tuple[Transformer, TokenizerPair]:
    """The model of an aiayn translation model directory (in eval mode), and its tokenizers.

    The directory is read by the engine's own reader (`aiayn.formats`: config.json,
    model.safetensors, every tensor's name and shape checked), then its weights are put into the
    reference's names (`paper_state_dict`). A config the reference does not implement is
    refused first with one line naming the setting (`check_config`).
    """
    record = read_model_dir(model_dir)
    config = record.config
    try:
        check_config(config, record.model_type)
    except ValueError as error:
        raise CheckpointError(f"{record.config_path}: {error}") from None
    model = from_config(config)
    model.load_state_dict(paper_state_dict(load_model_of(record).state_dict()))
    return model.eval(), load_tokenizers(record.path, config, record.model_type)
