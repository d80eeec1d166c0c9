"""`compile='auto'`: the decoding step compiled where that pays, eager elsewhere.

Against the reference: nothing of its own; it computes through the eager runner
(`aiayn.runtime.steps`) or the kept compiled step (`aiayn.runtime.kept`), whose relations to
`aiayn.paper` those modules state.

`accelerate(model, compile='auto')` (`aiayn.runtime`) chooses:

- a kept step of the model exists (`aiayn.runtime.kept.has_kept_step`): `KeptStep(build=False)`,
  which loads what is kept and runs the rest eagerly (a start-up of a second, never a build);
- else, when the caller knows how many sentences it will decode (`sentences`: `aiayn translate
  --input FILE`, `aiayn evaluate`): `AutoStep`, which decodes eagerly while it measures, then
  builds the kept step if the eager time left would pay for it (`pays_to_build`);
- else (a few lines, stdin, `aiayn serve`): the eager runner.

The estimate: after `MEASURE_S` seconds of eager steps, the eager time left is the time per
sentence so far times the sentences left; compiling saves `COMPILED_SAVES` of it; building costs
the seconds the kept steps on this machine recorded (`build_estimate`). Once decided, it stays.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from aiayn.runtime.kept_store import kept_entries
from aiayn.runtime.steps import EagerStep, Int8Step, PrepackedStep

log = logging.getLogger("aiayn.runtime")

MEASURE_S = 2.0
"""Seconds of eager steps measured before the eager time left is projected from them."""

COMPILED_SAVES = 0.1
"""The share of eager decoding time a compiled step saves, taken low: the smallest speed-up
benchmarks/RESULTS.md records for a compiled beam search on a trained model ('Decoding')."""

DEFAULT_BUILD_S = 60.0
"""Seconds to build one variant when no kept step on this machine has recorded its build."""

VARIANTS_PER_DECODE = 2
"""Variants a decode of many sentences builds: several sentences, then the last one alone."""


def build_estimate(key: dict[str, Any], root: Path | None = None) -> float:
    """Seconds to build the variants a decode needs: from the build times kept steps on this
    machine recorded (those of the same model configuration when there are any, else the
    slowest of all), else `DEFAULT_BUILD_S` each."""
    usable = [e.header for e in kept_entries(root) if e.header is not None and e.usable_here]
    same = [float(h["build_s"]) for h in usable if h["key"].get("config") == key.get("config")]
    recorded = same or [float(h["build_s"]) for h in usable]
    per_variant = (sum(same) / len(same)) if same else max(recorded, default=DEFAULT_BUILD_S)
    return VARIANTS_PER_DECODE * per_variant


def pays_to_build(eager_s: float, done: int, left: int, build_s: float) -> bool:
    """Whether building saves time: `eager_s` seconds for `done` sentences, `left` to go."""
    return done > 0 and eager_s / done * left * COMPILED_SAVES > build_s


class AutoStep:
    """A step runner that decodes eagerly, then switches to a kept compiled step when the
    sentences left make building one pay (see the module doc).

    Args:
        model: a `Transformer` on the CPU that is no longer trained (not changed).
        quantize: "int8" or None, as `accelerate`.
        sentences: how many sentences the caller will decode.
        make_kept: makes the `KeptStep` (building) when it pays.
        build_s: the estimated build time (`build_estimate`).
    """

    def __init__(
        self, model: nn.Module, quantize: str | None, sentences: int, make_kept: Any, build_s: float,
    ) -> None:
        self.current: EagerStep = Int8Step(model) if quantize == "int8" else PrepackedStep(model)
        self.sentences, self.make_kept, self.build_s = sentences, make_kept, build_s
        self.encoded, self.eager_s, self.decided = 0, 0.0, False

    @property
    def model(self) -> nn.Module:
        return self.current.model

    @property
    def network(self) -> nn.Module:
        return self.current.network

    @property
    def config(self) -> Any:
        return self.current.config

    def encode(self, src: Tensor, src_padding_mask: Tensor | None = None) -> Any:
        """`EagerStep.encode`; a new batch is where the runner may switch (its cache is new)."""
        if not self.decided and self.encoded and self.eager_s >= MEASURE_S:
            self.decide()
        self.encoded += src.size(0)
        return self.current.encode(src, src_padding_mask)

    def decide(self) -> None:
        """Switch to the kept step if building it pays (once)."""
        self.decided = True
        left = max(self.sentences - self.encoded, 0)
        if pays_to_build(self.eager_s, self.encoded, left, self.build_s):
            log.info("aiayn: compiling the decoding step (--compile auto): %d sentences left, about "
                     "%.0f s of eager decoding against about %.0f s to build (once; later runs load it)",
                     left, self.eager_s / self.encoded * left, self.build_s)
            self.current = self.make_kept()

    def new_cache(self) -> Any:
        return self.current.new_cache()

    def step(
        self, last: Tensor, memory: Any, src_padding_mask: Tensor | None, cache: Any, groups: int = 1
    ) -> Tensor:
        """The current runner's step (timed while it is the eager one)."""
        if self.decided:
            return self.current.step(last, memory, src_padding_mask, cache, groups)
        started = time.perf_counter()
        logits = self.current.step(last, memory, src_padding_mask, cache, groups)
        self.eager_s += time.perf_counter() - started
        return logits

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        return self.current(*args, **kwargs)

    def __repr__(self) -> str:
        return f"AutoStep({self.current!r})"
