"""Linear layers with prepacked weights, for inference on CPU.

Against the reference: `aiayn.paper` computes each linear layer as x W^T + b through PyTorch's
default GEMM; a `PrepackedLinear` multiplies by the same W, reordered once into the layout
oneDNN's kernels read, so its products are the same sums taken in another order: equal up to
float rounding. Proved by
`tests/runtime/test_against_paper.py::test_prepacked_log_probs_equal_the_reference` (a
pre-packed network's log-probabilities are the reference's) and
`tests/runtime/test_runtime.py::test_runners_keep_the_state_dict_and_the_outputs`.

A trained model's weights do not change while it translates, so each W can be reordered once
into the blocked layout oneDNN's matrix kernels read (PyTorch's `mkldnn._reorder_linear_weight`
and `mkldnn._linear_pointwise`, the ops `torch.compile` freezes CPU linears into): the
"prepacked" form. The products are the same x W^T + b up to float rounding (a different
summation order); the decoder's shapes run markedly faster than through PyTorch's default CPU
GEMM (benchmarks/RESULTS.md).

A `PrepackedLinear` holds an `nn.Linear` (its parameters are the linear layer's, not copied)
and its prepacked slices (not parameters: never saved). `prepacked_network(model)` is the
model's network (`aiayn.runtime.network`) with every linear layer so held, for a float32 CPU
model that is no longer trained; the model itself is not changed. Inside a compiled step the
kernel is the operator `aiayn::prepacked_linear` (`aiayn.runtime.operators`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiayn.runtime.network import network_of
from aiayn.runtime.operators import prepacked_linear_cpu, prepare, register_operators


def prepacking_available() -> bool:
    """True where this PyTorch has the oneDNN linear ops (CPU builds with MKLDNN)."""
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


def prepackable(model: nn.Module) -> bool:
    """Whether `model`'s linear layers can be prepacked: float32 on the CPU, with oneDNN."""
    first = next(model.parameters(), None)
    if first is None or (first.device.type, first.dtype) != ("cpu", torch.float32):
        return False
    return prepacking_available()


class RuntimeLinear(nn.Module):
    """A runtime's form of one `nn.Linear` (held as `linear`, parameters shared): y = x W^T + b
    by `forward`, or the output features start..stop-1 alone by `project_features`, as the
    model's `FusedProjection` computes them."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.linear = linear
        register_operators()

    @property
    def in_features(self) -> int:
        return self.linear.in_features

    @property
    def out_features(self) -> int:
        return self.linear.out_features

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        return self.project_features(x, 0, self.out_features)

    def project_features(self, x: Tensor, start: int, stop: int) -> Tensor:
        """(..., in) -> (..., stop - start): the output features start..stop-1 alone."""
        raise NotImplementedError


class PrepackedLinear(RuntimeLinear):
    """y = x W^T + b with W (out, in) prepacked for oneDNN; `project_features` gives
    x W[a:b]^T + b[a:b].

    Args:
        linear: the `nn.Linear` whose parameters this computes with (held, not copied).
        batch_hint: the typical number of rows x; only tunes the prepacked layout.
    """

    def __init__(self, linear: nn.Linear, batch_hint: int = 64) -> None:
        super().__init__(linear)
        self.batch_hint = batch_hint
        # (start, stop) -> (W[start:stop], b[start:stop]); not parameters, so not saved.
        self.parts: dict[tuple[int, int], tuple[Tensor, Tensor | None]] = {}

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
            linear = self.linear
            weight = linear.weight.detach()[start:stop].contiguous()
            bias = None if linear.bias is None else linear.bias.detach()[start:stop].contiguous()
            prepare(weight, torch.ops.mkldnn._reorder_linear_weight(weight, self.batch_hint))
            self.parts[start, stop] = (weight, bias)
        return self.parts[start, stop]

    def extra_repr(self) -> str:
        return "prepacked (oneDNN)"


def prepacked_network(model: nn.Module) -> nn.Module:
    """`model`'s network with every linear layer a `PrepackedLinear` (see the module doc).

    `model` must be `prepackable`. The model is not changed.
    """
    if not prepackable(model):
        raise ValueError("prepacking needs a float32 model on the CPU and PyTorch's oneDNN linear ops")
    return network_of(model, PrepackedLinear)
