"""The inference runtime: faster ways to compute a trained model, above `aiayn.model`.

It depends on the model and the model never on it: each speed-up replaces or fills one of the
model's seams (`FusedProjection` layers, the `attention` of `MultiHeadAttention`,
`Transformer.step_runner` and `cache_spare_positions`), so the paper's modules carry no kernel,
compiler or OS code.

- `prepacked`: linear layers with oneDNN's prepacked weight layout (float32, CPU);
- `int8`: linear layers with int8 weights, the input quantized on the fly;
- `compiled`: the decoding step compiled with `torch.compile`, attention written element-wise;
- `operators`: the custom operators the compiled step calls, registered on first use;
- `cpu`: what the processor is and can do, read once.

`accelerate(model, quantize=None, compile=False)` applies them to a model loaded for inference.
"""

from __future__ import annotations

from torch import nn

from aiayn.core.decoding_choices import QUANTIZATIONS


def accelerate(model: nn.Module, quantize: str | None = None, compile: bool = False) -> nn.Module:
    """Make a model that is no longer trained faster to run, in place; returns it.

    Its linear layers become int8 (`quantize='int8'`) or, on a float32 CPU model, prepacked;
    `compile` compiles the decoding step of a `Transformer`. Outputs equal the model's own up to
    float rounding (int8: up to its quantization). `state_dict` is unchanged.
    """
    from aiayn.runtime.int8 import quantize_int8
    from aiayn.runtime.prepacked import prepack_linears

    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {list(QUANTIZATIONS)} (or None), got {quantize!r}")
    model = quantize_int8(model) if quantize == "int8" else prepack_linears(model)
    if compile:
        from aiayn.model.transformer import Transformer
        from aiayn.runtime.compiled import compile_decoding

        if not isinstance(model, Transformer):
            raise ValueError(f"compile applies to translation models, got a {type(model).__name__}")
        model = compile_decoding(model)
    return model
