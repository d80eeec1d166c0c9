"""The model's passes never read a tensor on the host (no device synchronisation).

Inputs are checked where data enters aiayn, not in `forward`/`encode`/`decode` (issue 24):
with `Tensor.item`, `__bool__`, `__int__` and `tolist` made to fail, every pass still runs.
The packed training pass (`output_mask`) is the one documented exception
(`aiayn.model.packing`) and is left out. On CUDA the same passes run under
`torch.cuda.set_sync_debug_mode("error")`, which catches any other synchronisation too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch
from torch import Tensor

from .helpers import build, pad_to_lengths, random_tokens

HOST_READS = ("item", "__bool__", "__int__", "tolist")


@contextlib.contextmanager
def host_reads_fail(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(self: Tensor, *args, **kwargs):
        raise AssertionError("the model read a tensor on the host")

    with monkeypatch.context() as patch:
        for name in HOST_READS:
            patch.setattr(Tensor, name, refuse)
        yield


def models_and_inputs(device: str) -> tuple:
    """The three models and a padded (src, tgt_in) batch, on `device`."""
    models = tuple(build(kind).to(device) for kind in ("transformer", "lm", "encoder"))
    src = pad_to_lengths(random_tokens(2, 7, seed=1), [7, 4]).to(device)
    tgt_in = pad_to_lengths(random_tokens(2, 5, seed=2), [5, 3]).to(device)
    return (*models, src, tgt_in)


def run_every_pass(transformer, lm, encoder, src: Tensor, tgt_in: Tensor, backward: bool = True) -> None:
    """Transformer forward / encode / decode with a cache, DecoderOnlyLM and EncoderOnly; with
    `backward`, also a padded training pass with gradients."""
    with torch.no_grad():
        transformer(src, tgt_in)
        transformer(src, tgt_in, return_hidden=True)
        memory = transformer.encode(src)
        transformer.decode(tgt_in, memory, src != 0)  # the whole target at once
        cache = transformer.new_cache()
        step = tgt_in[:, :1]
        for _ in range(4):  # step by step with the key/value cache
            logits = transformer.decode(step, memory, src != 0, cache=cache)
            step = logits[:, -1].argmax(-1, keepdim=True)
        lm(tgt_in)
        lm_cache = lm.new_cache()
        lm(tgt_in, cache=lm_cache)
        lm(tgt_in[:, :1], cache=lm_cache)
        encoder(src)
    if backward:
        transformer.train()
        transformer(src, tgt_in).sum().backward()
        transformer.eval()


def test_no_pass_reads_a_tensor_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    arguments = models_and_inputs("cpu")
    with host_reads_fail(monkeypatch):
        run_every_pass(*arguments)


def test_the_patch_would_catch_a_host_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above would fail if a pass read a tensor: the packed pass does, on purpose."""
    model = build("transformer")
    src = pad_to_lengths(random_tokens(2, 6, seed=1), [6, 3])
    with host_reads_fail(monkeypatch), pytest.raises(AssertionError, match="on the host"):
        model(src, src, output_mask=src != 0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_no_pass_synchronises_cuda() -> None:
    arguments = models_and_inputs("cuda")  # copies to the device synchronise: before the check
    run_every_pass(*arguments, backward=False)  # warm-up: lazy initialisation may synchronise
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:  # no backward pass: PyTorch's own CUDA embedding backward reads a count on the host
        run_every_pass(*arguments, backward=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")
