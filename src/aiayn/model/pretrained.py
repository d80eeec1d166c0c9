"""Model directories: `save_pretrained(dir)` / `from_pretrained(dir)`.

A *model directory* holds `config.json` (format version, model type, `ModelConfig`) and
`model.safetensors` (the weights). Weights are read only from safetensors, which cannot
run code when loaded; a tensor whose name or shape disagrees with the config is an error
naming the tensor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_model
from torch import nn

from aiayn.errors import CheckpointError
from aiayn.files import atomic_write, atomic_write_text
from aiayn.model.config import FORMAT_VERSION, ModelConfig

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


def read_model_json(directory: str | Path) -> dict[str, Any]:
    """Read and check `config.json` of a model directory."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(f"{directory} is not a model directory: {CONFIG_FILE} is missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict) or "config" not in data or "model_type" not in data:
        raise CheckpointError(f"{path}: expected keys 'format_version', 'model_type', 'config'")
    version = data.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: format_version {version!r} is not supported (this aiayn reads up to "
            f"{FORMAT_VERSION})"
        )
    return data


def load_weights(model: nn.Module, path: Path) -> None:
    """Load safetensors weights into `model`, checking every tensor's name and shape."""
    if not path.is_file():
        raise CheckpointError(f"{path} is missing")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{path}: not a readable safetensors file ({error})") from None
    expected = model.state_dict()
    for name, tensor in tensors.items():
        if name not in expected:
            raise CheckpointError(f"{path}: unexpected tensor {name!r} for this model config")
        if tensor.shape != expected[name].shape:
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {tuple(tensor.shape)} but the config "
                f"expects {tuple(expected[name].shape)}"
            )
    loaded_storage = {expected[name].data_ptr() for name in tensors}
    for name, tensor in expected.items():  # tied weights are stored once, under one name
        if name not in tensors and tensor.data_ptr() not in loaded_storage:
            raise CheckpointError(f"{path}: tensor {name!r} is missing")
    model.load_state_dict(tensors, strict=False)


class PretrainedMixin:
    """`save_pretrained` / `from_pretrained` for the aiayn models."""

    model_type: str = ""
    config: ModelConfig

    def extra_json(self) -> dict[str, Any]:
        """Constructor arguments besides the config (e.g. `num_classes`)."""
        return {}

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write `config.json` and `model.safetensors` into `directory` (atomically)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        assert isinstance(self, nn.Module)
        atomic_write(directory / WEIGHTS_FILE, lambda tmp: save_model(self, str(tmp)))
        data = {
            "format_version": FORMAT_VERSION,
            "model_type": self.model_type,
            **self.extra_json(),
            "config": {k: v for k, v in self.config.to_dict().items() if k != "format_version"},
        }
        atomic_write_text(directory / CONFIG_FILE, json.dumps(data, indent=2) + "\n")
        return directory

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str | torch.device = "cpu"):
        """Build the model from a model directory's config and load its weights."""
        data = read_model_json(directory)
        if data["model_type"] != cls.model_type:
            raise CheckpointError(
                f"{directory} holds a {data['model_type']!r} model, not a {cls.model_type!r}"
            )
        try:
            config = ModelConfig.from_dict(data["config"])
        except (TypeError, ValueError) as error:
            raise CheckpointError(f"{Path(directory) / CONFIG_FILE}: {error}") from None
        kwargs = {k: v for k, v in data.items() if k not in ("format_version", "model_type", "config")}
        try:
            model = cls(config, **kwargs)
        except (TypeError, ValueError) as error:  # e.g. an unknown or bad extra key
            raise CheckpointError(f"{Path(directory) / CONFIG_FILE}: {error}") from None
        load_weights(model, Path(directory) / WEIGHTS_FILE)
        return model.to(device).eval()


def load_model(directory: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """Load whichever aiayn model a model directory holds."""
    from aiayn.model.decoder_only import DecoderOnlyLM
    from aiayn.model.encoder_only import EncoderOnly
    from aiayn.model.transformer import Transformer

    model_type = read_model_json(directory)["model_type"]
    for model_class in (Transformer, DecoderOnlyLM, EncoderOnly):
        if model_class.model_type == model_type:
            return model_class.from_pretrained(directory, device)
    raise CheckpointError(f"{directory}: unknown model_type {model_type!r}")
