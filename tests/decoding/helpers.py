"""Tiny random models and batches for the decoding tests, and a cache-free greedy search to
check `greedy_search` against."""

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from aiayn.data.special_tokens import SpecialTokens
from aiayn.decoding import GreedyOutput, output_limits
from aiayn.decoding.common import log_probs, never_generated
from aiayn.model import DecoderOnlyLM, ModelConfig, Transformer, padding_mask

DEFAULT_SPECIALS = SpecialTokens.of(ModelConfig())
"""The special ids of a model config that does not set them."""


def perturb_(model: nn.Module, scale: float = 0.5) -> nn.Module:
    """Add noise to every parameter: a freshly initialised model tends to repeat one token,
    a perturbed one gives varied outputs (and <eos> now and then)."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(scale * torch.randn_like(parameter))
    return model


def tiny_transformer(seed: int = 0, vocab_size: int = 20, noise: float = 0.5, **overrides) -> Transformer:
    """A random tiny Transformer in eval mode (d_model 32, 1+2 layers), `perturb_`ed by `noise`."""
    torch.manual_seed(seed)
    sizes = dict(d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=2, d_ff=64,
                 tie_output=False)
    config = ModelConfig.tiny(vocab_size=vocab_size, **(sizes | overrides))
    return perturb_(Transformer(config), noise).eval()


def tiny_lm(seed: int = 0, vocab_size: int = 20, **overrides) -> DecoderOnlyLM:
    """A random tiny decoder-only LM in eval mode."""
    torch.manual_seed(seed)
    sizes = dict(d_model=32, num_heads=2, num_decoder_layers=2, d_ff=64, tie_output=False)
    model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=vocab_size, **(sizes | overrides)))
    return perturb_(model).eval()


def source_batch(
    lengths: list[int], vocab_size: int = 20, seed: int = 0, specials: SpecialTokens = DEFAULT_SPECIALS
) -> torch.Tensor:
    """(B, max length + 1) random sources of the given lengths + <eos>, right-padded; the
    words are the ids that are not special."""
    generator = torch.Generator().manual_seed(seed)
    words = torch.tensor([i for i in range(vocab_size) if i not in specials.ids])
    src = torch.full((len(lengths), max(lengths) + 1), specials.pad_id, dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n] = words[torch.randint(len(words), (n,), generator=generator)]
        src[i, n] = specials.eos_id
    return src


def approx(expected):
    """Scores agree to float32 accuracy (the perturbed models have large logits)."""
    import pytest

    return pytest.approx(expected, rel=1e-5, abs=1e-4)


@torch.no_grad()
def uncached_greedy(
    model: Transformer, src: torch.Tensor, max_len_extra: int = 50, max_steps: int | None = None
) -> GreedyOutput:
    """Greedy search by the textbook definition, without the key/value cache: encode (B, S)
    `src` once, then re-run the decoder over the whole (B, t+1) prefix at every step t.

    Same limits, forbidden ids and `<eos>` handling as `greedy_search`; a row stops at its
    `<eos>` or its length limit.
    """
    config = model.config
    forbidden = never_generated(config.pad_id, config.bos_id, config.eos_id)
    limits = output_limits(src, config.pad_id, max_len_extra, max_steps, config.max_len).tolist()
    src_padding_mask = padding_mask(src, config.pad_id)  # (B, S)
    memory = model.encode(src, src_padding_mask)  # (B, S, D)
    prefix = torch.full((src.size(0), 1), config.bos_id, dtype=torch.long)  # (B, 1)
    tokens: list[list[int]] = [[] for _ in limits]
    scores = [0.0 for _ in limits]
    done = [False for _ in limits]
    for step in range(max(limits)):
        logits = model.decode(prefix, memory, src_padding_mask)[:, -1]  # (B, t+1, V) -> (B, V)
        best_logp, best = log_probs(logits, forbidden).max(dim=-1)  # (B,), (B,)
        for row, (token, logp) in enumerate(zip(best.tolist(), best_logp.tolist(), strict=True)):
            if done[row]:
                continue
            scores[row] += logp
            if token == config.eos_id:
                done[row] = True
            else:
                tokens[row].append(token)
                done[row] = step + 1 >= limits[row]
        if all(done):
            break
        prefix = torch.cat([prefix, best[:, None]], dim=1)  # (B, t+2); rows are independent
    return GreedyOutput(tokens, scores)


@contextlib.contextmanager
def without_eos(model: nn.Module) -> Iterator[nn.Module]:
    """Give `<eos>` the logit -inf inside the block: decoders then never stop early and run
    to their length limit (a fixed number of steps)."""
    eos_id = model.config.eos_id

    def forbid_eos(_module: nn.Module, _inputs: tuple, logits: torch.Tensor) -> torch.Tensor:
        return logits.index_fill(-1, torch.tensor([eos_id], device=logits.device), float("-inf"))

    handle = model.output_projection.register_forward_hook(forbid_eos)
    try:
        yield model
    finally:
        handle.remove()
