"""`aiayn.runtime` computes a model without changing it: step runners on the model's own
parameters, the same `state_dict`, outputs equal to the model's own up to rounding (int8: up to
its quantization), no operator registered before a runtime layer is made, the compiled step's
network with its decoder's `attention` and its cache's spare positions."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
import torch

from aiayn.formats import load_model
from aiayn.inference import load
from aiayn.model import AttentionCache, MultiHeadAttention, scaled_dot_product_attention
from aiayn.runtime import accelerate, operators
from aiayn.runtime.beam_history import BeamHistoryCache
from aiayn.runtime.compiled import (
    CompiledStep,
    compiler_available,
    elementwise_attention,
    step_attention,
)
from aiayn.runtime.cpu import cpu_info, parse_cpuinfo
from aiayn.runtime.int8 import (
    LARGE_PRODUCT,
    Int8Linear,
    PackedInt8,
    fused_kernel_available,
    quantize_rows,
)
from aiayn.runtime.prepacked import PrepackedLinear, prepacking_available
from aiayn.runtime.steps import EagerStep, Int8Step, PrepackedStep
from decoding.helpers import tiny_transformer

needs_prepacking = pytest.mark.skipif(not prepacking_available(), reason="needs PyTorch's oneDNN linear ops")

OPERATORS_AFTER = """
import torch, aiayn, aiayn.runtime, aiayn.runtime.compiled, aiayn.runtime.int8, aiayn.runtime.prepacked
before = [hasattr(torch.ops.aiayn, name) for name in ("prepacked_linear", "int8_linear")]
aiayn.runtime.int8.Int8Linear(torch.nn.Linear(4, 3))
after = [hasattr(torch.ops.aiayn, name) for name in ("prepacked_linear", "int8_linear")]
print(before, after)
"""


def test_no_operator_is_registered_until_a_runtime_layer_is_made():
    result = subprocess.run([sys.executable, "-c", OPERATORS_AFTER], capture_output=True, text=True)
    assert result.stdout.split() == ["[False,", "False]", "[True,", "True]"], result.stdout + result.stderr


def test_threads_registering_at_once_define_the_operators_once(monkeypatch):
    """Two models loaded side by side (benchmarks/table3.py scores rows in threads) both make
    runtime layers; the definition must run in one thread at a time, or the second one fails."""
    inside, most = [0], [0]

    def slow_definition():
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.05)  # long enough for every waiting thread to arrive
        inside[0] -= 1

    monkeypatch.setattr(operators, "_define_operators", slow_definition)
    barrier = threading.Barrier(4)

    def register():
        barrier.wait()
        operators.register_operators()

    threads = [threading.Thread(target=register) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1


def sources() -> torch.Tensor:
    return torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])


def targets() -> torch.Tensor:
    return torch.tensor([[1, 11, 12, 13], [1, 14, 15, 0]])


@needs_prepacking
@pytest.mark.parametrize("quantize", [None, "int8"])
def test_runners_keep_the_state_dict_and_the_outputs(quantize):
    model = tiny_transformer(0, vocab_size=20, noise=0.0)  # unperturbed: int8's error stays small
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with torch.no_grad():
        expected = model(sources(), targets())
        runner = accelerate(model, quantize=quantize)
        layer = Int8Linear if quantize else PrepackedLinear
        network = runner.network
        in_projections = [m.in_proj for m in network.modules() if isinstance(m, MultiHeadAttention)]
        assert in_projections and all(type(p) is layer for p in in_projections)
        assert type(network.output_projection) is layer
        got = runner(sources(), targets())  # makes every prepared weight part
    after = model.state_dict()
    assert list(after) == list(before)  # no prepared weight is saved
    assert all(torch.equal(after[name], before[name]) for name in before)
    shared = {p.data_ptr() for p in model.parameters()}
    assert {p.data_ptr() for p in network.parameters()} == shared  # the model's weights, not copies
    tolerance = 0.03 * expected.abs().max().item() if quantize else 1e-4
    torch.testing.assert_close(got, expected, atol=tolerance, rtol=0)


def module_shapes(model: torch.nn.Module) -> list[tuple[str, type, list[str]]]:
    """Every module of `model`: its name, type and attribute names (what a runtime could write)."""
    return [(name, type(module), sorted(vars(module))) for name, module in model.named_modules()]


@needs_prepacking
@pytest.mark.skipif(not compiler_available(), reason="torch.compile needs a C++ compiler")
def test_no_runner_writes_onto_the_model():
    """The eager, prepacked, int8 and compiled runners built on one model: every module of the
    model keeps its type and its attributes (names and the attention it holds), and a runner
    that computes with other layers holds none of the model's modules."""
    model = tiny_transformer(0, vocab_size=20)
    before = module_shapes(model)
    attentions = [m.attention for m in model.modules() if isinstance(m, MultiHeadAttention)]
    runners = [EagerStep(model), PrepackedStep(model), Int8Step(model), CompiledStep(model)]
    assert module_shapes(model) == before
    assert [m.attention for m in model.modules() if isinstance(m, MultiHeadAttention)] == attentions
    assert runners[0].network is model
    own = {id(m) for m in model.modules()}
    for runner in runners[1:]:
        assert not own & {id(m) for m in runner.network.modules()}, runner
    assert type(model.new_cache().self_attention[0]) is AttentionCache


def test_accelerate_refuses_what_it_does_not_do():
    with pytest.raises(ValueError, match="quantize must be one of"):
        accelerate(tiny_transformer(0), quantize="int4")


@needs_prepacking
def test_a_part_of_the_fused_projection_is_the_same_part_of_the_whole():
    model = tiny_transformer(0, vocab_size=20)
    x = torch.randn(3, 5, 32)
    fused = next(m.in_proj for m in model.modules() if isinstance(m, MultiHeadAttention))
    with torch.no_grad():
        whole = fused(x)
        own_part = fused.project_features(x, 32, 96)
        prepacked_part = PrepackedLinear(fused).project_features(x, 32, 96)
    torch.testing.assert_close(own_part, whole[..., 32:96])
    torch.testing.assert_close(prepacked_part, whole[..., 32:96], atol=1e-5, rtol=1e-5)


def stepped_logits(model, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
    """(B, T, V): `tgt_in` decoded one position at a time through the key/value cache."""
    memory, cache = model.encode(src), model.new_cache()
    steps = [model.decode(tgt_in[:, t : t + 1], memory, src != 0, cache=cache) for t in range(tgt_in.size(1))]
    return torch.cat(steps, dim=1)


@needs_prepacking
@pytest.mark.parametrize("quantize", [None, "int8"])
def test_heads_narrower_than_d_model_over_h_run_accelerated(quantize):
    """`model.head_dim` (Table 3 row B): 3 heads of 8 in d_model 32; the runtime's slices of the
    fused projection are h d_k wide, the full pass and the cached steps equal the plain model's."""
    plain = tiny_transformer(0, vocab_size=20, noise=0.0, num_heads=3, head_dim=8)
    model = tiny_transformer(0, vocab_size=20, noise=0.0, num_heads=3, head_dim=8)
    with torch.no_grad():
        expected, expected_steps = plain(sources(), targets()), stepped_logits(plain, sources(), targets())
        network = accelerate(model, quantize=quantize).network
        assert network.decoder.layers[0].cross_attention.in_proj.linear.weight.shape == (72, 32)
        got, got_steps = network(sources(), targets()), stepped_logits(network, sources(), targets())
    tolerance = 0.03 * expected.abs().max().item() if quantize else 1e-4
    torch.testing.assert_close(got, expected, atol=tolerance, rtol=0)
    torch.testing.assert_close(got_steps, expected_steps, atol=tolerance, rtol=0)


@needs_prepacking
def test_the_loader_accelerates_and_keeps_the_saved_names(model_dir):
    plain = load_model(model_dir, "cpu")
    loaded = load(model_dir, "cpu")
    assert type(loaded.network.output_projection) is PrepackedLinear
    assert type(loaded.model.output_projection) is torch.nn.Linear
    assert list(loaded.model.state_dict()) == list(plain.state_dict())


@needs_prepacking
@pytest.mark.skipif(not compiler_available(), reason="torch.compile needs a C++ compiler")
def test_the_compiled_runner_has_its_own_attention_and_cache():
    """Set up only (the step compiles on its first call, which tests/decoding times)."""
    runner = CompiledStep(tiny_transformer(0))
    assert type(runner.new_cache().self_attention[0]) is BeamHistoryCache
    network = runner.network
    decoder_layers = [m for m in network.decoder.modules() if isinstance(m, MultiHeadAttention)]
    encoder_layers = [m for m in network.encoder.modules() if isinstance(m, MultiHeadAttention)]
    assert decoder_layers and all(m.attention is step_attention for m in decoder_layers)
    assert encoder_layers and all(m.attention is scaled_dot_product_attention for m in encoder_layers)


def test_the_model_cache_may_fill_its_buffers_exactly():
    """Whatever is appended, the model's own cache keeps no position spare: a buffer may fill
    up exactly (the compiled runner's cache keeps one, tests/runtime/test_beam_history.py)."""
    cache, key = AttentionCache(), torch.randn(2, 2, 1, 4)
    filled_whole = False
    for step in range(40):
        keys, _ = cache.append(key, key)
        capacity = cache.buffers[0][0].size(2)
        assert keys.size(2) == step + 1 and capacity >= step + 1
        filled_whole |= capacity == step + 1
        assert cache.has_room(1) == (capacity >= step + 2)
    assert filled_whole


@pytest.mark.parametrize("causal", [False, True])
def test_elementwise_attention_is_eq_1(causal):
    torch.manual_seed(0)
    queries = 6 if causal else 4  # the causal mask of the explicit path is square
    q, k, v = torch.randn(2, 3, queries, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    mask = None if causal else torch.rand(2, 1, 4, 6) > 0.3
    expected, _ = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True, is_causal=causal)
    torch.testing.assert_close(elementwise_attention(q, k, v, mask, causal), expected, atol=1e-5, rtol=1e-5)


def test_the_cpu_is_read_once_and_parsed_from_its_first_entry():
    assert cpu_info() is cpu_info()
    info = parse_cpuinfo(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\n"
        "flags\t\t: fpu avx2 avx512_vnni\n\nprocessor\t: 1\nflags\t\t: other\n"
    )
    assert (info.model, info.vendor) == ("AMD EPYC 9B14", "AuthenticAMD")
    assert info.flags == {"fpu", "avx2", "avx512_vnni"}
    assert parse_cpuinfo("Features\t: fp asimd bf16\n").flags == {"fp", "asimd", "bf16"}


INT8_ENGINES = set(torch.backends.quantized.supported_engines)
needs_both_int8_kernels = pytest.mark.skipif(
    not fused_kernel_available() or not {"fbgemm", "onednn"} <= INT8_ENGINES,
    reason="needs PyTorch's FBGEMM and oneDNN int8 kernels",
)


@needs_both_int8_kernels
def test_int8_calls_run_the_kernel_their_size_favours_and_both_kernels_agree():
    """A few rows run on FBGEMM's packing, rows x outputs >= LARGE_PRODUCT on oneDNN's (through
    the operator the compiled step calls); both give x W^T + b within the same int8 bound."""
    out_features = 512
    linear = torch.nn.Linear(64, out_features)
    weight, scale = quantize_rows(linear.weight.detach())
    packed = PackedInt8(weight, scale.view(-1), linear.bias.detach())
    few, many = torch.randn(4, 64), torch.randn(LARGE_PRODUCT // out_features, 64)
    assert packed.for_rows(4) is packed.small and packed.for_rows(many.size(0)) is packed.large
    assert packed.for_rows(many.size(0) - 1) is packed.small
    layer = Int8Linear(linear)
    layer(few)  # quantizes and packs the whole weight
    (prepared,) = layer.parts[0, out_features]
    run = operators.int8_linear_cpu
    for x, engine_packing in ((few, operators.prepared_form(prepared, "int8_linear").small),
                              (many, operators.prepared_form(prepared, "int8_linear").large)):
        expected = torch.ops.quantized.linear_dynamic(x, engine_packing, operators.reduce_range())
        assert torch.equal(run(x, prepared), expected)
    on_fbgemm = torch.ops.quantized.linear_dynamic(many, packed.small, operators.reduce_range())
    on_onednn = torch.ops.quantized.linear_dynamic(many, packed.large, operators.reduce_range())
    exact = linear(many).detach()
    bound = 0.05 * exact.abs().max().item()
    for on_kernel in (on_fbgemm, on_onednn):
        torch.testing.assert_close(on_kernel, exact, rtol=0, atol=bound)
    assert ((on_onednn - on_fbgemm).abs() > 1e-4).float().mean() < 0.01  # rounding, a few steps apart
