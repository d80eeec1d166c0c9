"""Shared pieces of the tests of `aiayn.paper` against the engine."""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn import paper
from aiayn.data.batching import Batch, make_batch
from aiayn.data.special_tokens import SpecialTokens
from aiayn.model import ModelConfig, Transformer


def twins(config: ModelConfig) -> tuple[Transformer, paper.Transformer]:
    """An engine `Transformer` (freshly initialised) and a paper one holding its weights."""
    engine = Transformer(config)
    reference = paper.from_config(config)
    reference.load_state_dict(paper.paper_state_dict(engine.state_dict()))
    return engine, reference


def random_batch(config: ModelConfig, seed: int, rows: int = 4) -> Batch:
    """A padded batch of random sentence pairs of different lengths (no special id inside)."""
    generator = torch.Generator().manual_seed(seed)
    specials = SpecialTokens.of(config)
    allowed = [t for t in range(min(config.src_vocab_size, config.tgt_vocab_size)) if t not in
               (config.pad_id, config.bos_id, config.eos_id)]

    def sentence() -> list[int]:
        length = int(torch.randint(1, 9, (1,), generator=generator))
        return [allowed[int(i)] for i in torch.randint(len(allowed), (length,), generator=generator)]

    return make_batch([sentence() for _ in range(rows)], [sentence() for _ in range(rows)], specials=specials)


def engine_log_probs(engine: Transformer, batch: Batch) -> Tensor:
    """(B, T, V) log-probabilities of the engine's teacher-forced pass."""
    return torch.log_softmax(engine(batch.src, batch.tgt_in), dim=-1)


def assert_equal_at_targets(expected: Tensor, actual: Tensor, batch: Batch) -> None:
    """The (B, T, V) log-probabilities agree at every non-pad target position (float32 bounds)."""
    real = batch.labels != batch.pad_id  # (B, T)
    assert bool((~real).any()), "the batch should hold padding"
    torch.testing.assert_close(actual[real], expected[real], rtol=1e-4, atol=1e-6)


def perturb(model: paper.Transformer) -> None:
    """Change one weight of `model` a little (the negative controls)."""
    with torch.no_grad():
        model.decoder.layers[0].cross_attention.w_v.weight[0, 0] += 0.05
