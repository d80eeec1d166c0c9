"""The runtime's linear layers against the reference `aiayn.paper` directly: a pre-packed model
gives the reference's log-probabilities up to float rounding, an int8 one stays within a bound
of them (its quantization), and each check fails on a reference one weight away."""

from __future__ import annotations

import pytest
import torch

from aiayn.data.batching import Batch
from aiayn.model import ModelConfig
from aiayn.runtime import accelerate
from aiayn.runtime.prepacked import prepacking_available
from paper.helpers import assert_equal_at_targets, engine_log_probs, perturb, random_batch, twins

needs_prepacking = pytest.mark.skipif(not prepacking_available(), reason="needs PyTorch's oneDNN linear ops")
# The largest |log p_int8 - log p_paper| allowed at a target position: twice what the tiny model's
# int8 layers measure (0.05); a reference whose FFN weights moved by 0.02 noise lies 0.38 away.
INT8_BOUND = 0.1


def reference_and_accelerated(quantize: str | None) -> tuple:
    torch.manual_seed(0)
    engine, reference = twins(ModelConfig.tiny(max_len=32, dropout=0.0, vocab_size=40))
    batch = random_batch(engine.config, seed=1, rows=5)
    with torch.no_grad():
        expected = reference.eval().log_probs(batch.src, batch.tgt_in)
        got = engine_log_probs(accelerate(engine.eval(), quantize=quantize), batch)
    return reference, batch, expected, got


@needs_prepacking
def test_prepacked_log_probs_equal_the_reference() -> None:
    reference, batch, expected, got = reference_and_accelerated(None)
    assert_equal_at_targets(expected, got, batch)
    perturb(reference)
    with torch.no_grad(), pytest.raises(AssertionError):
        assert_equal_at_targets(reference.log_probs(batch.src, batch.tgt_in), got, batch)


def int8_gap(expected: torch.Tensor, got: torch.Tensor, batch: Batch) -> float:
    real = batch.labels != batch.pad_id
    return float((got[real] - expected[real]).abs().max())


@needs_prepacking
def test_int8_log_probs_stay_within_a_bound_of_the_reference() -> None:
    reference, batch, expected, got = reference_and_accelerated("int8")
    gap = int8_gap(expected, got, batch)
    assert 0 < gap <= INT8_BOUND  # an approximation: not equal, but close
    with torch.no_grad():
        weight = reference.decoder.layers[-1].feed_forward.linear2.weight
        weight += 0.02 * torch.randn(weight.shape, generator=torch.Generator().manual_seed(0))
        assert int8_gap(reference.log_probs(batch.src, batch.tgt_in), got, batch) > INT8_BOUND
