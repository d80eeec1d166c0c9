"""Linear layers with pre-packed weights, for inference on CPU.

A trained model's weights do not change while it translates, so each W can be reordered once
into the blocked layout oneDNN's matrix kernels read (PyTorch's `mkldnn._reorder_linear_weight`
and `mkldnn._linear_pointwise`, the ops `torch.compile` freezes CPU linears into). The products
are the same x W^T + b up to float rounding (a different summation order); the decoder's
shapes run markedly faster than through PyTorch's default CPU GEMM (benchmarks/RESULTS.md).

`pack_for_inference(model)` swaps every `nn.Linear` of a float32 CPU model for a
`PackedLinear` holding the same parameters (same names, same tied tensors: `state_dict` and
parameter counts do not change). Only for a model that is no longer trained.

A compiler cannot trace oneDNN's packed layout, so inside a compiled step
(`aiayn.model.compiling`) the call goes through the custom operator `aiayn::packed_linear`,
opaque to the compiler: it takes the plain weight slice, which carries its packed form as an
attribute (`PACKED_FORM`), set once where the slice is made.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

PACKED_FORM = "_aiayn_packed"
"""The attribute of a weight slice (a plain (out, in) tensor) holding its packed form."""


def packing_available() -> bool:
    """True where this PyTorch has the oneDNN linear ops (CPU builds with MKLDNN)."""
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


class PackedLinear(nn.Module):
    """y = x W^T + b with W (out, in) pre-packed for oneDNN; `rows` gives x W[a:b]^T + b[a:b].

    Args:
        linear: the `nn.Linear` whose parameters this takes over (shared, not copied).
        batch_hint: the typical number of rows x; only tunes the packed layout.
    """

    def __init__(self, linear: nn.Linear, batch_hint: int = 64) -> None:
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.batch_hint = batch_hint
        self._slices: dict[tuple[int, int], tuple[Tensor, Tensor | None]] = {}

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        return self.rows(x, 0, self.out_features)

    def rows(self, x: Tensor, start: int, stop: int) -> Tensor:
        """(..., in) -> (..., stop - start): the output features start..stop-1 alone."""
        weight, bias = self.slice(start, stop)
        flat = x.reshape(-1, self.in_features).contiguous()  # (N, in)
        # Compiled: the same kernel through the dispatcher, opaque to the compiler.
        run = torch.ops.aiayn.packed_linear if torch.compiler.is_compiling() else _packed_linear_cpu
        out = run(flat, weight, bias)  # (N, out)
        return out.view(*x.shape[:-1], stop - start)

    def slice(self, start: int, stop: int) -> tuple[Tensor, Tensor | None]:
        """W[start:stop] (with its packed form attached) and b[start:stop], made once."""
        if (start, stop) not in self._slices:
            weight = self.weight.detach()[start:stop].contiguous()
            bias = None if self.bias is None else self.bias.detach()[start:stop].contiguous()
            setattr(weight, PACKED_FORM, torch.ops.mkldnn._reorder_linear_weight(weight, self.batch_hint))
            self._slices[start, stop] = (weight, bias)
        return self._slices[start, stop]

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed (oneDNN)"


def _packed_linear_cpu(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """(N, in) -> (N, out) = x W^T + b through the packed form attached to `weight` (out, in)."""
    packed = getattr(weight, PACKED_FORM, None)
    if packed is None:
        raise RuntimeError("aiayn::packed_linear needs a weight slice made by PackedLinear.slice")
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


# Registered with the dispatcher directly (not `torch.library.custom_op`, whose Python wrapper
# costs several times the dispatch of a small product, on every call of a decoding step).
_LIBRARY = torch.library.Library("aiayn", "FRAGMENT")
_LIBRARY.define("packed_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor")
_LIBRARY.impl("packed_linear", _packed_linear_cpu, "CPU")


@torch.library.register_fake("aiayn::packed_linear", lib=_LIBRARY)
def _(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return x.new_empty(x.size(0), weight.size(0))


def pack_for_inference(model: nn.Module) -> nn.Module:
    """Replace every `nn.Linear` of a float32 CPU `model` by a `PackedLinear`, in place.

    Does nothing where packing is unavailable or the model is not float32 on the CPU.
    Returns the model.
    """
    first = next(model.parameters(), None)
    if first is None or first.device.type != "cpu" or first.dtype != torch.float32 or not packing_available():
        return model
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, PackedLinear(child))
    return model


def linear_rows(linear: nn.Module, x: Tensor, start: int, stop: int) -> Tensor:
    """x W[start:stop]^T + b[start:stop] for an `nn.Linear`, a `PackedLinear` or an `Int8Linear`."""
    if hasattr(linear, "rows"):  # PackedLinear, Int8Linear: their own copies of the slice
        return linear.rows(x, start, stop)
    bias = None if linear.bias is None else linear.bias[start:stop]
    return nn.functional.linear(x, linear.weight[start:stop], bias)
