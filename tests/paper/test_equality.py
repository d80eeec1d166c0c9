"""`aiayn.paper` computes what the engine computes: log-probabilities, greedy outputs, gradients.

Each comparison has a negative control: one weight of the paper model changed a little, and
the same check must fail.
"""

from __future__ import annotations

import pytest
import torch

from aiayn import paper
from aiayn.data.batching import make_batch
from aiayn.data.special_tokens import SpecialTokens
from aiayn.decoding.greedy import greedy_search
from aiayn.formats import load_model
from aiayn.inference.torch_translator import pad_batch
from aiayn.model import ModelConfig
from aiayn.training.loss import translation_loss
from shared_dates import splits

from .helpers import assert_equal_at_targets, engine_log_probs, perturb, random_batch, twins

RANDOM_CONFIGS = {
    "sinusoidal-tied-shared": dict(vocab_size=40),
    "learned-untied": dict(src_vocab_size=37, tgt_vocab_size=41, tie_output=False, positional="learned"),
    "tied-not-shared-ids-moved": dict(src_vocab_size=45, tgt_vocab_size=43, pad_id=42, bos_id=7, eos_id=11,
                                      unk_id=None, num_heads=4, num_encoder_layers=3, num_decoder_layers=1),
    "head-dim-not-d-model-over-h": dict(vocab_size=40, num_heads=3, head_dim=8),
}  # fmt: skip


def tiny(overrides: dict) -> ModelConfig:
    return ModelConfig.tiny(max_len=32, dropout=0.0, **overrides)


@pytest.mark.parametrize("name", RANDOM_CONFIGS)
def test_log_probs_equal_on_random_configs(name: str) -> None:
    torch.manual_seed(len(name))
    engine, reference = twins(tiny(RANDOM_CONFIGS[name]))
    batch = random_batch(engine.config, seed=len(name), rows=5)
    with torch.no_grad():
        expected = engine_log_probs(engine.eval(), batch)
        assert_equal_at_targets(expected, reference.eval().log_probs(batch.src, batch.tgt_in), batch)
        perturb(reference)
        with pytest.raises(AssertionError):
            assert_equal_at_targets(expected, reference.log_probs(batch.src, batch.tgt_in), batch)


def gradient_ratios(config: ModelConfig, *, perturbed: bool) -> dict[str, float]:
    """||g_paper - g_engine|| / ||g_engine|| per engine parameter after one loss.backward()
    from the same weights and batch (the engine's own training loss, packed pass)."""
    torch.manual_seed(3)
    engine, reference = twins(config)
    if perturbed:
        perturb(reference)
    batch = random_batch(config, seed=5, rows=6)
    loss, _ = translation_loss(engine.train(), batch, 0.1)
    loss.backward()
    log_probs = reference.train().log_probs(batch.src, batch.tgt_in)
    paper.label_smoothed_loss(log_probs, batch.labels, 0.1, batch.pad_id).backward()
    grads = paper.engine_state_dict({n: p.grad for n, p in reference.named_parameters()})
    ratios = {}
    for name, parameter in engine.named_parameters():
        ratios[name] = float((grads[name] - parameter.grad).norm() / parameter.grad.norm())
    return ratios


@pytest.mark.parametrize("name", RANDOM_CONFIGS)
def test_gradients_equal_after_one_step(name: str) -> None:
    config = tiny(RANDOM_CONFIGS[name])
    ratios = gradient_ratios(config, perturbed=False)
    assert len(ratios) > 10
    assert max(ratios.values()) <= 1e-5, {n: r for n, r in ratios.items() if r > 1e-5}
    assert max(gradient_ratios(config, perturbed=True).values()) > 1e-5


# ---------------------------------------------------------------------------- the trained model


def test_dates_model_log_probs_and_greedy_outputs_equal(dates_run) -> None:
    engine = load_model(dates_run).eval()
    reference, tokenizers = paper.load(dates_run)
    assert (reference.pad_id, reference.bos_id) != (0, 1)  # the fixture's moved ids
    held_out = splits()["test"][:200]
    sources = tokenizers.source.encode_batch([s for s, _ in held_out])
    targets = tokenizers.target.encode_batch([t for _, t in held_out])
    prefixes = [ids[: 3 + i % 8] for i, ids in enumerate(targets[:48])]  # dates are all 10 characters
    batch = make_batch(sources[:48], prefixes, specials=SpecialTokens.of(engine.config))
    with torch.no_grad():
        expected = engine_log_probs(engine, batch)
        assert_equal_at_targets(expected, reference.log_probs(batch.src, batch.tgt_in), batch)

    src = pad_batch([[*ids, reference.eos_id] for ids in sources], reference.pad_id, "cpu")
    engine_outputs = greedy_search(engine, src).tokens
    paper_outputs = paper.greedy_decode(reference, src)
    assert len(paper_outputs) == 200
    assert paper_outputs == engine_outputs
    assert sum(out == ref for out, ref in zip(tokenizers.target.decode_batch(paper_outputs),
                                               [t for _, t in held_out], strict=True)) >= 190

    perturb(reference)
    with torch.no_grad(), pytest.raises(AssertionError):
        assert_equal_at_targets(expected, reference.log_probs(batch.src, batch.tgt_in), batch)
    with torch.no_grad():
        reference.decoder.layers[-1].feed_forward.linear2.bias += 0.5 * torch.randn(
            reference.d_model, generator=torch.Generator().manual_seed(0))
    assert paper.greedy_decode(reference, src) != engine_outputs
