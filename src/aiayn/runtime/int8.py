"""int8 linear layers for inference: per-channel int8 weights, activations quantized on the fly.

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

Inside a compiled step the fused kernel is the operator `aiayn::int8_linear`
(`aiayn.runtime.operators`), which takes a plain view of the float weight slice whose packed
int8 weights its layer prepared.

`quantize_int8(model)` swaps every `nn.Linear` (or `PrepackedLinear`) of a model for an
`Int8Linear` (the float parameters stay, so `state_dict` and parameter counts do not change;
the int8 copies are not saved). Only for a model that is no longer trained.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from aiayn.model.multi_head_attention import FusedProjection
from aiayn.runtime.operators import int8_linear_cpu, prepare, register_operators
from aiayn.runtime.prepacked import PrepackedLinear, replace_linears, take_over


def quantize_rows(x: Tensor) -> tuple[Tensor, Tensor]:
    """(N, K) float -> (N, K) int8 values and (N, 1) float32 scales, symmetric per row."""
    peak = torch.linalg.vector_norm(x.float(), ord=float("inf"), dim=1, keepdim=True)  # max |x_i|
    scale = peak.clamp_(min=1e-8).div_(127.0)  # (N, 1)
    return (x / scale).round_().clamp_(-127, 127).to(torch.int8), scale


def fused_kernel_available() -> bool:
    """True where this PyTorch has the fused CPU kernel (`quantized::linear_dynamic`)."""
    engines = set(torch.backends.quantized.supported_engines) - {"none", "qnnpack"}
    return bool(engines) and hasattr(torch.ops.quantized, "linear_dynamic")


def _prepack(weight: Tensor, scale: Tensor, bias: Tensor | None) -> object:
    """(out, in) int8 weights with (out,) scales -> the fused kernel's packed weights."""
    with warnings.catch_warnings():
        # The packing API takes a quantized tensor, whose creation functions PyTorch marks as
        # deprecated; the packed kernel is what runs, and nothing else of that API is used.
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch._make_per_channel_quantized_tensor(
            weight, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0
        )
        return torch.ops.quantized.linear_prepack(quantized, bias)


class Int8Linear(FusedProjection):
    """y = x W^T + b with W in int8 (per output channel scales) and x quantized on the fly.

    Args:
        linear: an `nn.Linear` (or a module with its `weight` and `bias`) to take over.
    """

    def __init__(self, linear: nn.Module) -> None:
        take_over(self, linear)
        # (start, stop) -> the int8 form of W[start:stop] (`_quantize`); not parameters, so not saved.
        self.parts: dict[tuple[int, int], tuple] = {}
        register_operators()

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        return self.project_features(x, 0, self.out_features)

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
        weight, scale = quantize_rows(self.weight.detach()[start:stop])  # (out, in), (out, 1)
        bias = None if self.bias is None else self.bias.detach()[start:stop].float().contiguous()
        if device.type == "cpu" and fused_kernel_available():
            carrier = self.weight.detach()[start:stop]
            prepare(carrier, _prepack(weight, scale.view(-1), bias))
            return (carrier,)
        return weight.t().contiguous(), scale.view(1, -1), bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_int8(model: nn.Module) -> nn.Module:
    """Replace every linear layer of `model` by an `Int8Linear`, in place; returns the model."""
    replace_linears(model, Int8Linear, (nn.Linear, FusedProjection, PrepackedLinear))
    return model
