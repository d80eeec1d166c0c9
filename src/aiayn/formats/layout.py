"""Checking a model directory before anything is allocated: the model its config describes,
laid out on the `meta` device (shapes and dtypes, no memory), against the safetensors header
(names, shapes, dtypes; no tensor data read); then `materialize`, real storage for a layout that
agreed.

Not a paper module: it keeps broken or hostile files away from the model (`aiayn.model`). A
`config.json` with `d_model: 1000000000` is a one-line error rather than a 252 GB allocation;
buffers the weights file does not store (the sinusoidal table) may not take more memory than the
weights file itself, or `UNSTORED_BUFFER_LIMIT`, whichever is larger.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from safetensors import SafetensorError, safe_open
from torch import nn
from torch.overrides import TorchFunctionMode

from aiayn.core.errors import CheckpointError, first_line

UNSTORED_BUFFER_LIMIT = 256 * 2**20
"""Bytes of buffers not stored in the weights file that a model directory may always imply."""

Model = TypeVar("Model", bound=nn.Module)


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
