"""Text generation with a trained language model, streamed token by token.

`generate_stream` draws tokens through `aiayn.decoding.sampling.sample_stream`, which runs
the model step by step with the key/value cache. A model only knows positions up to the
block size it was trained on; when the context fills those, generation goes on from the
last `block_size // 2` tokens: they are fed again as a new prompt (one batched forward
pass refills the cache), and sampling continues. The same seed gives the same tokens.

`stream_text` turns the ids into text pieces as they arrive, holding a piece back while it
ends inside a multi-byte UTF-8 character (byte-level BPE tokens can split one).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence

from aiayn.data.tokenizer import Tokenizer
from aiayn.decoding.sampling import sample_stream
from aiayn.model.decoder_only import DecoderOnlyLM

MAX_PENDING_TOKENS = 4  # a UTF-8 character has at most 4 bytes, a token at least one
_SEED_STEP = 0x9E3779B97F4A7C15  # odd constant spreading the seeds of successive rounds


def context_length(model: DecoderOnlyLM) -> int:
    """Positions the model was trained on: `extra['block_size']` if recorded, else `max_len`."""
    extra = model.config.extra if isinstance(model.config.extra, dict) else {}
    block = extra.get("block_size")
    max_len = model.config.max_len
    return min(max_len, block) if isinstance(block, int) and block > 0 else max_len


def generate_stream(
    model: DecoderOnlyLM,
    prompt_ids: Sequence[int],
    max_new_tokens: int = 100,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    stop_ids: Iterable[int] | None = None,
    context: int | None = None,
) -> Iterator[int]:
    """Yield up to `max_new_tokens` generated ids, one at a time.

    Args:
        model: a `DecoderOnlyLM`.
        prompt_ids: the prompt; empty = start from `<bos>` (`model.config.bos_id`), as every
            training stream does.
        max_new_tokens: the most tokens generated (>= 0).
        temperature, top_k, top_p: see `aiayn.decoding.sampling` (temperature 0 = greedy).
        seed: the random seed (None: a fresh random one).
        stop_ids: generation ends after yielding one of these ids (default: the model's
            `<eos>`, `model.config.eos_id`).
        context: the most positions the model sees at once (default `context_length(model)`).
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    context = min(context or context_length(model), model.config.max_len)
    if context < 2:
        raise ValueError(f"the context must hold at least 2 positions, got {context}")
    stops = {model.config.eos_id} if stop_ids is None else set(stop_ids)
    seed = random.SystemRandom().randrange(2**63) if seed is None else seed
    history = [int(i) for i in prompt_ids] or [model.config.bos_id]
    keep, remaining, round_index = context, max_new_tokens, 0
    while remaining > 0:
        prompt = history[-keep:]
        room = context - len(prompt) + 1  # the last token drawn is never fed back
        round_seed = (seed + round_index * _SEED_STEP) % 2**63
        for token in sample_stream(
            model, prompt, min(remaining, room), temperature, top_k, top_p, round_seed, stops
        ):
            yield token
            history.append(token)
            remaining -= 1
            if token in stops:
                return
        keep, round_index = context // 2, round_index + 1


def generate(
    model: DecoderOnlyLM,
    prompt_ids: Sequence[int],
    max_new_tokens: int = 100,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    stop_ids: Iterable[int] | None = None,
    context: int | None = None,
) -> list[int]:
    """The generated ids (without the prompt) as a list; arguments as `generate_stream`."""
    return list(
        generate_stream(model, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, stop_ids, context)
    )


def stream_text(tokenizer: Tokenizer, ids: Iterable[int]) -> Iterator[str]:
    """Decode `ids` into text pieces as they come; the pieces join to `tokenizer.decode(ids)`."""
    pending: list[int] = []
    for token in ids:
        pending.append(token)
        piece = tokenizer.decode(pending)
        if piece.endswith("\ufffd") and len(pending) < MAX_PENDING_TOKENS:
            continue  # possibly the first bytes of a character whose rest is still to come
        pending = []
        if piece:
            yield piece
    if pending and (piece := tokenizer.decode(pending)):
        yield piece
