"""Tiny random models and batches for the decoding tests."""

import torch
from torch import nn

from aiayn.data.special_tokens import SpecialTokens
from aiayn.model import DecoderOnlyLM, ModelConfig, Transformer

DEFAULT_SPECIALS = SpecialTokens.of(ModelConfig())
"""The special ids of a model config that does not set them."""


def perturb_(model: nn.Module, scale: float = 0.5) -> nn.Module:
    """Add noise to every parameter: a freshly initialised model tends to repeat one token,
    a perturbed one gives varied outputs (and <eos> now and then)."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(scale * torch.randn_like(parameter))
    return model


def tiny_transformer(seed: int = 0, vocab_size: int = 20, **overrides) -> Transformer:
    """A random tiny Transformer in eval mode (d_model 32, 1+2 layers)."""
    torch.manual_seed(seed)
    sizes = dict(d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=2, d_ff=64,
                 tie_output=False)
    config = ModelConfig.tiny(vocab_size=vocab_size, **(sizes | overrides))
    return perturb_(Transformer(config)).eval()


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
