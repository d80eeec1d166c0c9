"""Ensemble decoding (`aiayn.inference.ensemble`, `aiayn.load([A, B])`): one model alone is that
model, a model twice is that model, two models give the log of their mean probability at every
step, the decoding controls and accelerations apply to the ensemble, and models that cannot be
combined are refused with one line."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import aiayn
from aiayn.core.errors import AiaynError
from aiayn.inference import TorchTranslator
from aiayn.inference.ensemble import Ensemble, mean_probability
from aiayn.inference.torch_translator import cross_attention
from aiayn.runtime.compiled import compiler_available
from decoding.conftest import SOURCES, TARGETS

from .ensemble_dirs import REFUSALS, perturbed_copy

TEXTS = [s for s in SOURCES if s]


def texts_and_scores(nbests):
    return [[h.text for h in hyps] for hyps in nbests], [[h.score for h in hyps] for hyps in nbests]


def assert_same_nbest(ours, theirs, tolerance: float = 1e-5) -> None:
    our_texts, our_scores = texts_and_scores(ours)
    their_texts, their_scores = texts_and_scores(theirs)
    assert our_texts == their_texts
    for mine, reference in zip(our_scores, their_scores, strict=True):
        assert mine == pytest.approx(reference, abs=tolerance)


@pytest.mark.parametrize("beam", [4, 1])
def test_one_model_is_that_model(ensemble_dirs, beam):
    """`load([A])` is `load(A)`; an `Ensemble` of A alone finds A's outputs and scores."""
    alone = aiayn.load(ensemble_dirs.a, "cpu")
    listed = aiayn.load([ensemble_dirs.a], "cpu")
    assert type(listed.model) is type(alone.model)
    wrapped = TorchTranslator(Ensemble([alone.model]), alone.tokenizers)
    nbest = min(beam, 3)
    expected = alone.translate_nbest(TEXTS, nbest, beam=beam)
    assert_same_nbest(listed.translate_nbest(TEXTS, nbest, beam=beam), expected, 0.0)
    assert_same_nbest(wrapped.translate_nbest(TEXTS, nbest, beam=beam), expected)


@pytest.mark.parametrize("beam", [4, 1])
def test_a_model_twice_is_that_model(ensemble_dirs, beam):
    """[A, A]: A's n-best lists, scores, per-token scores, forced-decoding scores, alignments."""
    alone = aiayn.load(ensemble_dirs.a, "cpu")
    twice = aiayn.load([ensemble_dirs.a, ensemble_dirs.a], "cpu")
    assert isinstance(twice.model, Ensemble) and len(twice.model.models) == 2
    nbest = min(beam, 3)
    settings = dict(beam=beam, token_scores=True, alignments=True)
    ours = twice.translate_nbest(TEXTS, nbest, **settings)
    theirs = alone.translate_nbest(TEXTS, nbest, **settings)
    assert_same_nbest(ours, theirs)
    for mine, reference in zip(ours, theirs, strict=True):
        for h, g in zip(mine, reference, strict=True):
            assert h.token_scores == pytest.approx(g.token_scores, abs=1e-5)
            assert h.alignment == g.alignment
    sources, targets = [s for s in SOURCES if s], [t for t in TARGETS if t]
    assert twice.score(sources, targets) == pytest.approx(alone.score(sources, targets), abs=1e-4)


def step_by_step(ensemble: Ensemble, src: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """(T, V) the ensemble's next-token log-probabilities after <bos> + each prefix of `tokens`
    (within max_len), through its incremental `step` (what the searches call), for one
    (1, S) source."""
    config = ensemble.config
    memory, cache = ensemble.encode(src), ensemble.new_cache()
    steps = []
    with torch.no_grad():
        for token in [config.bos_id, *tokens][: config.max_len]:
            last = torch.tensor([[token]])
            steps.append(ensemble.step(last, memory, None, cache)[0])
    return torch.stack(steps)


def alone_log_probs(model, src: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """(T, V) one model's log-probabilities, teacher-forced on <bos> + `tokens` in one full pass."""
    tgt_in = torch.tensor([[model.config.bos_id, *tokens][: model.config.max_len]])
    with torch.no_grad():
        return F.log_softmax(model(src, tgt_in)[0].float(), dim=-1)


def check_log_mean_probability(first_dir, second_dir, texts: list[str]) -> None:
    """Teacher-forced on the ensemble's own outputs, every step's ensemble log-probabilities (the
    whole distribution, through the incremental step) are logsumexp(log p_A, log p_B) - log 2 of
    A and B run separately (full passes), within 1e-5; and they are not the mean of the
    log-probabilities. The ensemble's token scores and beam scores are those values."""
    ensemble = aiayn.load([first_dir, second_dir], "cpu")
    first, second = aiayn.load(first_dir, "cpu"), aiayn.load(second_dir, "cpu")
    outputs = ensemble.translate_nbest(texts, 2, beam=4, alpha=0.0, token_scores=True)
    geometric_gap = 0.0
    for text, hyps in zip(texts, outputs, strict=True):
        src_ids = [*ensemble.tokenizers.source.encode(text), ensemble.config.eos_id]
        src = torch.tensor([src_ids])
        for hyp in hyps:
            tokens = hyp.tokens
            ours = step_by_step(ensemble.model, src, tokens)  # (T, V)
            log_a = alone_log_probs(first.model, src, tokens)
            log_b = alone_log_probs(second.model, src, tokens)
            expected = torch.logsumexp(torch.stack([log_a, log_b]), dim=0) - math.log(2)
            torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)
            geometric_gap = max(geometric_gap, float((ours - (log_a + log_b) / 2).abs().max()))
            gold = torch.tensor([*tokens, ensemble.config.eos_id])[: ours.size(0)]
            chosen = expected.gather(1, gold[:, None]).squeeze(1)  # (T,)
            assert hyp.token_scores == pytest.approx(chosen.tolist(), abs=1e-5)
            assert hyp.score == pytest.approx(float(chosen.sum()), abs=1e-4)  # alpha 0: log P(Y | X)
    assert geometric_gap > 1e-2  # the two models differ: a mean of log-probabilities would fail


def test_two_models_give_the_log_of_their_mean_probability(ensemble_dirs):
    check_log_mean_probability(ensemble_dirs.a, ensemble_dirs.b, TEXTS)


@pytest.mark.slow  # the shared dates run trains a model (a minute or two)
def test_two_trained_models_give_the_log_of_their_mean_probability(dates_run, tmp_path):
    """The trained dates model and a copy with noise on every weight (the same vocabulary): two
    different trained models."""
    from shared_dates import splits

    other = perturbed_copy(dates_run, tmp_path / "other", scale=0.1)
    check_log_mean_probability(dates_run, other, [source for source, _ in splits()["test"][:12]])


def test_the_ensemble_stays_in_eval_mode_after_a_search(ensemble_dirs):
    """The searches give a model back in the mode they found it in: an ensemble of loaded models
    is in eval mode, so its models are still in eval mode (no dropout) after decoding."""
    translator = aiayn.load([ensemble_dirs.a, ensemble_dirs.b], "cpu")
    assert not any(module.training for module in translator.model.modules())
    translator.translate(TEXTS, beam=4)
    translator.translate(TEXTS, beam=1)
    assert not any(module.training for module in translator.model.modules())
    training = Ensemble([translator.model.models[0].train()])
    assert training.training and training.models[0].training


def test_mean_probability_is_log_of_mean():
    first, second = torch.log_softmax(torch.randn(3, 7), -1), torch.log_softmax(torch.randn(3, 7), -1)
    expected = torch.log((first.exp() + second.exp()) / 2)
    torch.testing.assert_close(mean_probability([first, second]), expected)


# ------------------------------------------------------------------ controls and accelerations
CONTROLS = {
    "prefix": dict(prefix="a"),
    "sample": dict(sample=True, seed=3, top_k=5, top_p=0.9, temperature=0.8),
    "no_repeat_ngram_size": dict(no_repeat_ngram_size=2),
    "max_output_ratio": dict(max_output_ratio=1.5),
}


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_controls_act_on_the_ensemble_distribution(ensemble_dirs, name):
    """[A, A] under each control gives A's outputs under it (the ensemble distribution is A's);
    the control changes what [A, B] outputs."""
    controls = CONTROLS[name]
    beam = 1 if "sample" in controls else 4
    alone = aiayn.load(ensemble_dirs.a, "cpu")
    twice = aiayn.load([ensemble_dirs.a, ensemble_dirs.a], "cpu")
    both = aiayn.load([ensemble_dirs.a, ensemble_dirs.b], "cpu")
    assert twice.translate(TEXTS, beam=beam, **controls) == alone.translate(TEXTS, beam=beam, **controls)
    assert both.translate(TEXTS, beam=beam, **controls) != both.translate(TEXTS, beam=beam)


def test_repetition_penalty_acts_on_the_ensemble_log_probabilities(ensemble_dirs):
    """The penalty treats the ensemble's log-probabilities as its logits: [A, A] with a penalty
    is an ensemble of A alone with it (the same distribution), and the penalty changes outputs."""
    alone = aiayn.load(ensemble_dirs.a, "cpu")
    one = TorchTranslator(Ensemble([alone.model]), alone.tokenizers)
    twice = aiayn.load([ensemble_dirs.a, ensemble_dirs.a], "cpu")
    for beam in (4, 1):
        penalized = twice.translate(TEXTS, beam=beam, repetition_penalty=1.5)
        assert penalized == one.translate(TEXTS, beam=beam, repetition_penalty=1.5)
        assert penalized != twice.translate(TEXTS, beam=beam)


def test_int8_quantizes_every_model(ensemble_dirs):
    from aiayn.runtime.int8 import Int8Linear

    quantized = aiayn.load([ensemble_dirs.a, ensemble_dirs.a], "cpu", quantize="int8")
    for runner in quantized.model.runners:
        assert any(isinstance(m, Int8Linear) for m in runner.network.modules())
    alone = aiayn.load(ensemble_dirs.a, "cpu", quantize="int8")
    assert_same_nbest(quantized.translate_nbest(TEXTS, 2), alone.translate_nbest(TEXTS, 2))


@pytest.mark.skipif(not compiler_available(), reason="torch.compile needs a C++ compiler")
def test_compile_compiles_every_models_own_step(ensemble_dirs, shared_kept_steps):
    """Each model's decoding step is compiled (its own `CompiledStep`, on the CPU the kept one);
    the ensemble then finds what the eager ensemble finds. One sentence: one variant of each
    model's step to build (the variants are tested in tests/decoding/test_compiled_decoding.py)."""
    from aiayn.runtime.compiled import CompiledStep

    eager = aiayn.load([ensemble_dirs.a, ensemble_dirs.b], "cpu")
    compiled = aiayn.load([ensemble_dirs.a, ensemble_dirs.b], "cpu", compile=True)
    assert all(isinstance(runner, CompiledStep) for runner in compiled.model.runners)
    assert not any(isinstance(runner, CompiledStep) for runner in eager.model.runners)
    assert_same_nbest(compiled.translate_nbest(TEXTS[:1], 2), eager.translate_nbest(TEXTS[:1], 2), 1e-4)
    assert all(runner.calls["kept"] > 0 for runner in compiled.model.runners)


def test_attention_is_the_mean_of_the_models_or_the_first_models(ensemble_dirs):
    """--report, alignments and the attention view read `cross_attention`: the mean of the
    models' maps when their layers and heads agree, else the first model's."""
    a, b, shallow = (aiayn.load(d, "cpu") for d in (ensemble_dirs.a, ensemble_dirs.b, ensemble_dirs.shallow))
    sources = [ids for ids in a.tokenizers.source.encode_batch(TEXTS)]
    targets = a.tokenizers.target.encode_batch([t for t in TARGETS if t])
    device = torch.device("cpu")
    maps_a = cross_attention(a.model, sources, targets, device)
    maps_b = cross_attention(b.model, sources, targets, device)
    both = cross_attention(Ensemble([a.model, b.model]), sources, targets, device)
    for ours, first, second in zip(both, maps_a, maps_b, strict=True):
        np.testing.assert_allclose(ours, (first + second) / 2, atol=1e-6)
    mixed = Ensemble([a.model, shallow.model])
    assert not mixed.same_attention_shapes
    for ours, first in zip(cross_attention(mixed, sources, targets, device), maps_a, strict=True):
        np.testing.assert_array_equal(ours, first)


def test_max_len_is_the_smallest(ensemble_dirs):
    a, b = aiayn.load(ensemble_dirs.a, "cpu"), aiayn.load(ensemble_dirs.b, "cpu")
    b.model.config.max_len = 20  # as a model trained on shorter sentences would have it
    assert Ensemble([a.model, b.model]).config.max_len == 20
    assert a.config.max_len == 48


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_models_that_cannot_join_are_refused_with_one_line(ensemble_dirs, name):
    other = getattr(ensemble_dirs, name)
    if other is None:
        pytest.skip("needs the optional extra 'export' (CTranslate2)")
    with pytest.raises(AiaynError) as error:
        aiayn.load([ensemble_dirs.a, other], "cpu")
    message = str(error.value)
    assert "\n" not in message and REFUSALS[name] in message, message
    if name in ("renamed", "source_renamed", "swapped_specials", "bigger"):
        assert str(ensemble_dirs.a) in message  # names the model compared with


def test_a_language_model_task_is_refused(ensemble_dirs):
    with pytest.raises(AiaynError, match="an ensemble decodes translation models"):
        aiayn.load([ensemble_dirs.a, ensemble_dirs.b], "cpu", task="lm")
    with pytest.raises(AiaynError, match="at least one"):
        aiayn.load([], "cpu")
