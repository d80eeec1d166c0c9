"""Sampling text from a decoder-only language model, token by token, with the key/value cache.

Each step draws the next token from softmax(logits / temperature), optionally restricted to
the k most probable tokens (top-k) or to the smallest set whose probability reaches p
(nucleus, top-p; Holtzman et al. 2020). Temperature 0 takes the arg-max (greedy).

Randomness comes only from a `torch.Generator` seeded per call, never from the global RNG,
so the same seed gives the same text whatever else the program does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.core.decoding_choices import TEMPERATURE, TOP_K, TOP_P
from aiayn.core.errors import DataError
from aiayn.model.decoder_only import DecoderOnlyLM
from aiayn.model.kv_cache import DecoderCache
from aiayn.runtime.steps import StepRunner, as_runner

log = logging.getLogger(__name__)


def filter_logits(logits: Tensor, top_k: int | None = None, top_p: float | None = None) -> Tensor:
    """Set to -inf the logits outside the top-k and outside the nucleus of mass top_p.

    Args:
        logits: (N, V) temperature-scaled logits.
        top_k: keep the k largest logits per row (None or 0: no limit).
        top_p: keep the most probable tokens whose cumulative probability first reaches
            top_p (the token that crosses it included; None or 1.0: no limit).

    Returns:
        (N, V) filtered logits (a new tensor); at least one token per row stays.
    """
    logits = logits.clone()
    if top_k is not None and 0 < top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (N, 1)
        logits[logits < kth] = float("-inf")
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        drop = probs.cumsum(dim=-1) - probs >= top_p  # the mass before the token already >= p
        drop[:, 0] = False
        logits.scatter_(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return logits


@dataclass(frozen=True)
class Sampling:
    """How each next token is drawn (checked when made).

    Args:
        temperature: > 0 divides the logits; 0 = greedy (arg-max).
        top_k, top_p: see `filter_logits` (None: no limit).
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        TEMPERATURE.check("temperature", self.temperature)  # the ranges: aiayn.core.decoding_choices
        if self.top_k is not None:
            TOP_K.check("top_k", self.top_k)
        if self.top_p is not None:
            TOP_P.check("top_p", self.top_p)


def sample_stream(
    model: DecoderOnlyLM | StepRunner,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    sampling: Sampling,
    seed: int | None = None,
    stop_ids: Iterable[int] | None = None,
) -> Iterator[int]:
    """Yield newly generated token ids one at a time, within the model's positions.

    Args:
        model: a `DecoderOnlyLM` (put in eval mode while generating), or a step runner of one
            (`aiayn.runtime.steps`), whose network generates.
        prompt_ids: the context; an empty prompt starts from `<bos>` (`model.config.bos_id`).
            A prompt longer than the model's `max_len` keeps its last `max_len` tokens (with a
            warning); an id outside the vocabulary is a `DataError`.
        max_new_tokens: the most tokens generated.
        sampling: temperature, top-k and top-p.
        seed: seeds a private `torch.Generator` (None: a random seed).
        stop_ids: generation ends after yielding one of these ids (default: the model's
            `<eos>`, `model.config.eos_id`).

    Generation also ends when the context fills the model's positions (`max_len`); going on
    beyond them is `aiayn.inference`'s generators' job.
    """
    model = as_runner(model).network
    max_len = model.config.max_len
    prompt = [int(i) for i in prompt_ids] or [model.config.bos_id]
    vocab_size = model.config.tgt_vocab_size
    outside = [i for i in prompt if not 0 <= i < vocab_size]
    if outside:  # checked here, where the ids enter: the model's passes check nothing
        raise DataError(f"prompt_ids: {outside[:5]} outside the model's vocabulary [0, {vocab_size})")
    if len(prompt) > max_len:
        log.warning("prompt of %d tokens truncated to its last %d (max_len)", len(prompt), max_len)
        prompt = prompt[-max_len:]
    stops = {model.config.eos_id} if stop_ids is None else set(stop_ids)
    device = next(model.parameters()).device
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)

    was_training = model.training
    model.eval()  # no dropout; grad mode is switched off per step, never across a `yield`
    try:
        cache = model.new_cache()
        tokens = torch.tensor([prompt], dtype=torch.long, device=device)  # (1, P): prefill
        for _ in range(max_new_tokens):
            next_id = _next_token(model, tokens, cache, sampling, generator)
            yield next_id
            if next_id in stops or cache.length >= max_len:
                return
            tokens = torch.tensor([[next_id]], dtype=torch.long, device=device)  # (1, 1)
    finally:
        model.train(was_training)


@torch.no_grad()
def _next_token(
    model: DecoderOnlyLM,
    tokens: Tensor,
    cache: DecoderCache,
    sampling: Sampling,
    generator: torch.Generator,
) -> int:
    """Feed (1, T) new tokens through the cached model and draw the next token id."""
    hidden = model(tokens, cache=cache, return_hidden=True)[:, -1]  # (1, D)
    logits = model.output_projection(hidden).float()  # (1, V)
    if sampling.temperature == 0:
        return int(logits.argmax(dim=-1))
    # Shifting by the row's maximum first leaves the softmax unchanged, but keeps a tiny
    # temperature from turning the largest logits into inf (and the probabilities into NaN):
    # as temperature -> 0 the shifted logits go to 0 for the arg-max and -inf elsewhere.
    shifted = logits - logits.amax(dim=-1, keepdim=True)  # (1, V), <= 0
    # a temperature below the smallest normal float32 would be 0 in it (0 / 0 = nan at the max)
    temperature = max(sampling.temperature, torch.finfo(shifted.dtype).tiny)
    probs = filter_logits(shifted / temperature, sampling.top_k, sampling.top_p).softmax(dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))

