"""The compiled decoding step, kept: built once per model, PyTorch and CPU, then loaded by later
processes without tracing again.

Against the reference: `aiayn.paper.greedy_decode` re-runs the decoder over the whole prefix at
every step; this is the cached step compiled as `aiayn.runtime.compiled` compiles it (the same
network, attention written element-wise, the same compiler options), saved and read back, so its
outputs are the compiled step's: the eager step's up to float rounding, the same tokens. Proved by
`tests/runtime/test_kept.py::test_a_second_process_reuses_the_kept_step_and_decodes_as_eager`
(a process that loads it translates as the eager decoder) and
`tests/decoding/test_compiled_decoding.py::test_compiled_beam_and_greedy_search_same_as_eager`.

`CompiledStep` pays the compile in every process: PyTorch's on-disk caches keep Inductor's code,
but Dynamo still traces the step each time, which is most of the wait. Two ways keep the whole
step instead, and this module takes the first:

- Dynamo's precompile (`torch.compile(f).aot_compile(...)`, `torch.compiler.load_compiled_function`):
  the traced graph, its generated code and its guards serialized together. It takes the step as
  it is (the cache a Python object, the prepared weights found through the network's modules), and
  loading it is a fraction of a second plus the import of the compiler's runtime.
- AOTInductor (`torch.export`, `aoti_compile_and_package`): a shared library that needs no Python
  tracer at all, but a functional step (cache tensors and lengths in and out) and every prepared
  weight as a tensor argument, not found by identity (`aiayn.runtime.operators`): a second
  decoder, to keep equal to the first.

benchmarks/RESULTS.md has the measurements behind the choice (build, load, size, first output).

A precompiled function holds one graph and one set of guards, so the step is kept as a few
*variants*, by what PyTorch specialises a graph on (sizes of 1, the model's branch on groups):
`beam-many`, `beam-one` (beams of several sentences, or of one), `greedy-many`, `greedy-one`,
`greedy-single` (one row per sentence: greedy search and sampling; one sentence left of several,
or a single sentence from the start). Each is built when a decode first needs it (`build=True`)
and kept (`aiayn.runtime.kept_store`: key, files, locking). Every call still checks the variant's
guards (shapes, dtypes, threads); a call they refuse, a variant not kept (`build=False`), and a
step that grows the cache run eagerly, so no input is refused. A step without a source padding
mask gets one that masks nothing (one variant fewer; the same attention).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.model.kv_cache import DecoderCache
from aiayn.model.transformer import Transformer
from aiayn.runtime.compiled import COMPILE_OPTIONS, CompiledStep
from aiayn.runtime.kept_store import (
    KERNELS,
    SUFFIX,
    DamagedArtifact,
    StaleArtifact,
    build_lock,
    key_digest,
    read_artifact,
    step_key,
    steps_dir,
    write_artifact,
)
from aiayn.runtime.prepacked import RuntimeLinear

log = logging.getLogger("aiayn.runtime")

VARIANTS = ("beam-many", "beam-one", "greedy-many", "greedy-one", "greedy-single")
_NOT_LOOKED_UP = object()


def variant_of(memory: Tensor, cache: DecoderCache, groups: int) -> str:
    """The kept variant a step of these shapes runs (see the module doc)."""
    one = memory.size(0) == 1
    if groups > 1:
        return "beam-one" if one else "beam-many"
    if not one:
        return "greedy-many"
    return "greedy-single" if cache.self_attention[0].row_capacity == 1 else "greedy-one"


def kept_directory(model: Transformer, quantize: str | None, root: Path | None = None) -> tuple[dict, Path]:
    """(key, folder) of `model`'s kept steps (`aiayn.runtime.kept_store`)."""
    key = step_key(model, quantize)
    return key, (steps_dir() if root is None else root) / key_digest(key)


def has_kept_step(directory: Path) -> bool:
    """Whether a kept step folder holds any variant (checked whole when loaded)."""
    return any(directory.glob(f"*{SUFFIX}"))


class KeptStep(CompiledStep):
    """`CompiledStep` whose compiled variants are kept on disk (see the module doc).

    Args:
        model: a `Transformer` on the CPU that is no longer trained (not changed).
        quantize: "int8" for int8 linear layers (as `CompiledStep`).
        build: build (and keep) a variant that is not kept yet; False: run it eagerly.
        label: what the kept files name as their model (e.g. its directory), for `aiayn cache list`.
        root: the folder of kept steps (default `kept_store.steps_dir()`).
        location: (key, folder) of the step (`kept_directory`), when the caller has computed it.
    """

    def __init__(
        self, model: Transformer, quantize: str | None = None, build: bool = True, label: str | None = None,
        root: Path | None = None, location: tuple[dict, Path] | None = None,
    ) -> None:
        super().__init__(model, quantize)
        self.build, self.label = build, label
        self.key, self.directory = location if location is not None else kept_directory(model, quantize, root)
        self.variants: dict[str, Any] = {}  # variant -> its compiled function, or None (eager)
        self.built: list[str] = []  # variants this process built (the others were loaded)
        self.calls = Counter()  # steps run by a kept variant ('kept') and eagerly ('eager')
        self._arguments = list(inspect.signature(Transformer.incremental_step).parameters)

    def step(
        self, last: Tensor, memory: Tensor, src_padding_mask: Tensor | None, cache: DecoderCache,
        groups: int = 1,
    ) -> Tensor:
        """`EagerStep.step`, through the kept variant these shapes need (built or loaded on first
        use), eagerly where there is none or its guards refuse the call."""
        function = None
        if cache.has_room(last.size(1)):
            variant = variant_of(memory, cache, groups)
            function = self.variants.get(variant, _NOT_LOOKED_UP)
            if function is _NOT_LOOKED_UP:
                function = self.variants[variant] = self._obtain(variant)
        if function is not None:
            if src_padding_mask is None:  # (b, S), masking nothing
                src_padding_mask = memory.new_ones(memory.shape[:2], dtype=torch.bool)
            values = (self.network, last, memory, src_padding_mask, cache, groups)
            # The guards checked directly: the function's own call first binds the arguments
            # through `inspect.Signature`, which costs as much as a small step's arithmetic.
            if function._artifacts.guard_manager.check(dict(zip(self._arguments, values, strict=True))):
                self.calls["kept"] += 1
                return function.fn(*values)
        self.calls["eager"] += 1
        return self._eager_step(last, memory, src_padding_mask, cache, groups)

    def path(self, variant: str) -> Path:
        """The file of a kept variant."""
        return self.directory / f"{variant}{SUFFIX}"

    def kernels(self) -> contextlib.AbstractContextManager:
        """Inductor's cache directory set to the kept steps' own (`kernels/` beside their
        folders) while a step builds or loads, then put back: a kept file holds the generated
        code, whose compiled C++ kernels are looked up by their source there (Inductor's default,
        in /tmp, would not outlive a reboot: loading would compile them again). Shared by every
        kept step: a model retrained with the same settings generates the same kernels."""
        from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

        return temporary_cache_dir(str(self.directory.parent / KERNELS))

    # ------------------------------------------------------------------ loading and building
    def _obtain(self, variant: str) -> Any:
        """The variant's compiled function: loaded if kept, else built and kept (`build`), else None."""
        function, problem = self._load(variant)
        if function is not None or not self.build:
            if problem is not None:
                log.warning("aiayn: %s; decoding that variant eagerly (--compile builds it again)", problem)
            return function
        try:
            with build_lock(self.directory):  # another process may be building it: wait, then load
                function, problem = self._load(variant)
                if function is not None:
                    return function
                if problem is not None:
                    log.warning("aiayn: %s; building it again", problem)
                return self._build(variant)
        except OSError as error:  # the cache directory cannot be written: decoding goes on
            log.warning("aiayn: cannot keep the decoding step in %s (%s); decoding that variant eagerly",
                        self.directory, error.strerror or error)
        except Exception as error:  # a compile that fails leaves the eager step, which is exact
            log.warning("aiayn: compiling the decoding step (%s) failed (%s: %s); decoding it eagerly",
                        variant, type(error).__name__, str(error).splitlines()[0][:160] if str(error) else "")
        return None

    def _load(self, variant: str) -> tuple[Any, str | None]:
        """(the kept variant's function or None, why a kept file was not used or None)."""
        import torch._inductor.config

        path = self.path(variant)
        started = time.perf_counter()
        try:
            found = read_artifact(path, self.key)
            if found is None:
                return None, None
            payload = found[1]
            # The processor's vector instructions were probed when the step was built, on a CPU
            # with these flags (the key): not again, in subprocesses, on every load.
            with self.kernels(), torch._inductor.config.patch({"cpp.vec_isa_ok": True}):
                function = torch.compiler.load_compiled_function(io.BytesIO(payload))
        except StaleArtifact as error:
            return None, f"kept decoding step {path} not used: {error}"
        except DamagedArtifact as error:
            return None, f"kept decoding step {path} is damaged: {error}"
        except Exception as error:  # whatever unpickling a damaged payload raises
            return None, f"kept decoding step {path} is damaged: {type(error).__name__}: {str(error)[:120]}"
        log.info("aiayn: kept decoding step (%s, %s) loaded in %.1f s from %s",
                 variant, megabytes(len(payload)), time.perf_counter() - started, path)
        return function, None

    def _build(self, variant: str) -> Any:
        """Trace and compile the variant on an example of its shapes, and keep it."""
        log.info("aiayn: building the decoding step (%s) once for this model, torch and CPU: "
                 "usually tens of seconds; later runs load it", variant)
        started = time.perf_counter()
        arguments = self.example(variant)
        compiled = torch.compile(
            Transformer.incremental_step, fullgraph=True, dynamic=True,
            options=COMPILE_OPTIONS | {"guard_filter_fn": torch.compiler.keep_portable_guards_unsafe},
        )
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.kernels())
            stack.enter_context(torch.no_grad())
            stack.enter_context(self.static_weights())
            # A Python float read in the step (a scale) is a constant, not a graph input; equal
            # sizes are not assumed equal (a batch of 8 with sources of 8 tokens is no rule).
            stack.enter_context(torch._dynamo.config.patch(specialize_float=True))
            stack.enter_context(torch.fx.experimental._config.patch(use_duck_shape=False))
            function = compiled.aot_compile((arguments, {}))  # type: ignore[attr-defined]
            payload = type(function).serialize(function).serialized_data
        build_s = time.perf_counter() - started
        write_artifact(self.path(variant), self.key, variant, payload, build_s, self.label)
        self.built.append(variant)
        log.info("aiayn: decoding step (%s) built in %.0f s and kept: %s, %s",
                 variant, build_s, self.path(variant), megabytes(len(payload)))
        return function

    def example(self, variant: str) -> tuple:
        """Arguments of `incremental_step` with the variant's shapes, each size that may vary
        marked dynamic: distinct sizes (3 sentences of 11 tokens, 4 beams), after one eager step."""
        config = self.config
        sentences = 1 if variant in ("beam-one", "greedy-single") else 3
        groups = 4 if variant.startswith("beam") else 1
        specials = {config.pad_id, config.bos_id, config.eos_id}
        word = next(i for i in range(config.src_vocab_size) if i not in specials)
        src = torch.full((sentences, 11), word)
        src[:, -1] = config.eos_id
        device = next(self.model.parameters()).device
        src = src.to(device)
        mask = torch.ones_like(src, dtype=torch.bool)
        with torch.no_grad():
            memory = self.encode(src, mask)
            cache = self.new_cache()
            last = torch.full((sentences * groups, 1), config.bos_id, device=device)
            self._eager_step(last, memory, mask, cache, groups)
            if variant == "greedy-one":  # one sentence left of three: the cache keeps three rows
                keep = torch.tensor([1], device=device)
                last, memory, mask = last[keep], memory[keep], mask[keep]
                cache.reorder(keep)
        for tensor, dims in ((last, (0,)), (memory, (0, 1)), (mask, (0, 1))):
            mark_dynamic(tensor, dims)
        for layer in (*cache.self_attention, *cache.cross_attention):
            for tensor, dims in layer.varying():
                mark_dynamic(tensor, dims)
        return self.network, last, memory, mask, cache, groups

    def weight_slices(self) -> list[Tensor]:
        """The network's weight slices (its runtime layers' parts) and the tensors they view."""
        layers = [m for m in self.network.modules() if isinstance(m, RuntimeLinear)]
        parts = [part for layer in layers for part in layer.parts.values()]  # type: ignore[attr-defined]
        slices = [t for part in parts for t in part if isinstance(t, Tensor)]
        return [*slices, *(t._base for t in slices if t._base is not None)]

    @contextlib.contextmanager
    def static_weights(self) -> Iterator[None]:
        """The weight slices marked static while a variant is traced (they never change shape: the
        step's guards then check far fewer sizes), and unmarked after: a variant loaded later
        refuses every call on tensors still marked."""
        slices = self.weight_slices()
        for tensor in slices:
            torch._dynamo.mark_static(tensor)
        try:
            yield
        finally:
            for tensor in slices:
                for name in ("_dynamo_static_indices", "_has_dynamo_dim_marking"):
                    if hasattr(tensor, name):
                        delattr(tensor, name)


def mark_dynamic(tensor: Tensor, dims: tuple[int, ...]) -> None:
    """Mark `dims` of an example tensor as varying, but a size of 1, which PyTorch specialises."""
    for dim in dims:
        if tensor.size(dim) > 1:
            torch._dynamo.mark_dynamic(tensor, dim)


def megabytes(size: int) -> str:
    """A file size for a log line: '0.7 MB'."""
    return f"{size / 1e6:.1f} MB"
