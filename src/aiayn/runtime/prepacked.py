"""Linear layers with prepacked weights, for inference on CPU.

A trained model's weights do not change while it translates, so each W can be reordered once
into the blocked layout oneDNN's matrix kernels read (PyTorch's `mkldnn._reorder_linear_weight`
and `mkldnn._linear_pointwise`, the ops `torch.compile` freezes CPU linears into): the
"prepacked" form. The products are the same x W^T + b up to float rounding (a different
summation order); the decoder's shapes run markedly faster than through PyTorch's default CPU
GEMM (benchmarks/RESULTS.md).

`prepack_linears(model)` swaps every `nn.Linear` of a float32 CPU model for a
`PrepackedLinear` holding the same parameters (same names, same tied tensors: `state_dict` and
parameter counts do not change; the prepacked copies are not saved). Only for a model that is
no longer trained. Inside a compiled step the kernel is the operator `aiayn::prepacked_linear`
(`aiayn.runtime.operators`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiayn.model.multi_head_attention import FusedProjection
from aiayn.runtime.operators import prepacked_linear_cpu, prepare, register_operators


def prepacking_available() -> bool:
    """True where this PyTorch has the oneDNN linear ops (CPU builds with MKLDNN)."""
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


def take_over(layer: nn.Module, linear: nn.Module) -> None:
    """Initialise a runtime `layer` (a `FusedProjection` subclass) on the parameters of `linear`
    (shared, not copied): in place of `nn.Linear.__init__`, which would make new ones."""
    nn.Module.__init__(layer)
    layer.weight = linear.weight
    layer.bias = linear.bias
    layer.out_features, layer.in_features = linear.weight.shape


class PrepackedLinear(FusedProjection):
    """y = x W^T + b with W (out, in) prepacked for oneDNN; `project_features` gives
    x W[a:b]^T + b[a:b].

    Args:
        linear: the `nn.Linear` whose parameters this takes over (shared, not copied).
        batch_hint: the typical number of rows x; only tunes the prepacked layout.
    """

    def __init__(self, linear: nn.Linear, batch_hint: int = 64) -> None:
        take_over(self, linear)
        self.batch_hint = batch_hint
        # (start, stop) -> (W[start:stop], b[start:stop]); not parameters, so not saved.
        self.parts: dict[tuple[int, int], tuple[Tensor, Tensor | None]] = {}
        register_operators()

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        return self.project_features(x, 0, self.out_features)

    def project_features(self, x: Tensor, start: int, stop: int) -> Tensor:
        """(..., in) -> (..., stop - start): the output features start..stop-1 alone."""
        weight, bias = self.part(start, stop)
        flat = x.reshape(-1, self.in_features).contiguous()  # (N, in)
        run = torch.ops.aiayn.prepacked_linear if torch.compiler.is_compiling() else prepacked_linear_cpu
        out = run(flat, weight, bias)  # (N, out)
        return out.view(*x.shape[:-1], stop - start)

    def part(self, start: int, stop: int) -> tuple[Tensor, Tensor | None]:
        """W[start:stop] (its prepacked form prepared) and b[start:stop], made once."""
        if (start, stop) not in self.parts:
            weight = self.weight.detach()[start:stop].contiguous()
            bias = None if self.bias is None else self.bias.detach()[start:stop].contiguous()
            prepare(weight, torch.ops.mkldnn._reorder_linear_weight(weight, self.batch_hint))
            self.parts[start, stop] = (weight, bias)
        return self.parts[start, stop]

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, prepacked (oneDNN)"


def prepack_linears(model: nn.Module) -> nn.Module:
    """Replace every linear layer of a float32 CPU `model` by a `PrepackedLinear`, in place.

    Does nothing where prepacking is unavailable or the model is not float32 on the CPU.
    Returns the model.
    """
    first = next(model.parameters(), None)
    if first is None or (first.device.type, first.dtype) != ("cpu", torch.float32):
        return model
    if not prepacking_available():
        return model
    replace_linears(model, PrepackedLinear)
    return model


LINEARS: tuple[type[nn.Module], ...] = (nn.Linear, FusedProjection)
"""The model's own linear layers (exact types: a runtime's subclasses are not among them)."""


def replace_linears(model: nn.Module, layer: type[nn.Module], kinds: tuple[type, ...] = LINEARS) -> None:
    """Replace every child of `model` whose type is one of `kinds` by `layer(child)`, in place."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) in kinds:
                module.add_module(name, layer(child))
