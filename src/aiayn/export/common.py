"""What both exporters share: reading a model directory, token names, the output directory.

An export reads an aiayn model directory (`config.json`, `model.safetensors`, tokenizer
files) and writes a new directory in another runtime's format. The special-token ids come
from the model's `ModelConfig` (`pad_id`, `bos_id`, `eos_id`, `unk_id`), never from constants:
a vocabulary may keep its special tokens anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.core.files import output_directory
from aiayn.data.tokenizer import TokenizerPair
from aiayn.formats import load_model_of, load_tokenizers, read_model_dir
from aiayn.model.config import ModelConfig

__all__ = ["ExportSource", "load_source", "output_directory", "refuse_other_head_dim"]


@dataclass
class ExportSource:
    """A loaded model directory: the model in eval mode, its JSON and its tokenizer(s).

    `tokenizers` is the `TokenizerPair` of a translation model; a language model has one
    tokenizer, used for both sides.
    """

    directory: Path
    model: nn.Module
    model_json: dict[str, Any]
    tokenizers: TokenizerPair

    @property
    def config(self) -> ModelConfig:
        return self.model.config  # type: ignore[return-value]

    @property
    def model_type(self) -> str:
        return self.model_json["model_type"]


def load_source(directory: str | Path) -> ExportSource:
    """Read a model directory for export; the encoder-only classifier is refused."""
    record = read_model_dir(directory)
    if record.model_type == "encoder_only":
        raise CheckpointError(
            f"{directory} holds an encoder-only classifier; only translation models "
            "(encoder-decoder) and language models (decoder-only) can be exported"
        )
    model = load_model_of(record, "cpu")
    tokenizers = load_tokenizers(record.path, record.config, record.model_type)
    return ExportSource(record.path, model, record.model_json, tokenizers)


def refuse_other_head_dim(config: ModelConfig, target: str) -> None:
    """Raise `ConfigError` for heads of another width than d_model / num_heads (`head_dim`, Table 3
    row B): the exported formats derive d_k from d_model and the number of heads."""
    if config.head_dim is not None and config.head_dim * config.num_heads != config.d_model:
        raise ConfigError(
            f"{target} cannot represent ModelConfig.head_dim={config.head_dim} (it needs head_dim x "
            f"num_heads = d_model = {config.d_model}, here {config.num_heads} heads)"
        )
