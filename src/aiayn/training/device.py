"""Device and precision selection.

Precision 'bf16' runs the matmuls under bf16 autocast; weights and optimizer state stay fp32
("master weights"). `precision='auto'` is decided by measurement when training starts
(`aiayn.training.precision`): bf16 is timed against fp32 only where the hardware has bf16
instructions at all (`bf16_worth_measuring`); until then, and everywhere else, 'auto' is fp32.
"""

from __future__ import annotations

import contextlib

import torch

from aiayn.runtime.cpu import cpu_flags


def select_device(name: str = "auto") -> torch.device:
    """'auto' -> CUDA when available, else CPU; otherwise `torch.device(name)`."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        from aiayn.core.errors import ConfigError

        raise ConfigError(f"device {name!r} requested but CUDA is not available")
    return device


# /proc/cpuinfo flags of bf16 arithmetic: x86 AVX-512 BF16, AMX, AVX-NE-CONVERT; Arm's BF16.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "avx_ne_convert", "bf16"})


def cpu_has_bf16_instructions() -> bool:
    """True when /proc/cpuinfo lists a bf16 instruction set (see `BF16_CPU_FLAGS`).

    Without one, bf16 autocast is emulated and never faster than fp32. With one it may still
    be slower (on some AVX-512 BF16 Xeons our training step is), which is why 'auto' measures
    instead of trusting this.
    """
    return not BF16_CPU_FLAGS.isdisjoint(cpu_flags())


def bf16_worth_measuring(device: torch.device) -> bool:
    """Whether bf16 autocast could beat fp32 on `device`: a CUDA GPU with bf16 support, or a
    CPU with bf16 instructions."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_bf16_instructions()


def resolve_precision(precision: str, device: torch.device) -> str:
    """A precision set by hand passes through; 'auto' is 'fp32' until `aiayn.training.precision`
    measures."""
    return "fp32" if precision == "auto" else precision


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
"""Precisions that run the forward pass under autocast, and its dtype ('fp32' and 'tf32' keep
fp32 tensors; 'tf32' changes how CUDA multiplies them: `aiayn.training.precision.precision_context`)."""


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Autocast context for 'bf16' and 'fp16', a no-op for 'fp32' and 'tf32'."""
    if precision in AUTOCAST_DTYPES:
        return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[precision])
    return contextlib.nullcontext()
