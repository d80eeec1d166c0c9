"""Model directories: `load_model` builds whichever aiayn model a directory holds.

The format itself (file names, reading and checking `config.json` and the weights header,
writing) lives in `aiayn.model_format`, which imports no model class; its names are
re-exported here for the callers that know them from this module.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from aiayn.errors import CheckpointError
from aiayn.model.decoder_only import DecoderOnlyLM
from aiayn.model.encoder_only import EncoderOnly
from aiayn.model.transformer import Transformer
from aiayn.model_format import (
    CONFIG_FILE,
    UNSTORED_BUFFER_LIMIT,
    WEIGHTS_FILE,
    StoredTensor,
    check_unstored_buffers,
    check_weights_file,
    from_pretrained,
    is_model_dir,
    load_weights,
    meta_model,
    read_model_json,
    read_weights_header,
    save_pretrained,
)

__all__ = [
    "CONFIG_FILE", "MODEL_CLASSES", "UNSTORED_BUFFER_LIMIT", "WEIGHTS_FILE", "StoredTensor",
    "check_unstored_buffers", "check_weights_file", "from_pretrained", "is_model_dir", "load_model",
    "load_weights", "meta_model", "read_model_json", "read_weights_header", "save_pretrained",
]

MODEL_CLASSES: dict[str, type[nn.Module]] = {
    model_class.model_type: model_class for model_class in (Transformer, DecoderOnlyLM, EncoderOnly)
}
"""The model class of each `model_type` a `config.json` may name."""


def load_model(directory: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """Load whichever aiayn model a model directory holds."""
    model_type = read_model_json(directory)["model_type"]
    if model_type not in MODEL_CLASSES:
        raise CheckpointError(f"{directory}: unknown model_type {model_type!r}")
    return from_pretrained(MODEL_CLASSES[model_type], directory, device)
