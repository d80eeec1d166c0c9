"""The custom operators `aiayn::prepacked_linear` and `aiayn::int8_linear`, registered on first use.

Against the reference: the operators compute nothing of their own. Each calls the kernel of its
layer (`aiayn.runtime.prepacked`, `aiayn.runtime.int8`), whose relation to `aiayn.paper` those
modules state; wrapped so the compiler does not look inside, a compiled step gets the product
the eager layer computes. Proved by
`tests/decoding/test_compiled_decoding.py::test_prepacked_linear_operator_needs_a_prepared_slice`
(the operator's product is x W^T of the plain weights) and
`tests/decoding/test_compiled_decoding.py::test_compiled_beam_and_greedy_search_same_as_eager`.

A compiler cannot trace oneDNN's prepacked weight layout nor the int8 kernel's packed weights,
so inside a compiled decoding step (`aiayn.runtime.compiled`) those kernels are called through
operators opaque to it. An operator's arguments must be tensors the compiler can trace, so each
takes the plain float weight slice (out, in) and finds its prepared form in `PREPARED`, where
the layer that made the slice put it (`prepare`): a `WeakIdKeyDictionary`, keyed by the slice
itself, so an entry leaves with its slice (and with the layer that holds it). The eager call
runs the same function.

Nothing is registered at import: `register_operators()` runs when a runtime layer is made.
"""

from __future__ import annotations

import functools
import threading

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

from aiayn.runtime.cpu import cpu_flags

PREPARED: WeakIdKeyDictionary = WeakIdKeyDictionary()
"""weight slice (by identity, weakly) -> its prepared form; an entry leaves with its slice."""


def prepare(weight: Tensor, prepared: object) -> None:
    """Record `prepared` as the kernel-ready form of the weight slice `weight` (out, in)."""
    PREPARED[weight] = prepared


def prepared_form(weight: Tensor, operator: str) -> object:
    """The form `prepare` recorded for `weight`; a one-line error for any other tensor."""
    prepared = PREPARED.get(weight)
    if prepared is None:
        raise RuntimeError(f"aiayn::{operator} needs a weight slice prepared by its layer (aiayn.runtime)")
    return prepared


@functools.cache
def reduce_range() -> bool:
    """Quantize the int8 kernel's input to 7 bits, not 8 (`quantized::linear_dynamic`'s
    reduce_range), where the CPU lacks VNNI: its 16-bit intermediate sums could saturate
    (benchmarks/RESULTS.md has the BLEU of both)."""
    return not ({"avx512_vnni", "avx_vnni"} & cpu_flags())


def prepacked_linear_cpu(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """(N, in) -> (N, out) = x W^T + b through the oneDNN prepacked form of `weight` (out, in)."""
    prepacked = prepared_form(weight, "prepacked_linear")
    return torch.ops.mkldnn._linear_pointwise(x, prepacked, bias, "none", [], "")


def int8_linear_cpu(x: Tensor, weight: Tensor) -> Tensor:
    """(N, in) float32 -> (N, out) through the packed int8 weights (and bias) of `weight` (out, in),
    those of the kernel faster for N rows (`aiayn.runtime.int8.PackedInt8`)."""
    packed = prepared_form(weight, "int8_linear").for_rows(x.size(0))
    return torch.ops.quantized.linear_dynamic(x, packed, reduce_range())


_REGISTERING = threading.Lock()
"""Held while the operators are defined: `functools.cache` alone lets two threads loading models
at once (e.g. rows scored side by side) both define them, and the second definition fails."""


def register_operators() -> torch.library.Library:
    """Define both operators (once, whichever threads call; later calls return the same library)."""
    with _REGISTERING:
        return _define_operators()


@functools.cache
def _define_operators() -> torch.library.Library:
    # Registered with the dispatcher directly (not `torch.library.custom_op`, whose Python
    # wrapper costs several times the dispatch of a small product, on every call of a step).
    library = torch.library.Library("aiayn", "FRAGMENT")
    library.define("prepacked_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor")
    library.impl("prepacked_linear", prepacked_linear_cpu, "CPU")
    library.define("int8_linear(Tensor x, Tensor weight) -> Tensor")
    library.impl("int8_linear", int8_linear_cpu, "CPU")

    def output_like(x: Tensor, weight: Tensor, *_: object) -> Tensor:
        return x.new_empty(x.size(0), weight.size(0))

    torch.library.register_fake("aiayn::prepacked_linear", output_like, lib=library)
    torch.library.register_fake("aiayn::int8_linear", output_like, lib=library)
    return library
