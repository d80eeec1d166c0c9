"""Process memory settings for training (`aiayn.training.memory`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from aiayn.training import memory

# In a fresh process: malloc a 96 MiB block, touch it, free it, three times; print the page faults
# of the second and third rounds. glibc mmaps a block that size and unmaps it on free, so every
# round faults every page in again, unless the thresholds were raised; then only a round after
# `release_free_memory` does.
SECOND_ROUND_FAULTS = """
import ctypes, resource, sys
from aiayn.training.memory import release_free_memory, tune_malloc
made = tune_malloc() if sys.argv[1] == "tuned" else []
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size = 96 << 20
faults = []
for round_ in range(3):
    if round_ == 2 and made:
        release_free_memory()  # the block goes back to the system: the third round faults again
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(faults[1], faults[2], len(made))
"""


def round_faults(mode: str) -> tuple[int, int, int]:
    env_free = {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"}
    done = subprocess.run(
        [sys.executable, "-c", SECOND_ROUND_FAULTS, mode],
        capture_output=True, text=True, check=True,
        env={k: v for k, v in os.environ.items() if k not in env_free},
    )
    second, third, made = map(int, done.stdout.split())
    return second, third, made


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_tuned_malloc_reuses_a_freed_block_without_faulting_it_in_again():
    default_faults, _, _ = round_faults("default")
    tuned_faults, after_release_faults, made = round_faults("tuned")
    if made == 0:
        pytest.skip("not glibc")
    assert made == 2
    assert default_faults > 20_000  # 96 MiB of 4 KiB pages, mapped afresh
    assert tuned_faults < 1_000  # the heap kept the block
    assert after_release_faults > 20_000  # ...until release_free_memory gave it back


def test_onednn_caches_are_capped_unless_the_user_chose(monkeypatch):
    environ = {"LRU_CACHE_CAPACITY": "7"}  # the user chose this one
    monkeypatch.setattr(memory.os, "environ", environ)
    assert memory.cap_onednn_caches(32) == ["ONEDNN_PRIMITIVE_CACHE_CAPACITY=32"]
    assert environ == {"LRU_CACHE_CAPACITY": "7", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "32"}


def test_user_malloc_settings_are_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1000000")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000000")
    assert memory.tune_malloc() == []
