"""The model directory format: reading, checking and writing its files, and building the model
a directory holds (`load_model`, `save_pretrained`, `from_pretrained`, `read_model_dir`).

Not a paper module: it keeps broken or hostile files away from the model (`aiayn.model`), which
imports nothing from here: the format version and the config's (de)serialisation live here.

A *model directory* holds `config.json` (format version, model type, `ModelConfig`) and
`model.safetensors` (the weights). Weights are read only from safetensors, which cannot
run code when loaded; a tensor whose name or shape disagrees with the config is an error
naming the tensor. Nothing is allocated before the config and the weights agree
(`aiayn.formats.layout`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_model
from torch import nn

from aiayn.core.errors import CheckpointError
from aiayn.core.files import atomic_write, atomic_write_text
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import JOINT_FILE, Tokenizer, TokenizerPair
from aiayn.formats.layout import (
    Model,
    StoredTensor,
    check_unstored_buffers,
    check_weights_file,
    materialize,
    meta_model,
    read_weights_header,
)
from aiayn.model.config import ModelConfig
from aiayn.model.decoder_only import DecoderOnlyLM
from aiayn.model.encoder_only import EncoderOnly
from aiayn.model.transformer import Transformer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT_VERSION = 1
"""Version of the `config.json` format that `save_pretrained` writes."""

MODEL_CLASSES: dict[str, type[nn.Module]] = {
    model_class.model_type: model_class for model_class in (Transformer, DecoderOnlyLM, EncoderOnly)
}
"""The model class of each `model_type` a `config.json` may name."""


def config_to_dict(config: ModelConfig) -> dict[str, Any]:
    """The `config` section of `config.json`: `ModelConfig`'s fields (`head_dim` only when given)."""
    return config.to_dict()


def config_from_dict(data: dict[str, Any], where: str | Path) -> ModelConfig:
    """The `ModelConfig` of a `config` section; a bad or unknown key is a `CheckpointError`
    naming `where`. (A `format_version` inside the section, as old writers left it, is checked
    and dropped.)"""
    if not isinstance(data, dict):
        raise CheckpointError(f"{where}: 'config' is not a JSON object")
    data = dict(data)
    version = data.pop("format_version", FORMAT_VERSION)
    try:
        check_version(version, where)
        return ModelConfig.from_dict(data)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{where}: {error}") from None


def check_version(version: Any, where: str | Path) -> None:
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{where}: format_version {version!r} is not supported (this aiayn reads up to "
            f"{FORMAT_VERSION}); upgrade aiayn"
        )


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a valid number")


def read_model_json(directory: str | Path) -> dict[str, Any]:
    """Read and check `config.json` of a model directory."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(f"{directory} is not a model directory: {CONFIG_FILE} is missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError) as error:  # json.JSONDecodeError is a ValueError
        raise CheckpointError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict) or "config" not in data or "model_type" not in data:
        raise CheckpointError(f"{path}: expected keys 'format_version', 'model_type', 'config'")
    check_version(data.get("format_version"), path)
    return data


def is_model_dir(path: str | Path) -> bool:
    """Whether `path` is an aiayn model directory (its `config.json` has a `config` section,
    which a Hugging Face `config.json` has not)."""
    try:
        data = json.loads((Path(path) / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and "config" in data and "model_type" in data


def load_weights(model: nn.Module, path: Path, stored: dict[str, StoredTensor] | None = None) -> None:
    """Load safetensors weights into `model`, checking every tensor's name and shape first
    (against `stored`, the header already read, when given)."""
    check_weights_file(model, path, stored)
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{path}: not a readable safetensors file ({error})") from None
    model.load_state_dict(tensors, strict=False)


def save_pretrained(model: nn.Module, directory: str | Path) -> Path:
    """Write `model`'s `config.json` and `model.safetensors` into `directory` (atomically).

    `model` has a `model_type`, a `config` (`ModelConfig`) and optionally `extra_json()`, the
    constructor arguments besides the config (e.g. `num_classes`).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / WEIGHTS_FILE, lambda tmp: save_model(model, str(tmp)))
    extra_json = getattr(model, "extra_json", None)
    data = {
        "format_version": FORMAT_VERSION,
        "model_type": model.model_type,
        **(extra_json() if extra_json is not None else {}),
        "config": config_to_dict(model.config),
    }
    atomic_write_text(directory / CONFIG_FILE, json.dumps(data, indent=2) + "\n")
    return directory


@dataclass(frozen=True)
class ModelDirectory:
    """A model directory as `read_model_dir` reads it, in one pass: `config.json` and the
    safetensors header (no tensor data). Building the model (`build_model`) and loading its
    weights (`load_weights`) follow from it, one way."""

    path: Path
    model_json: dict[str, Any]
    """`config.json` as read (format version, model type, constructor arguments, config)."""
    config: ModelConfig
    weights: dict[str, StoredTensor]
    """The safetensors header: each stored tensor's shape and dtype."""

    @property
    def model_type(self) -> str:
        return self.model_json["model_type"]

    @property
    def extra(self) -> dict[str, Any]:
        """Constructor arguments besides the config (e.g. `num_classes`)."""
        described = ("format_version", "model_type", "config")
        return {k: v for k, v in self.model_json.items() if k not in described}

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def weights_path(self) -> Path:
        return self.path / WEIGHTS_FILE


def read_model_dir(directory: str | Path) -> ModelDirectory:
    """The one reader of a model directory: `config.json` (checked, parsed into a `ModelConfig`)
    and the safetensors header, each read once."""
    directory = Path(directory)
    data = read_model_json(directory)
    config = config_from_dict(data["config"], directory / CONFIG_FILE)
    return ModelDirectory(directory, data, config, read_weights_header(directory / WEIGHTS_FILE))


def checked_layout(record: ModelDirectory, model_class: type[Model]) -> Model:
    """The model `record` describes, as `model_class` laid out on the meta device, once that
    layout agrees with the weights header: nothing is allocated for a config the weights
    contradict, or one too large to hold."""
    if record.model_type != model_class.model_type:
        raise CheckpointError(
            f"{record.path} holds a {record.model_type!r} model, not a {model_class.model_type!r}"
        )
    layout = meta_model(lambda: model_class(record.config, **record.extra), record.config_path)
    check_weights_file(layout, record.weights_path, record.weights)  # before anything is allocated
    check_unstored_buffers(layout, record.weights_path, record.config_path)
    return layout


def build_model(record: ModelDirectory, model_class: type[Model]) -> Model:
    """The model `record` describes, built as `model_class` with its own initialisation (its
    weights not loaded), once `checked_layout` agrees with the weights header."""
    checked_layout(record, model_class)
    return model_class(record.config, **record.extra)


def open_model(record: ModelDirectory, model_class: type[Model], device: str | torch.device = "cpu") -> Model:
    """The model of `record`, built once (its `checked_layout` given storage by `materialize`),
    its weights loaded, on `device`, in eval mode."""
    model = materialize(checked_layout(record, model_class))
    load_weights(model, record.weights_path, record.weights)
    return model.to(device).eval()


def from_pretrained(
    model_class: type[Model], directory: str | Path, device: str | torch.device = "cpu"
) -> Model:
    """Build `model_class` from a model directory's config and load its weights."""
    return open_model(read_model_dir(directory), model_class, device)


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
