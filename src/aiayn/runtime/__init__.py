"""The inference runtime: faster ways to compute a trained model, above `aiayn.model`.

It depends on the model and the model never on it, nor is the model changed by it: each way
is a step runner (`aiayn.runtime.steps`) that the searches (`aiayn.decoding`) take, computing
the model's step with its own copy of the model's modules where its layers differ
(`aiayn.runtime.network`), so the paper's modules carry no kernel, compiler or OS code.

- `steps`: the runners' interface, `EagerStep`, `PrepackedStep`, `Int8Step`;
- `network`: a runner's copy of the model's modules, on the model's parameters;
- `prepacked`: linear layers with oneDNN's prepacked weight layout (float32, CPU);
- `int8`: linear layers with int8 weights, the input quantized on the fly;
- `compiled`: `CompiledStep`, the decoding step compiled with `torch.compile`, attention
  written element-wise;
- `operators`: the custom operators the compiled step calls, registered on first use;
- `cpu`: what the processor is and can do, read once.

`accelerate(model, quantize=None, compile=False)` gives the runner for a model loaded for inference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from aiayn.core.decoding_choices import QUANTIZATIONS

if TYPE_CHECKING:
    from aiayn.runtime.steps import StepRunner


def accelerate(model: nn.Module, quantize: str | None = None, compile: bool = False) -> StepRunner:
    """The fastest step runner for a model that is no longer trained (the model is not changed).

    Its linear layers int8 (`quantize='int8'`: `Int8Step`) or, on a float32 CPU model,
    prepacked (`PrepackedStep`); `compile` compiles the decoding step of a `Transformer`
    (`CompiledStep`). Outputs equal the model's own up to float rounding (int8: up to its
    quantization).
    """
    from aiayn.runtime.steps import Int8Step, PrepackedStep

    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {list(QUANTIZATIONS)} (or None), got {quantize!r}")
    if compile:
        from aiayn.model.transformer import Transformer
        from aiayn.runtime.compiled import CompiledStep

        if not isinstance(model, Transformer):
            raise ValueError(f"compile applies to translation models, got a {type(model).__name__}")
        return CompiledStep(model, quantize)
    return Int8Step(model) if quantize == "int8" else PrepackedStep(model)
