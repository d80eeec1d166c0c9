"""int8 linear layers for inference: per-channel int8 weights, activations quantized on the fly.

Against the reference: NOT the same result. `aiayn.paper` multiplies float32 inputs by float32
weights; here each weight is rounded to one of 255 steps of its output channel's range and each
input to one of 256 (or 128) steps of its batch's range, so every product approximates
x W^T + b to within those steps. The difference is bounded by
`tests/runtime/test_against_paper.py::test_int8_log_probs_stay_within_a_bound_of_the_reference`
(log-probabilities within 0.1 of the reference's, on a tiny model) and
`tests/runtime/test_runtime.py::test_runners_keep_the_state_dict_and_the_outputs` (outputs
within 3% of the float model's largest output); its BLEU cost on Multi30k is in benchmarks/RESULTS.md.

As CTranslate2's int8 mode, each output channel j of W keeps its own scale s_j = max|W_j| / 127
and int8 weights round(W_j / s_j); the input is quantized on the fly, the int8 product
accumulated in int32 and rescaled to float:

    y_ij ~ t s_j sum_k q(x_ik) round(W_jk / s_j) + b_j

On CPU the whole of that (quantize the input, int8 GEMM, rescale, bias) is one fused kernel,
PyTorch's `quantized::linear_dynamic` (fbgemm / oneDNN), with the weights pre-packed once. Its
input scale t is one per call (the batch's range, asymmetric uint8: all 8 bits on a CPU with
VNNI, 7 bits elsewhere so that the 16-bit sums of CPUs without VNNI cannot saturate), where
CTranslate2 takes one per row: composing the per-row version from
separate PyTorch ops (`torch._int_mm` between a quantize and a rescale pass) measured slower than
float32 on the decoder's shapes, the fused kernel 2-4x faster, and the BLEU cost of the coarser
scale is measured in benchmarks/RESULTS.md. Elsewhere (CUDA) the per-row composition
(`quantize_rows`, `torch._int_mm`) runs.

PyTorch has two such CPU kernels, FBGEMM's and oneDNN's, at different speeds. Both quantize the
input per call and are as far from the float32 product as each other; their outputs agree up to
float rounding but for a few values in a thousand, which may differ by about one quantization step.
FBGEMM's is the faster for a few rows; oneDNN's for a wide product of many rows, as the output
projection over the vocabulary of a batch of beams (`benchmarks/int8_kernels.py` measures both on
the decoder's shapes). Each slice is packed for both (`PackedInt8`), and each call takes the one
its size favours (`LARGE_PRODUCT`).

Inside a compiled step the fused kernel is the operator `aiayn::int8_linear`
(`aiayn.runtime.operators`), which takes a plain view of the float weight slice whose packed
int8 weights its layer prepared.

An `Int8Linear` holds an `nn.Linear` (its float parameters are the linear layer's) and the
int8 forms of its slices (not parameters: never saved). `int8_network(model)` is the model's
network (`aiayn.runtime.network`) with every linear layer so held, for a model that is no
longer trained; the model itself is not changed.
"""

from __future__ import annotations

import threading
import warnings

import torch
from torch import Tensor, nn

from aiayn.runtime.network import network_of
from aiayn.runtime.operators import int8_linear_cpu, prepare
from aiayn.runtime.prepacked import RuntimeLinear


def quantize_rows(x: Tensor) -> tuple[Tensor, Tensor]:
    """(N, K) float -> (N, K) int8 values and (N, 1) float32 scales, symmetric per row."""
    peak = torch.linalg.vector_norm(x.float(), ord=float("inf"), dim=1, keepdim=True)  # max |x_i|
    scale = peak.clamp_(min=1e-8).div_(127.0)  # (N, 1)
    return (x / scale).round_().clamp_(-127, 127).to(torch.int8), scale


def fused_kernel_available() -> bool:
    """True where this PyTorch has the fused CPU kernel (`quantized::linear_dynamic`)."""
    engines = set(torch.backends.quantized.supported_engines) - {"none", "qnnpack"}
    return bool(engines) and hasattr(torch.ops.quantized, "linear_dynamic")


LARGE_PRODUCT = 1 << 17
"""Output values (rows x output features) from which a call runs oneDNN's int8 kernel, not
FBGEMM's: below it FBGEMM's is the faster or as fast, above it oneDNN's, on the shapes that
`benchmarks/int8_kernels.py` measures (its results record the processor)."""

_ENGINE = threading.Lock()
"""Held while a packing switches PyTorch's quantized engine (a process-wide setting) and puts it back."""


def _prepack(weight: Tensor, scale: Tensor, bias: Tensor | None, engine: str) -> object:
    """(out, in) int8 weights with (out,) scales -> `engine`'s packed weights for the fused kernel."""
    with warnings.catch_warnings(), _ENGINE:
        # The packing API takes a quantized tensor, whose creation functions PyTorch marks as
        # deprecated; the packed kernel is what runs, and nothing else of that API is used.
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch._make_per_channel_quantized_tensor(
            weight, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0
        )
        before = torch.backends.quantized.engine
        torch.backends.quantized.engine = engine  # which kernel's layout the packing makes
        try:
            return torch.ops.quantized.linear_prepack(quantized, bias)
        finally:
            torch.backends.quantized.engine = before


class PackedInt8:
    """An int8 weight slice packed for the fused kernels (see the module doc): `for_rows` gives
    the packing to run on an input of that many rows.

    Args:
        weight: (out, in) int8 weights; scale: (out,) their scales; bias: (out,) or None.
    """

    def __init__(self, weight: Tensor, scale: Tensor, bias: Tensor | None) -> None:
        engines = set(torch.backends.quantized.supported_engines)
        small = "fbgemm" if "fbgemm" in engines else sorted(engines - {"none", "qnnpack"})[0]
        self.out_features = weight.size(0)
        self.small = _prepack(weight, scale, bias, small)
        self.large = _prepack(weight, scale, bias, "onednn") if "onednn" in engines - {small} else None

    def for_rows(self, rows: int) -> object:
        """The packed weights an input of `rows` rows runs on (`LARGE_PRODUCT`)."""
        if self.large is not None and rows * self.out_features >= LARGE_PRODUCT:
            return self.large
        return self.small


class Int8Linear(RuntimeLinear):
    """y = x W^T + b with W in int8 (per output channel scales) and x quantized on the fly.

    Args:
        linear: the `nn.Linear` whose float parameters this quantizes (held, not copied).
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__(linear)
        # (start, stop) -> the int8 form of W[start:stop] (`_quantize`); not parameters, so not saved.
        self.parts: dict[tuple[int, int], tuple] = {}

    def project_features(self, x: Tensor, start: int, stop: int) -> Tensor:
        """(..., in) -> (..., stop - start): the output features start..stop-1 alone."""
        quantized = self.parts.get((start, stop))
        if quantized is None:
            quantized = self.parts[start, stop] = self._quantize(start, stop, x.device)
        flat = x.reshape(-1, self.in_features).float().contiguous()  # (N, in)
        if len(quantized) == 1:  # the fused CPU kernel, through its prepared slice view
            run = torch.ops.aiayn.int8_linear if torch.compiler.is_compiling() else int8_linear_cpu
            out = run(flat, quantized[0])  # (N, out)
        else:
            weight_t, weight_scale, bias = quantized  # (in, out), (1, out), (out,)
            values, row_scale = quantize_rows(flat)  # (N, in) int8, (N, 1)
            out = torch.mul(torch._int_mm(values, weight_t), weight_scale)  # (N, out) float32
            if bias is None:
                out.mul_(row_scale)
            else:
                torch.addcmul(bias, out, row_scale, out=out)  # in place: no second (N, out) buffer
        return out.to(x.dtype).view(*x.shape[:-1], stop - start)

    def _quantize(self, start: int, stop: int, device: torch.device) -> tuple:
        """Output features start..stop-1 of W in int8: (a view of W[start:stop] whose packed
        weights are prepared,) for the fused CPU kernel, else (W^T int8 (in, out), scales (1, out), bias)."""
        linear = self.linear
        weight, scale = quantize_rows(linear.weight.detach()[start:stop])  # (out, in), (out, 1)
        bias = None if linear.bias is None else linear.bias.detach()[start:stop].float().contiguous()
        if device.type == "cpu" and fused_kernel_available():
            carrier = linear.weight.detach()[start:stop]
            prepare(carrier, PackedInt8(weight, scale.view(-1), bias))
            return (carrier,)
        return weight.t().contiguous(), scale.view(1, -1), bias

    def extra_repr(self) -> str:
        return "int8"


def int8_network(model: nn.Module) -> nn.Module:
    """`model`'s network with every linear layer an `Int8Linear` (see the module doc); the
    model is not changed."""
    return network_of(model, Int8Linear)
