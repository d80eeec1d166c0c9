"""A compiled decoding step: `torch.compile` of `Transformer.incremental_step`, for inference.

Against the reference: `aiayn.paper.greedy_decode` re-runs the decoder over the whole prefix at
every step; the engine's step reads earlier keys and values from its cache, and compiled, that
step's operators run as generated loops, attention written element-wise: the same arithmetic in
another order, so the outputs are equal up to float rounding and the chosen tokens the same.
Proved link by link: `tests/runtime/test_runtime.py::test_elementwise_attention_is_eq_1`,
`tests/decoding/test_compiled_decoding.py::test_compiled_beam_and_greedy_search_same_as_eager`
(compiled and eager search find the same hypotheses on the trained `dates` model), and
`tests/paper/test_equality.py::test_dates_model_log_probs_and_greedy_outputs_equal` (the eager
engine's greedy outputs are the reference's).

A step of incremental decoding multiplies a few dozen rows by each weight matrix; between
those products it runs some thirty small operators per layer (head split, cache write,
attention over the few cached keys, residual, layer norm), each a separate PyTorch call.
On a CPU the calls cost about as much as the arithmetic. Compiled, the operators between the
products become a few fused loops called from generated code:

- the linear layers stay the prepacked oneDNN (or int8) kernels, as custom operators the
  compiler does not look into (`aiayn.runtime.operators`);
- attention within a step is written element-wise (`elementwise_attention`), which the compiler
  fuses into one loop over the few keys of a step instead of calling the fused kernel once
  per head; it is the `attention` of the decoder's multi-head attention layers;
- shapes are dynamic (rows leave as sentences finish, the cache grows), so a handful of
  graphs serve every batch;
- the self-attention cache is `aiayn.runtime.beam_history`'s: beam search's reorder between
  steps moves no key or value, and attention's loop reads each row's keys through the row's
  ancestry; a step that allocates (the first, which also projects the encoder output's keys
  and values, and one that outgrows the cache's buffers) runs eagerly.

The outputs are those of the eager step up to float rounding (sums in another order).
Compiling takes tens of seconds before the first batch (and needs a C++ compiler), and Dynamo
traces the step again in every process; on the CPU, `aiayn.load(..., compile=True)` and
`aiayn translate --compile` therefore run `KeptStep` (`aiayn.runtime.kept`), this step built once
and kept on disk, and `CompiledStep` itself runs elsewhere (CUDA). What is compiled is the
model's own step (`Transformer.incremental_step`) on the runner's network
(`aiayn.runtime.network`: the model's modules copied around its parameters, with the runtime's
linear layers and attention); `CompiledStep(model)` is the step runner
(`aiayn.runtime.steps`), and the model itself is not changed.
"""

from __future__ import annotations

import functools
import math
import shutil
from typing import Any

import torch
from torch import Tensor

from aiayn.model.attention import scaled_dot_product_attention
from aiayn.model.kv_cache import DecoderCache
from aiayn.model.multi_head_attention import MultiHeadAttention
from aiayn.model.transformer import Transformer
from aiayn.runtime.beam_history import BeamHistoryCache
from aiayn.runtime.int8 import Int8Linear
from aiayn.runtime.network import network_of
from aiayn.runtime.operators import register_operators
from aiayn.runtime.prepacked import PrepackedLinear, prepackable
from aiayn.runtime.steps import EagerStep

COMPILE_OPTIONS = {
    "size_asserts": False, "alignment_asserts": False, "scalar_asserts": False,
    "assert_indirect_indexing": False,
}
"""Inductor's options for the step (also the kept one's, `aiayn.runtime.kept`): the generated code's
checks of each kernel's output shapes and of each index it reads are debugging aids: the step's
network does not change, and its indices (token ids, the cache's slots) are in range by
construction."""


def compiler_available() -> bool:
    """True where torch.compile can build its CPU code (a C++ compiler on the PATH)."""
    return any(shutil.which(name) for name in ("g++", "c++", "clang++"))


class CompiledStep(EagerStep):
    """A `Transformer`'s decoding step compiled with `torch.compile` (see the module doc).

    Args:
        model: a `Transformer` that is no longer trained (not changed).
        quantize: "int8" for int8 linear layers; None: prepacked ones (float32 CPU models),
            else the model's own.

    The network's weight slices are made here, once, by one eager step; the step compiles
    on its first call with room in the cache.
    """

    def __init__(self, model: Transformer, quantize: str | None = None) -> None:
        if next(model.parameters()).device.type == "cpu" and not compiler_available():
            raise RuntimeError("compiling the decoding step on CPU needs a C++ compiler (g++ or clang++)")
        register_operators()
        layer = Int8Linear if quantize == "int8" else PrepackedLinear if prepackable(model) else None
        network = network_of(model, layer)
        for module in network.decoder.modules():
            if isinstance(module, MultiHeadAttention):
                module.attention = step_attention  # the network's own layer, not the model's
        super().__init__(model, network)
        src = torch.full((1, 1), model.config.eos_id, device=next(model.parameters()).device)
        last = torch.full((1, 1), model.config.bos_id, device=src.device)
        with torch.no_grad():
            network.incremental_step(last, network.encode(src), None, self.new_cache())  # every weight slice
        self._eager_step = network.incremental_step

    @functools.cached_property
    def _compiled_step(self) -> Any:
        """The step wrapped by `torch.compile` (which compiles on its first call), made when
        first asked for: making it imports the compiler, which a `KeptStep` that loads its
        step does not need."""
        # Guards on the network's modules would be checked on every call; it does not change
        # after this point (weights, structure), so only the inputs are guarded.
        options = COMPILE_OPTIONS | {"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}
        return torch.compile(self._eager_step, dynamic=True, options=options)

    def new_cache(self) -> DecoderCache:
        """An empty cache whose beams are reordered without copying keys (`BeamHistoryCache`)."""
        return DecoderCache.empty(self.config.num_decoder_layers, BeamHistoryCache)

    def step(
        self, last: Tensor, memory: Tensor, src_padding_mask: Tensor | None, cache: DecoderCache,
        groups: int = 1,
    ) -> Tensor:
        """`EagerStep.step`, compiled where the step only writes into the cache's buffers."""
        step = self._compiled_step if cache.has_room(last.size(1)) else self._eager_step
        return step(last, memory, src_padding_mask, cache, groups)


def step_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, **options: Any
) -> tuple[Tensor, Tensor | None]:
    """`scaled_dot_product_attention` (same arguments; `options`: its keyword ones), written
    element-wise while compiled."""
    if torch.compiler.is_compiling() and not options.get("need_weights") and not options.get("dropout"):
        return elementwise_attention(query, key, value, mask, options.get("is_causal", False)), None
    return scaled_dot_product_attention(query, key, value, mask, **options)


def elementwise_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, is_causal: bool
) -> Tensor:
    """Eq. 1 as products and sums over d_k and S, for a compiled step (see the module doc).

    query (B, H, T, d_k), key (B, H, S, d_k), value (B, H, S, d_v), mask broadcastable to
    (B, H, T, S) (True = may attend); returns (B, H, T, d_v).
    """
    scale = 1.0 / math.sqrt(query.size(-1))
    scores = (query[:, :, :, None, :] * key[:, :, None, :, :]).sum(-1) * scale  # (B, H, T, S)
    if mask is None and is_causal:
        T, S = scores.shape[-2:]
        mask = torch.ones(T, S, dtype=torch.bool, device=scores.device).tril(diagonal=S - T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    probabilities = scores.softmax(dim=-1)
    if mask is not None:  # all keys blocked: zero weights, as the other paths
        probabilities = probabilities.masked_fill(~mask, 0.0)
    return (probabilities[..., None] * value[:, :, None, :, :]).sum(-2)  # (B, H, T, d_v)
