"""`train.compile`: the compiled training step equals the eager one, compiles a bounded number of
graphs, and `auto` compiles only where it pays (`aiayn.training.compiled_step`).

On a CPU the step is captured by TorchDynamo and run by its `eager` backend: the graphs, graph
breaks, guards and dynamic shapes that Inductor would receive, run as captured, which keeps the
compile time of a test small (`aot_eager`, which traces the backward graph too, and Inductor cost
a test several times as much). On CUDA the same check runs through Inductor itself, backward graph
and generated kernels included.
"""

from __future__ import annotations

import logging

import pytest
import torch
import torch._dynamo

from aiayn.core.errors import ConfigError
from aiayn.data.batching import make_batch
from aiayn.data.special_tokens import TRAINED_SPECIALS
from aiayn.model import ModelConfig, Transformer
from aiayn.tasks import config_from_dict
from aiayn.training import compiled_step
from aiayn.training.compiled_step import choose_step_loss, compile_loss, compile_pays, padding_share
from aiayn.training.loss import translation_loss

from .conftest import tiny_config

CPU = torch.device("cpu")


def tiny_model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig.preset("tiny", vocab_size=24, max_len=32, dropout=0.0))


def ragged_batch(rows: int, src_len: int, tgt_len: int) -> object:
    """`rows` pairs of lengths up to `src_len` / `tgt_len` (every other row shorter: padding)."""
    src = [[4 + (i + j) % 19 for j in range(src_len - i % 2)] for i in range(rows)]
    tgt = [[5 + (i * j) % 18 for j in range(tgt_len - i % 2)] for i in range(rows)]
    return make_batch(src, tgt, specials=TRAINED_SPECIALS)


def counting_backend():
    """(a TorchDynamo backend that runs the captured graphs as they are, the graphs it was given),
    after a reset: what a compile traced, without Inductor's compile time."""
    torch._dynamo.reset()
    eager = torch._dynamo.lookup_backend("eager")
    graphs = []

    def counting(graph, example_inputs):
        graphs.append(graph)
        return eager(graph, example_inputs)

    return counting, graphs


def loss_and_grads(model, loss_fn, batch):
    model.zero_grad(set_to_none=True)
    loss, _ = loss_fn(model, batch, 0.1)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_the_compiled_step_gives_the_eager_loss_and_gradients_and_new_shapes_no_new_graphs(one_thread):
    """One compile (the slow part of these tests) serves both checks: batches of four shapes give the
    eager step's loss and gradients, and the shapes after the first compile nothing new."""
    counting, graphs = counting_backend()
    model = tiny_model()
    compiled = compile_loss(translation_loss, backend=counting, device_type="cpu")
    # the first batch has sources as long as targets (7 positions): nothing may assume they stay so
    for i, shape in enumerate(((3, 6, 6), (4, 9, 7), (2, 11, 4), (5, 5, 10))):
        batch = ragged_batch(*shape)
        eager_loss, eager_grads = loss_and_grads(model, translation_loss, batch)
        loss, grads = loss_and_grads(model, compiled, batch)
        torch.testing.assert_close(loss, eager_loss, rtol=1e-5, atol=1e-5)
        for name, grad in eager_grads.items():
            torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)
        if i == 0:
            first = len(graphs)
    assert first > 0 and len(graphs) == first  # every dimension dynamic from the first batch


def test_the_padding_share_counts_padded_positions():
    batch = ragged_batch(2, 4, 3)  # sources of 4 and 3 (+ <eos>), targets of 3 and 2 (+ <eos>)
    assert padding_share([batch]) == pytest.approx(1 - (5 + 4 + 4 + 3) / (2 * 5 + 2 * 4))


def test_compiling_pays_only_when_the_run_repays_the_compile_time():
    assert compile_pays(1000, 1300, 60, 1800)  # 30 minutes, 30% faster after a minute
    assert not compile_pays(1000, 1300, 60, 240)  # 4 minutes: the minute is not repaid
    assert not compile_pays(1000, 1020, 0, 1800)  # within the margin


def test_auto_compiles_by_the_timing_and_says_why(monkeypatch, caplog, one_thread):
    model, batch = tiny_model(), ragged_batch(3, 6, 5)
    monkeypatch.setattr(compiled_step, "compiler_available", lambda: True)
    monkeypatch.setattr(compiled_step, "AUTO_TIMED_DEVICES", frozenset({"cuda", "cpu"}))
    monkeypatch.setattr(compiled_step, "time_compiled_step",
                        lambda *a, **k: (60.0, {"eager": 1000.0, "compiled": 1300.0}))
    args = (model, [batch], translation_loss, 0.1, CPU, "fp32")
    with caplog.at_level(logging.INFO, logger="aiayn.training.compiled_step"):
        long, _ = choose_step_loss("auto", *args, 1800.0, backend="eager")  # eager: nothing to import
        short, _ = choose_step_loss("auto", *args, 240.0, backend="eager")
    assert long is not translation_loss and short is translation_loss
    expected = "train.compile auto: compiled, eager 1,000, compiled 1,300 target tokens/s after 60 s"
    assert expected in caplog.text
    assert "train.compile auto: eager" in caplog.text and "padding" in caplog.text

    def never(*args, **kwargs):
        raise AssertionError("a short run times nothing")

    monkeypatch.setattr(compiled_step, "time_compiled_step", never)
    assert choose_step_loss("auto", *args, 30.0)[0] is translation_loss  # 30 s could never repay it
    assert choose_step_loss("auto", *args, None)[0] is translation_loss  # no budget to weigh it against
    # max_steps: an eager step is timed, and 2 steps are far too few
    assert choose_step_loss("auto", *args, 1e6, steps_left=2)[0] is translation_loss
    assert choose_step_loss("false", *args, 1e6)[0] is translation_loss
    assert choose_step_loss("true", *args, None, backend="eager")[0] is not translation_loss


def test_compile_true_compiles_at_start_up_and_leaves_the_model_as_it_was(caplog, one_thread):
    """The first (slow) compiled call happens before `choose_step_loss` returns, so before the
    training clock starts: compiling must not spend a time-following warmup. The step it takes
    to compile changes no weight."""
    counting, graphs = counting_backend()
    model = tiny_model()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    with caplog.at_level(logging.INFO, logger="aiayn.training.compiled_step"):
        loss, reason = choose_step_loss("true", model, [ragged_batch(3, 6, 5)], translation_loss, 0.1, CPU,
                                        "fp32", 1800.0, backend=counting)
    assert loss is not translation_loss and graphs  # compiled already
    assert "compiled in" in reason and "at start-up" in caplog.text
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name
        assert p.grad is None, name


def test_auto_times_no_compile_on_a_cpu(monkeypatch, caplog):
    def never(*args, **kwargs):
        raise AssertionError("auto times no compiled step on a CPU")

    monkeypatch.setattr(compiled_step, "compiler_available", lambda: True)
    monkeypatch.setattr(compiled_step, "time_compiled_step", never)
    with caplog.at_level(logging.INFO, logger="aiayn.training.compiled_step"):
        loss, reason = choose_step_loss("auto", tiny_model(), [ragged_batch(3, 6, 5)], translation_loss, 0.1,
                                        CPU, "fp32", 1800.0)
    assert loss is translation_loss and "train.compile=true compiles" in reason
    assert "train.compile auto: eager, on a CPU" in caplog.text


def test_compile_true_without_a_compiler_names_the_fix(monkeypatch):
    monkeypatch.setattr(compiled_step, "compiler_available", lambda: False)
    with pytest.raises(ConfigError, match="train.compile=true: .*C\\+\\+ compiler.*train.compile=false"):
        choose_step_loss("true", tiny_model(), [], translation_loss, 0.1, CPU, "fp32", None)


def test_the_setting_takes_yaml_booleans_and_auto():
    assert config_from_dict(tiny_config(compile=True)).train.compile == "true"
    assert config_from_dict(tiny_config(compile=False)).train.compile == "false"
    assert config_from_dict(tiny_config()).train.compile == "auto"
    with pytest.raises(ConfigError, match="train.compile must be one of auto, true, false"):
        config_from_dict(tiny_config(compile="yes"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_compiled_step_on_cuda_gives_the_eager_loss_and_gradients():
    torch._dynamo.reset()
    model = tiny_model().cuda()
    compiled = compile_loss(translation_loss, device_type="cuda")  # Inductor: Triton kernels
    for batch in (ragged_batch(3, 6, 5).to("cuda"), ragged_batch(4, 9, 7).to("cuda")):
        eager_loss, eager_grads = loss_and_grads(model, translation_loss, batch)
        loss, grads = loss_and_grads(model, compiled, batch)
        torch.testing.assert_close(loss, eager_loss, rtol=1e-4, atol=1e-4)
        for name, grad in eager_grads.items():
            torch.testing.assert_close(grads[name], grad, rtol=1e-3, atol=1e-5, msg=name)


def test_on_a_cpu_the_compiled_step_draws_the_eager_steps_dropout_masks(one_thread):
    """Inductor itself (C++ loops), dropout between two layers: from the same seed, the compiled
    loss and gradients are the eager ones, because its random numbers come from PyTorch's generator
    (`fallback_random`), in the eager order. Inductor's own in-loop generator draws other masks,
    and this fails."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Dropout(0.5), torch.nn.ReLU(),
                                torch.nn.Linear(32, 8), torch.nn.Dropout(0.5))

    def loss_fn(model, batch, smoothing):
        return model(batch).square().sum(), batch.size(0)

    compiled = compile_loss(loss_fn, device_type="cpu")
    batch = torch.randn(64, 16)
    torch.manual_seed(1)
    eager_loss, eager_grads = loss_and_grads(model, loss_fn, batch)
    torch.manual_seed(1)
    loss, grads = loss_and_grads(model, compiled, batch)
    torch.testing.assert_close(loss, eager_loss)
    for name, grad in eager_grads.items():
        torch.testing.assert_close(grads[name], grad, msg=name)
