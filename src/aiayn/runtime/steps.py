"""Step runners: the one interface through which a search computes a model.

A search (`aiayn.decoding`) encodes the source once, opens a key/value cache and asks for the
next token's logits once per step; a step runner is what it asks:

    runner = Int8Step(model)                       # or EagerStep, PrepackedStep, CompiledStep
    memory = runner.encode(src, src_padding_mask)  # (B, S, D)
    cache = runner.new_cache()
    logits = runner.step(last, memory, src_padding_mask, cache, groups)  # (B, 1) -> (B, V) float32

- `EagerStep(model)`: the model's own modules and `incremental_step`;
- `PrepackedStep(model)`: linear layers with oneDNN's prepacked weights (`aiayn.runtime.prepacked`;
  the model's own where they cannot be prepacked: not float32 on the CPU);
- `Int8Step(model)`: int8 linear layers (`aiayn.runtime.int8`);
- `CompiledStep(model, quantize=None)`: the step compiled (`aiayn.runtime.compiled`);
  `KeptStep`, the same kept on disk for later processes (`aiayn.runtime.kept`); `AutoStep`,
  eager until building a kept step pays (`aiayn.runtime.auto`).

None of them changes the model: a runner whose layers differ from the model's runs its own
`network` (`aiayn.runtime.network`: the model's modules copied around the model's parameters),
`network` being the model itself for `EagerStep`. `runner(src, tgt_in)` is the teacher-forced
pass of the same network (scores, attention). `as_runner` turns a model into its `EagerStep`
and leaves a runner (an `aiayn.inference.Ensemble` too) as it is, so every search takes either.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from torch import Tensor, nn

from aiayn.runtime.int8 import int8_network
from aiayn.runtime.prepacked import prepackable, prepacked_network


@runtime_checkable
class StepRunner(Protocol):
    """What a search calls (see the module doc); `model` is the model computed, `network` the
    module computing it (the searches put it in eval mode for the call), `config` the model's
    settings."""

    model: nn.Module
    network: nn.Module
    config: Any

    def encode(self, src: Tensor, src_padding_mask: Tensor | None = None) -> Any: ...

    def new_cache(self) -> Any: ...

    def step(
        self, last: Tensor, memory: Any, src_padding_mask: Tensor | None, cache: Any, groups: int = 1
    ) -> Tensor: ...


class EagerStep:
    """A model computed by its own modules: `step` is its `incremental_step`.

    Args:
        model: the `Transformer` (or `DecoderOnlyLM`, whose runner serves its `network` alone).
        network: the module to compute with (default: the model itself); a subclass passes its
            own copy (`aiayn.runtime.network`).
    """

    def __init__(self, model: nn.Module, network: nn.Module | None = None) -> None:
        self.model = model
        self.network = model if network is None else network

    @property
    def config(self) -> Any:
        return self.model.config

    def encode(self, src: Tensor, src_padding_mask: Tensor | None = None) -> Tensor:
        """(B, S) source ids -> (B, S, D) encoder output (`Transformer.encode`)."""
        return self.network.encode(src, src_padding_mask)

    def new_cache(self) -> Any:
        """An empty key/value cache for `step`."""
        return self.network.new_cache()

    def step(
        self, last: Tensor, memory: Tensor, src_padding_mask: Tensor | None, cache: Any, groups: int = 1
    ) -> Tensor:
        """last (B, 1), memory (B, S, D) or (b, S, D) shared by `groups` consecutive rows
        (B = groups * b), src_padding_mask (b, S) or None, cache (filled in place) -> (B, V)
        float32 logits of the next token (`Transformer.incremental_step`)."""
        return self.network.incremental_step(last, memory, src_padding_mask, cache, groups)

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        """The network's teacher-forced pass (`model(src, tgt_in)`'s arguments and result)."""
        return self.network(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.model).__name__})"


class PrepackedStep(EagerStep):
    """The model with prepacked linear layers (`aiayn.runtime.prepacked`); its own layers where
    prepacking does not apply (not float32 on the CPU, no oneDNN)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__(model, prepacked_network(model) if prepackable(model) else None)


class Int8Step(EagerStep):
    """The model with int8 linear layers (`aiayn.runtime.int8`)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__(model, int8_network(model))


def as_runner(model: nn.Module | StepRunner) -> StepRunner:
    """A runner as it is; a model as its `EagerStep`."""
    return model if isinstance(model, StepRunner) else EagerStep(model)
