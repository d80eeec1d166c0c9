"""int8 linear layers for inference: per-channel weight scales, per-row activation scales.

As CTranslate2's int8 mode: each output channel j of W keeps its own scale s_j = max|W_j| / 127
and int8 weights round(W_j / s_j); each row x_i of the input is quantized on the fly with
t_i = max|x_i| / 127. The int8 x int8 -> int32 product (`torch._int_mm`) is then rescaled:

    y_ij ~ t_i s_j sum_k round(x_ik / t_i) round(W_jk / s_j) + b_j

`quantize_int8(model)` swaps every `nn.Linear` (or `PackedLinear`) of a model for an
`Int8Linear` (the float parameters stay, so `state_dict` and parameter counts do not change;
the int8 copies are extra). Only for a model that is no longer trained.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

QUANTIZATIONS = ("int8",)
"""The values of `--quantize` / `quantize=`."""


def quantize_rows(x: Tensor) -> tuple[Tensor, Tensor]:
    """(N, K) float -> (N, K) int8 values and (N, 1) float32 scales, symmetric per row."""
    scale = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-8) / 127.0
    return torch.round(x / scale).clamp_(-127, 127).to(torch.int8), scale


class Int8Linear(nn.Module):
    """y = x W^T + b with W in int8 (per output channel scales) and x quantized per row.

    Args:
        linear: an `nn.Linear` (or a module with its `weight` and `bias`) to take over.
    """

    def __init__(self, linear: nn.Module) -> None:
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias
        self.out_features, self.in_features = linear.weight.shape
        self._quantized: dict[tuple[int, int], tuple[Tensor, Tensor, Tensor | None]] = {}

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        return self.rows(x, 0, self.out_features)

    def rows(self, x: Tensor, start: int, stop: int) -> Tensor:
        """(..., in) -> (..., stop - start): the output features start..stop-1 alone."""
        if (start, stop) not in self._quantized:
            weight, scale = quantize_rows(self.weight.detach()[start:stop])  # (out, in), (out, 1)
            bias = None if self.bias is None else self.bias.detach()[start:stop].float()
            self._quantized[start, stop] = (weight.t().contiguous(), scale.view(1, -1), bias)
        weight_t, weight_scale, bias = self._quantized[start, stop]  # (in, out), (1, out)
        flat = x.reshape(-1, self.in_features)  # (N, in)
        values, row_scale = quantize_rows(flat)  # (N, in) int8, (N, 1)
        out = torch._int_mm(values, weight_t).float() * (row_scale * weight_scale)  # (N, out)
        if bias is not None:
            out += bias
        return out.to(x.dtype).view(*x.shape[:-1], stop - start)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_int8(model: nn.Module) -> nn.Module:
    """Replace every linear layer of `model` by an `Int8Linear`, in place; returns the model."""
    from aiayn.model.packed_linear import PackedLinear

    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) in (nn.Linear, PackedLinear):
                setattr(module, name, Int8Linear(child))
    return model
