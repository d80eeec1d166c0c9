"""Model directories: `load_model` builds whichever aiayn model a directory holds.

The format itself (file names, reading and checking `config.json` and the weights header,
writing) lives in `aiayn.model_format`, which imports no model class; its names are
re-exported here for the callers that know them from this module.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import JOINT_FILE, Tokenizer, TokenizerPair
from aiayn.errors import CheckpointError
from aiayn.model.config import ModelConfig
from aiayn.model.decoder_only import DecoderOnlyLM
from aiayn.model.encoder_only import EncoderOnly
from aiayn.model.transformer import Transformer
from aiayn.model_format import (
    CONFIG_FILE,
    UNSTORED_BUFFER_LIMIT,
    WEIGHTS_FILE,
    ModelDirectory,
    StoredTensor,
    build_model,
    check_unstored_buffers,
    check_weights_file,
    from_pretrained,
    is_model_dir,
    load_weights,
    meta_model,
    open_model,
    read_model_dir,
    read_model_json,
    read_weights_header,
    save_pretrained,
)

__all__ = [
    "CONFIG_FILE",
    "MODEL_CLASSES",
    "UNSTORED_BUFFER_LIMIT",
    "WEIGHTS_FILE",
    "ModelDirectory",
    "StoredTensor",
    "build_model",
    "check_unstored_buffers",
    "check_weights_file",
    "from_pretrained",
    "is_model_dir",
    "load_model",
    "load_model_of",
    "load_tokenizers",
    "load_weights",
    "meta_model",
    "model_class",
    "open_model",
    "read_model_dir",
    "read_model_json",
    "read_weights_header",
    "save_pretrained",
]

MODEL_CLASSES: dict[str, type[nn.Module]] = {
    model_class.model_type: model_class for model_class in (Transformer, DecoderOnlyLM, EncoderOnly)
}
"""The model class of each `model_type` a `config.json` may name."""


def load_model(directory: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """Load whichever aiayn model a model directory holds."""
    return load_model_of(read_model_dir(directory), device)


def model_class(record: ModelDirectory) -> type[nn.Module]:
    """The model class of the `model_type` that `record` names."""
    if record.model_type not in MODEL_CLASSES:
        raise CheckpointError(f"{record.path}: unknown model_type {record.model_type!r}")
    return MODEL_CLASSES[record.model_type]


def load_model_of(record: ModelDirectory, device: str | torch.device = "cpu") -> nn.Module:
    """The model of a directory already read (`read_model_dir`), its weights loaded."""
    return open_model(record, model_class(record), device)


def load_tokenizers(
    directory: Path, config: ModelConfig, model_type: str, check_fits: bool = True
) -> TokenizerPair:
    """The tokenizer(s) of a model directory, with the model's special ids (a language model's
    one tokenizer serves as both sides); `check_fits`: refuse a tokenizer with ids the
    model's embeddings lack (the inference interfaces check that themselves)."""
    specials = SpecialTokens.of(config)
    if model_type == "decoder_only":
        tokenizer = Tokenizer.load(directory / JOINT_FILE, specials)
        tokenizers = TokenizerPair(tokenizer, tokenizer)
    else:
        tokenizers = TokenizerPair.load(directory, specials)
    if check_fits:
        source_size = config.tgt_vocab_size if model_type == "decoder_only" else config.src_vocab_size
        tokenizers.source.check_fits(source_size, "the model's source embedding")
        tokenizers.target.check_fits(config.tgt_vocab_size, "the model's target embedding")
    return tokenizers
