"""aiayn's own language-model generation: sampling in PyTorch with the key/value cache.

    generator = aiayn.load("runs/shakespeare_char")
    generator.generate("ROMEO:", max_new_tokens=100, temperature=0.8, seed=1)
    for piece in generator.generate_stream("ROMEO:"):
        print(piece, end="")

Each round of `aiayn.inference.base.GeneratorBase` runs `aiayn.decoding.sampling.sample_stream`,
which feeds the prompt in one batched forward pass (filling the cache) and then one token a step.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from aiayn.data.tokenizer import Tokenizer
from aiayn.decoding.sampling import Sampling, sample_stream
from aiayn.inference.base import GeneratorBase, TorchBackend
from aiayn.model.decoder_only import DecoderOnlyLM
from aiayn.runtime.steps import StepRunner


class TorchGenerator(TorchBackend, GeneratorBase):
    """A `DecoderOnlyLM` and its tokenizer, ready to continue text (`aiayn.inference.Generator`).

    Args:
        model: a trained `DecoderOnlyLM` (put in eval mode while generating, then returned
            to its previous mode), or the step runner that computes one (`aiayn.runtime.steps`).
        tokenizer: the tokenizer it was trained with.
        directory: the model directory it came from, if any.
    """

    def __init__(
        self, model: DecoderOnlyLM | StepRunner, tokenizer: Tokenizer, directory: Path | None = None
    ) -> None:
        self._hold(model, DecoderOnlyLM, "generation needs a decoder-only language model")
        super().__init__(model.config, tokenizer, directory)

    def _round(
        self, prompt_ids: list[int], count: int, sampling: Sampling, seed: int, stop_ids: set[int]
    ) -> Iterator[int]:
        return sample_stream(self.runner, prompt_ids, count, sampling, seed, stop_ids)
