"""Device and precision selection.

`precision='auto'` uses bf16 autocast where the hardware runs bf16 fast (CUDA GPUs with
bf16 support, and CPUs with AVX-512 BF16 or AMX), fp32 otherwise. Weights and optimizer
state stay fp32 ("master weights"); only the matmuls run in bf16.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch


def select_device(name: str = "auto") -> torch.device:
    """'auto' -> CUDA when available, else CPU; otherwise `torch.device(name)`."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        from aiayn.errors import ConfigError

        raise ConfigError(f"device {name!r} requested but CUDA is not available")
    return device


def cpu_has_fast_bf16() -> bool:
    """True when /proc/cpuinfo lists AVX-512 BF16 or AMX-BF16."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto' -> 'bf16' or 'fp32' for `device`; 'fp32'/'bf16' pass through."""
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if device.type == "cpu" and cpu_has_fast_bf16() else "fp32"


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast context for 'bf16', a no-op for 'fp32'."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
