"""What the processor is and can do, read once from /proc/cpuinfo.

One reader for everything that asks (results and model cards name the processor, the int8
kernel and bf16 training pick by instruction set, the benchmarks record both). Where the file
is missing (not Linux) the name falls back to `platform` and the flag set is empty.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class CpuInfo:
    """The first processor's entry: its name, vendor, family/model numbers and feature flags."""

    model: str
    vendor: str | None = None
    family: str | None = None
    model_number: str | None = None
    flags: frozenset[str] = frozenset()


def parse_cpuinfo(text: str) -> CpuInfo:
    """The first entry of /proc/cpuinfo's `text` (x86 'flags' or Arm 'Features')."""
    fields = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in text.strip().split("\n\n")[0].splitlines())
    )
    return CpuInfo(
        model=fields.get("model name") or platform.processor() or platform.machine(),
        vendor=fields.get("vendor_id"),
        family=fields.get("cpu family"),
        model_number=fields.get("model"),
        flags=frozenset((fields.get("flags") or fields.get("Features") or "").split()),
    )


@functools.cache
def cpu_info() -> CpuInfo:
    """This machine's `CpuInfo`, read on the first call."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        text = ""
    return parse_cpuinfo(text)


def cpu_model() -> str:
    """The processor's name (for results.json, the model card and the benchmarks)."""
    return cpu_info().model


def cpu_flags() -> frozenset[str]:
    """The processor's feature flags (empty where unknown)."""
    return cpu_info().flags
