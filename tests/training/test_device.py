"""Device and precision selection: the CUDA path chosen and guarded without a GPU present."""

from __future__ import annotations

import contextlib

import pytest
import torch

from aiayn.core.errors import ConfigError
from aiayn.training import device as device_module
from aiayn.training.device import autocast, resolve_precision, select_device


def test_auto_falls_back_to_cpu_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert select_device("auto") == torch.device("cpu")


def test_auto_picks_cuda_when_present(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert select_device("auto") == torch.device("cuda")


def test_explicit_cuda_without_a_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="'cuda:1' requested but CUDA is not available"):
        select_device("cuda:1")


@pytest.mark.parametrize("bf16_supported", [True, False])
def test_bf16_is_measured_on_cuda_only_where_supported(monkeypatch, bf16_supported):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: bf16_supported)
    assert device_module.bf16_worth_measuring(torch.device("cuda")) == bf16_supported


def test_auto_precision_is_fp32_until_measured():
    # `aiayn.training.precision` decides 'auto' by timing; before that (and for callers that
    # never train, e.g. benchmarks driving `train_step`) it means fp32.
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert resolve_precision("bf16", torch.device("cpu")) == "bf16"
    assert resolve_precision("fp32", torch.device("cpu")) == "fp32"


def test_autocast_is_bf16_only_when_asked():
    assert isinstance(autocast("fp32", torch.device("cpu")), contextlib.nullcontext)
    with autocast("bf16", torch.device("cpu")):
        out = torch.nn.functional.linear(torch.randn(2, 3), torch.randn(4, 3))
    assert out.dtype == torch.bfloat16


def test_non_blocking_batch_copy_to_cpu_does_not_pin():
    from aiayn.data.batching import make_batch
    from aiayn.data.special_tokens import TRAINED_SPECIALS

    batch = make_batch([[5, 6, 7]], [[8, 9]], specials=TRAINED_SPECIALS)
    moved = batch.to("cpu", non_blocking=True)  # pin_memory would need CUDA: not attempted
    assert torch.equal(moved.src, batch.src) and moved.num_targets == batch.num_targets
