"""Process memory settings for training (`aiayn.training.memory`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from aiayn.core.errors import ConfigError
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


def test_training_state_is_four_copies_of_the_parameters_tied_counted_once():
    from aiayn.model import ModelConfig, Transformer

    config = ModelConfig(src_vocab_size=50, tgt_vocab_size=50, d_model=16, num_heads=2, d_ff=32,
                         num_encoder_layers=1, num_decoder_layers=1, max_len=20)
    with torch.device("meta"):
        layout = Transformer(config)
    unique = {id(p): p for p in layout.parameters()}
    assert memory.training_state_bytes(layout) == 4 * 4 * sum(p.numel() for p in unique.values())


def test_a_model_too_large_for_the_memory_is_refused_before_it_is_built():
    layout = torch.nn.Linear(1000, 1000, device="meta")  # 1,001,000 parameters, 16.0 MB to train
    cpu = torch.device("cpu")
    memory.check_training_fits(layout, cpu, "model.d_model=1000", available=lambda device: 17_000_000)
    memory.check_training_fits(layout, cpu, "model.d_model=1000", available=lambda device: None)
    with pytest.raises(ConfigError, match=r"model.d_model=1000: a model of 1,001,000 parameters needs"):
        memory.check_training_fits(layout, cpu, "model.d_model=1000", available=lambda device: 15_000_000)


def test_available_memory_on_this_machine_is_read():
    available = memory.available_bytes(torch.device("cpu"))
    if available is None:
        pytest.skip("no /proc/meminfo")
    assert 0 < available < 1 << 50


def test_train_refuses_a_huge_model_with_the_settings_named(tmp_path, capsys):
    from aiayn.cli.main import main

    # d_model 65,536: ~100 GB of weights, gradients and moments; nothing may be allocated.
    code = main(["train", "--out", str(tmp_path / "run"), "--set", "train.max_steps=1",
                 "--set", "data.num_train=50", "--set", "data.num_valid=10",
                 "--set", "model.preset=tiny", "--set", "model.d_model=65536"])
    assert code == 2
    error = capsys.readouterr().err
    assert "model.preset=tiny, model.d_model=65536" in error
    assert "parameters needs at least" in error and "GB is available" in error
