"""A compiled decoding step: `torch.compile` of `Transformer.decode_step`, for inference.

A step of incremental decoding multiplies a few dozen rows by each weight matrix; between
those products it runs some thirty small operators per layer (head split, cache write,
attention over the few cached keys, residual, layer norm), each a separate PyTorch call.
On a CPU the calls cost about as much as the arithmetic. Compiled, the operators between the
products become a few fused loops called from generated code:

- the linear layers stay the pre-packed oneDNN (or int8) kernels, as custom operators the
  compiler does not look into (`aiayn::packed_linear`, `aiayn::int8_linear`);
- attention within a step is written element-wise (`aiayn.model.attention`), which fuses;
- shapes are dynamic (rows leave as sentences finish, the cache grows), so a handful of
  graphs serve every batch;
- the key/value cache is reordered between steps, outside the compiled code, and a step that
  allocates (the first, which also projects the encoder output's keys and values, and one
  that outgrows the cache's buffers) runs eagerly. The cache's buffers keep one position
  spare (a view covering a whole buffer would be another layout, compiled again).

The outputs are those of the eager step up to float rounding (sums in another order).
Compiling takes tens of seconds before the first batch (and needs a C++ compiler), so it is
opt-in: `aiayn.load(..., compile=True)`, `aiayn translate --compile`.
"""

from __future__ import annotations

import shutil

import torch
from torch import Tensor

from aiayn.eval_mode import eval_mode
from aiayn.model.kv_cache import DecoderCache
from aiayn.model.transformer import Transformer


def compiler_available() -> bool:
    """True where torch.compile can build its CPU code (a C++ compiler on the PATH)."""
    return any(shutil.which(name) for name in ("g++", "c++", "clang++"))


def compile_decoding(model: Transformer) -> Transformer:
    """Replace `model.decode_step` by its compiled version, in place; returns the model.

    For a model that is no longer trained, after `pack_for_inference` or `quantize_int8`
    (their weight slices are made here, once, by one eager step).
    """
    if next(model.parameters()).device.type == "cpu" and not compiler_available():
        raise RuntimeError("compiling the decoding step on CPU needs a C++ compiler (g++ or clang++)")
    with eval_mode(model):
        src = torch.full((1, 1), model.config.eos_id, device=next(model.parameters()).device)
        last = torch.full((1, 1), model.config.bos_id, device=src.device)
        model.decode_step(last, model.encode(src), None, model.new_cache())  # makes every weight slice
    eager_step = model.decode_step
    # Guards on the model's modules would be checked on every call; the model does not change
    # after this point (weights, structure), so only the inputs are guarded. The generated code's
    # checks of each kernel's output shapes (debugging aids) are left out for the same reason.
    options = {
        "guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe,
        "size_asserts": False,
        "alignment_asserts": False,
        "scalar_asserts": False,
    }
    compiled_step = torch.compile(eager_step, dynamic=True, options=options)

    def decode_step(
        last: Tensor, memory: Tensor, src_padding_mask: Tensor | None, cache: DecoderCache
    ) -> Tensor:
        step = compiled_step if cache.has_room(last.size(1)) else eager_step
        return step(last, memory, src_padding_mask, cache)

    model.decode_step = decode_step  # type: ignore[method-assign]
    return model
