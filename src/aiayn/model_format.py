"""The model directory format: reading, checking and writing its files (`save_pretrained`,
`from_pretrained`, `read_model_json`, `read_weights_header`).

Not a paper module: it keeps broken or hostile files away from the model (`aiayn.model`). It
imports no model class (the class to build is an argument), so the model classes can offer
`save_pretrained` / `from_pretrained` as thin methods without an import cycle;
`aiayn.model_dir.load_model` picks the class a directory names.

A *model directory* holds `config.json` (format version, model type, `ModelConfig`) and
`model.safetensors` (the weights). Weights are read only from safetensors, which cannot
run code when loaded; a tensor whose name or shape disagrees with the config is an error
naming the tensor.

Nothing is allocated before the config and the weights agree: the model the config describes
is first laid out on the `meta` device (shapes and dtypes, no memory) and compared with the
safetensors header (names, shapes, dtypes; no tensor data read), so a `config.json` with
`d_model: 1000000000` is a one-line error rather than a 252 GB allocation. Buffers that the
weights file does not store (the sinusoidal table) may not take more memory than the weights
file itself, or `UNSTORED_BUFFER_LIMIT`, whichever is larger.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_model
from torch import nn
from torch.overrides import TorchFunctionMode

from aiayn.errors import CheckpointError, first_line
from aiayn.files import atomic_write, atomic_write_text

if TYPE_CHECKING:
    from aiayn.model.config import ModelConfig

# The model classes import this module to offer `save_pretrained` / `from_pretrained`, and
# importing `aiayn.model.config` runs `aiayn.model`'s `__init__`: so `aiayn.model.config` is
# imported inside the functions that need it.

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
UNSTORED_BUFFER_LIMIT = 256 * 2**20
"""Bytes of buffers not stored in the weights file that a model directory may always imply."""


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a valid number")


def read_model_json(directory: str | Path) -> dict[str, Any]:
    """Read and check `config.json` of a model directory."""
    from aiayn.model.config import FORMAT_VERSION

    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(f"{directory} is not a model directory: {CONFIG_FILE} is missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError) as error:  # json.JSONDecodeError is a ValueError
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


def is_model_dir(path: str | Path) -> bool:
    """Whether `path` is an aiayn model directory (its `config.json` has a `config` section,
    which a Hugging Face `config.json` has not)."""
    try:
        data = json.loads((Path(path) / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and "config" in data and "model_type" in data


@dataclass(frozen=True)
class StoredTensor:
    """A tensor as a safetensors header describes it."""

    shape: tuple[int, ...]
    dtype: str  # safetensors' name: 'F32', 'BF16', 'I64', ...

    @property
    def is_floating_point(self) -> bool:
        return self.dtype.startswith(("F", "BF"))


def read_weights_header(path: Path) -> dict[str, StoredTensor]:
    """Names, shapes and dtypes of the tensors of a safetensors file, from its header alone
    (no tensor data is read or allocated)."""
    if not path.is_file():
        raise CheckpointError(f"{path} is missing")
    try:
        with safe_open(str(path), framework="pt") as file:
            slices = {name: file.get_slice(name) for name in file.keys()}  # noqa: SIM118 (not a dict)
            return {
                name: StoredTensor(tuple(part.get_shape()), part.get_dtype()) for name, part in slices.items()
            }
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{path}: not a readable safetensors file ({error})") from None


class _OneByteOnOverflow(TorchFunctionMode):
    """Under `meta_model`: a tensor whose size in bytes overflows 64 bits (d_model = 10^9 makes
    a (3 x 10^9, 10^9) projection) is laid out with 1-byte elements instead, so that its shape
    can still be compared with the weights (only shapes and kinds of dtype are compared)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            return func(*args, **kwargs)
        except RuntimeError as error:
            dtype = kwargs.get("dtype") or torch.get_default_dtype()
            if "overflow" not in str(error) or not dtype.is_floating_point:
                raise
            try:
                return func(*args, **(kwargs | {"dtype": torch.float8_e4m3fn}))
            except Exception:  # not a factory function taking a dtype: the first error stands
                raise error from None


def meta_model(build: Callable[[], nn.Module], where: str | Path) -> nn.Module:
    """The model `build()` makes, laid out on the `meta` device: every tensor's shape and dtype,
    no memory. A config too large even to lay out raises `CheckpointError` naming `where`."""
    try:
        with torch.device("meta"), _OneByteOnOverflow():
            return build()
    except (TypeError, ValueError) as error:  # e.g. an unknown or bad extra key
        raise CheckpointError(f"{where}: {error}") from None
    except RuntimeError as error:  # "Storage size calculation overflowed with sizes=[...]"
        detail = first_line(error)
        raise CheckpointError(f"{where}: describes a model too large to build ({detail})") from None


def check_weights_file(model: nn.Module, path: Path, stored: dict[str, StoredTensor] | None = None) -> None:
    """Check the safetensors header at `path` against `model`'s tensors (their names, shapes
    and kinds of dtype) without reading any tensor data; `model` may be on the meta device.

    Tied weights are stored once, under one of their names. Raises `CheckpointError` naming
    the first tensor that is unexpected, missing, or of another shape or dtype. `stored`: the
    header already read (`read_weights_header(path)`), or None to read it.
    """
    stored = read_weights_header(path) if stored is None else stored
    expected = model.state_dict(keep_vars=True)
    for name, tensor in stored.items():
        if name not in expected:
            raise CheckpointError(f"{path}: unexpected tensor {name!r} for this model config")
        want = expected[name]
        if tensor.shape != tuple(want.shape):
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {tensor.shape} but the config expects {tuple(want.shape)}"
            )
        if tensor.is_floating_point != want.is_floating_point():
            raise CheckpointError(
                f"{path}: tensor {name!r} is stored as {tensor.dtype} but the model expects {want.dtype}"
            )
    stored_objects = {id(expected[name]) for name in stored}
    for name, tensor in expected.items():  # a tied weight counts as stored under any of its names
        if name not in stored and id(tensor) not in stored_objects:
            raise CheckpointError(f"{path}: tensor {name!r} is missing")


def check_unstored_buffers(model: nn.Module, path: Path, where: str | Path) -> None:
    """Refuse a config whose buffers that `path` does not store (the sinusoidal table of
    `max_len` x `d_model`) would take more memory than the weights file, and more than
    `UNSTORED_BUFFER_LIMIT`; `model` may be on the meta device."""
    stored = model.state_dict(keep_vars=True).keys()
    unstored = [(name, b) for name, b in model.named_buffers() if name not in stored]
    total = sum(b.numel() * b.element_size() for _, b in unstored)
    file_size = path.stat().st_size
    if total > max(file_size, UNSTORED_BUFFER_LIMIT):
        name, largest = max(unstored, key=lambda item: item[1].numel() * item[1].element_size())
        raise CheckpointError(
            f"{where}: buffers not stored with the weights (the largest: {name!r} of shape "
            f"{tuple(largest.shape)}) would take {_size(total)}, more than the {_size(file_size)} "
            f"of {path}: refusing to allocate them"
        )


def _size(num_bytes: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:,.1f} {unit}"
    return f"{num_bytes} bytes"


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
    from aiayn.model.config import FORMAT_VERSION

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / WEIGHTS_FILE, lambda tmp: save_model(model, str(tmp)))
    extra_json = getattr(model, "extra_json", None)
    data = {
        "format_version": FORMAT_VERSION,
        "model_type": model.model_type,
        **(extra_json() if extra_json is not None else {}),
        "config": {k: v for k, v in model.config.to_dict().items() if k != "format_version"},
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
    from aiayn.model.config import ModelConfig

    directory = Path(directory)
    data = read_model_json(directory)
    try:
        config = ModelConfig.from_dict(data["config"])
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{directory / CONFIG_FILE}: {error}") from None
    return ModelDirectory(directory, data, config, read_weights_header(directory / WEIGHTS_FILE))


Model = TypeVar("Model", bound=nn.Module)


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


def materialize(layout: Model, device: str | torch.device = "cpu") -> Model:
    """Give a meta-device `layout` real, uninitialised storage on `device`, keeping its tied
    parameters tied (`to_empty` makes one tensor per name) and recomputing the buffers that
    no weights file stores through their module's `reset_buffers()`; every stored tensor is
    left for the weights to fill."""
    tied: dict[int, list[str]] = {}
    for name, parameter in layout.named_parameters(remove_duplicate=False):
        tied.setdefault(id(parameter), []).append(name)
    stored = layout.state_dict(keep_vars=True).keys()
    owners = {name.rpartition(".")[0] for name, _ in layout.named_buffers() if name not in stored}
    layout.to_empty(device=device)
    for first, *others in tied.values():
        for name in others:
            owner, _, attribute = name.rpartition(".")
            setattr(layout.get_submodule(owner), attribute, layout.get_parameter(first))
    for owner in sorted(owners):
        module = layout.get_submodule(owner)
        if not hasattr(module, "reset_buffers"):
            raise TypeError(f"{type(module).__name__} has unstored buffers but no reset_buffers()")
        module.reset_buffers()
    return layout


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
