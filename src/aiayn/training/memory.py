"""Process memory settings for training on a CPU: flat resident memory, no page-fault storm.

A training step allocates and frees the same few hundred megabytes every step, in sizes that
change with every batch. Two things then go wrong with the defaults (benchmarks/RESULTS.md has
the measurements, on the Multi30k recipe):

1. glibc's malloc serves blocks above its mmap threshold (adaptive, at most 32 MiB) with a
   fresh `mmap` and gives them back with `munmap`, and trims the heap's free top above 128 KiB:
   every step faults its working set back in, page by page, each page zeroed by the kernel, and
   that shows as system CPU time. `tune_malloc` raises both thresholds (`mallopt`), so the
   blocks stay in the heap and are reused from step to step. (A heap that is never trimmed
   holds its high-water mark: what keeps that low is a step whose largest tensors stay small
   and alike from batch to batch, `aiayn.training.loss.projected_label_smoothed_nll`.)
2. bf16 matmuls on a CPU go through oneDNN, whose primitive caches (oneDNN's own and PyTorch's
   ideep layer's, 1,024 entries each) keep one compiled primitive per matmul shape. With
   batches of ever-different token counts the caches fill with shapes never seen again, and
   the resident memory grows by the gigabyte before they are full. `cap_onednn_caches` caps
   both, high enough for every shape of a fixed-shape model (the variables are read when the
   first primitive is made, so setting them at start-up works); making a primitive again costs
   little beside a matmul of a training step.

`tune_for_training` does both; `aiayn.training.run.run_task` calls it before any data or model
exists, and `release_free_memory` once training is over: the heap's free pages go back to the
system and the thresholds come down near glibc's own, before the final evaluation (beam search,
whose caches grow step by step) makes its own, differently shaped demands.
Variables the user set already (ONEDNN_PRIMITIVE_CACHE_CAPACITY, LRU_CACHE_CAPACITY,
MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) are left alone; so are C libraries other than
glibc (musl, macOS).

Before a model is built, `check_training_fits` refuses one whose weights, gradients and Adam
moments alone exceed the memory available, with an error naming the model settings, rather than
letting the process swap or be killed halfway through allocating it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from aiayn.core.errors import ConfigError

log = logging.getLogger(__name__)

# mallopt(3) parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD_BYTES = 1 << 30  # blocks up to 1 GiB come from the heap and are reused
TRIM_THRESHOLD_BYTES = 1 << 30  # the heap's free top is given back only above 1 GiB
AFTER_TRAINING_MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's own ceiling for its adaptive threshold
ONEDNN_CACHE_CAPACITY = 64  # primitives per cache: every shape of a fixed-shape model fits


def tune_malloc(
    mmap_threshold: int = MMAP_THRESHOLD_BYTES, trim_threshold: int = TRIM_THRESHOLD_BYTES
) -> list[str]:
    """Raise glibc's mmap and trim thresholds; returns the settings made (none off glibc, or
    where the user set MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ themselves)."""
    libc = _glibc()
    if libc is None:
        return []
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    made = []
    for param, value, variable in (
        (M_MMAP_THRESHOLD, mmap_threshold, "MALLOC_MMAP_THRESHOLD_"),
        (M_TRIM_THRESHOLD, trim_threshold, "MALLOC_TRIM_THRESHOLD_"),
    ):
        if variable not in os.environ and mallopt(param, value) == 1:
            made.append(f"{variable.lower().strip('_').removeprefix('malloc_')}={value >> 20} MiB")
    return made


def cap_onednn_caches(capacity: int = ONEDNN_CACHE_CAPACITY) -> list[str]:
    """Cap oneDNN's primitive cache and ideep's (PyTorch's oneDNN layer) at `capacity` entries,
    unless the user set ONEDNN_PRIMITIVE_CACHE_CAPACITY / LRU_CACHE_CAPACITY; returns the caps made."""
    made = []
    for variable in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
        if variable not in os.environ:
            os.environ[variable] = str(capacity)
            made.append(f"{variable}={capacity}")
    return made


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc, else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it)
    except (OSError, AttributeError, TypeError):
        return None
    return libc


def release_free_memory() -> bool:
    """Once training is over: back to thresholds near glibc's own (blocks over 32 MiB mapped
    apart, a free top over 64 MiB trimmed), and the free pages of the heaps given back to the
    system (`malloc_trim(0)`). Whether that was done (False off glibc)."""
    libc = _glibc()
    if libc is None:
        return False
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        libc.mallopt(M_MMAP_THRESHOLD, AFTER_TRAINING_MMAP_THRESHOLD_BYTES)
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        libc.mallopt(M_TRIM_THRESHOLD, 2 * AFTER_TRAINING_MMAP_THRESHOLD_BYTES)
    libc.malloc_trim(0)
    return True


def tune_for_training() -> None:
    """`tune_malloc` and `cap_onednn_caches`, logged."""
    made = tune_malloc() + cap_onednn_caches()
    if made:
        log.info("memory: %s (see aiayn.training.memory)", ", ".join(made))


def training_state_bytes(model: nn.Module) -> int:
    """The least memory training `model` with Adam takes: weights, gradients and the optimizer's
    two moments, four copies of the parameters (activations come on top). `model` may be on the
    meta device; shared (tied) parameters count once."""
    return 4 * sum(p.numel() * p.element_size() for p in model.parameters())


def available_bytes(device: torch.device) -> int | None:
    """Memory free for a new process's tensors on `device`: a CUDA device's free memory, or on a
    CPU the kernel's MemAvailable, lowered to what the process's cgroup (a container's limit) has
    left. None when it cannot be told."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    try:
        meminfo = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in meminfo.splitlines() if ":" in line)
    if "MemAvailable" not in fields:
        return None
    available = int(fields["MemAvailable"].split()[0]) * 1024
    try:  # cgroup v2: the limit and the usage of this process's group
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            available = min(available, int(limit) - used)
    except (OSError, ValueError):
        pass
    return available


def check_training_fits(
    layout: nn.Module,
    device: torch.device,
    where: str,
    available: Callable[[torch.device], int | None] = available_bytes,
) -> None:
    """Raise `ConfigError` naming `where` (the model settings) when `layout` (the model laid out
    on the meta device) cannot be trained on `device`: its `training_state_bytes` exceed the
    `available` memory. Does nothing when the available memory cannot be told."""
    have = available(device)
    need = training_state_bytes(layout)
    if have is None or need <= have:
        return
    params = sum(p.numel() for p in layout.parameters())
    raise ConfigError(
        f"{where}: a model of {params:,} parameters needs at least {need / 1e9:.1f} GB on {device} "
        f"for its weights, gradients and Adam's two moments, but {max(have, 0) / 1e9:.1f} GB is "
        "available; choose a smaller model.preset or a smaller model.d_model, model.d_ff or "
        "number of layers"
    )


class MemoryFit(NamedTuple):
    """What a batch's fit in a GPU's memory is computed from (`auto_rules.batches_that_fit`)."""

    free_bytes: float  # free on the device with the model on it
    fixed_bytes: float  # what training adds whatever the batch: gradients and Adam's two moments
    bytes_per_token: float  # activations (and the step's temporaries) per padded token of a batch


def cuda_memory_probe(
    build_model: Callable[[], nn.Module], batch: Any, batch_tokens: int,
    loss_fn: Callable[..., tuple[torch.Tensor, int]], label_smoothing: float, device: torch.device,
) -> MemoryFit:
    """One fp32 training step (forward and backward, the largest activations of any precision) of
    a fresh model on `batch`, drawn with `batch_tokens` padded tokens at most, on a CUDA `device`:
    the memory it peaked at above the model's weights, per padded token."""
    model = build_model().to(device)
    try:
        torch.cuda.synchronize(device)
        free, _total = torch.cuda.mem_get_info(device)
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        with torch.random.fork_rng(devices=[device]):
            loss, _ = loss_fn(model, batch.to(device), label_smoothing)
            loss.backward()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
    finally:
        del model
        torch.cuda.empty_cache()
    per_token = max(0.0, peak - weights) / max(batch_tokens, 1)  # the gradients are counted as fixed
    return MemoryFit(float(free), 3.0 * weights, per_token)
