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
- `kept`: `KeptStep`, that compiled step kept on disk, built once per model, torch and CPU;
  `kept_store`: where and how it is kept (key, files, lock);
- `auto`: `AutoStep`, eager until building a kept step pays (`compile='auto'`);
- `operators`: the custom operators the compiled step calls, registered on first use;
- `cpu`: what the processor is and can do, read once.

`accelerate(model, quantize=None, compile=False)` gives the runner for a model loaded for inference.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from torch import nn

from aiayn.core.decoding_choices import COMPILE_CHOICES, QUANTIZATIONS

if TYPE_CHECKING:
    from aiayn.runtime.steps import StepRunner


def accelerate(
    model: nn.Module, quantize: str | None = None, compile: bool | str = False, *,
    sentences: int | None = None, label: str | None = None, root: Path | None = None,
) -> StepRunner:
    """The fastest step runner for a model that is no longer trained (the model is not changed).

    Its linear layers int8 (`quantize='int8'`: `Int8Step`) or, on a float32 CPU model,
    prepacked (`PrepackedStep`). `compile` (a `Transformer`'s decoding step):

    - True or 'always': compiled; on the CPU the step kept on disk (`KeptStep`: loaded when
      kept, else built and kept), elsewhere compiled in this process (`CompiledStep`);
    - 'auto': the kept step where one exists, else `AutoStep` when `sentences` (how many the
      caller will decode) is given, which builds one if that pays, else eager
      (`aiayn.runtime.auto`); eager off the CPU, without a C++ compiler and for other models;
    - False or 'never': eager.

    `label` names the model in the kept files (its directory); `root` is where kept steps live
    (default: `steps/` in the user's cache directory). Outputs equal the model's own up to float
    rounding (int8: up to its quantization).
    """
    from aiayn.runtime.steps import Int8Step, PrepackedStep

    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {list(QUANTIZATIONS)} (or None), got {quantize!r}")
    mode = ("always" if compile else "never") if isinstance(compile, bool) else compile
    if mode not in COMPILE_CHOICES:
        raise ValueError(f"compile must be True, False or one of {list(COMPILE_CHOICES)}, got {compile!r}")
    from aiayn.model.transformer import Transformer

    if mode == "always" and not isinstance(model, Transformer):
        raise ValueError(f"compile applies to translation models, got a {type(model).__name__}")
    on_cpu = next(model.parameters()).device.type == "cpu"
    if mode == "always" and not on_cpu:
        from aiayn.runtime.compiled import CompiledStep

        return CompiledStep(model, quantize)  # type: ignore[arg-type]
    if mode != "never" and isinstance(model, Transformer) and on_cpu:
        from aiayn.runtime.compiled import compiler_available
        from aiayn.runtime.kept import KeptStep, has_kept_step, kept_directory

        if mode == "always":
            return KeptStep(model, quantize, build=True, label=label, root=root)
        if compiler_available():
            location = kept_directory(model, quantize, root)
            if has_kept_step(location[1]):
                return KeptStep(model, quantize, build=False, label=label, location=location)
            if sentences:
                from aiayn.runtime.auto import AutoStep, build_estimate

                return AutoStep(
                    model, quantize, sentences, build_s=build_estimate(location[0], root),
                    make_kept=lambda: KeptStep(model, quantize, build=True, label=label, location=location),
                )
    return Int8Step(model) if quantize == "int8" else PrepackedStep(model)
