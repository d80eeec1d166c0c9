"""Shared builders for the model tests: tiny models and random token batches."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiayn.model import DecoderOnlyLM, EncoderOnly, ModelConfig, Transformer

VOCAB = 23
PAD = 0


def tiny_config(**overrides) -> ModelConfig:
    """`ModelConfig.tiny` with a small shared vocabulary and a short positional table."""
    sizes = {"vocab_size": VOCAB, "max_len": 32} | overrides
    return ModelConfig.tiny(**sizes)


def perturb_(model: nn.Module, seed: int = 0, scale: float = 0.1) -> nn.Module:
    """Add noise to every parameter, so LayerNorm gains/biases and zero-initialised biases
    are no longer their defaults (a wrong weight mapping can't hide behind 1s and 0s)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(scale * torch.randn(parameter.shape, generator=generator))
    return model


def build(kind: str, seed: int = 0, **overrides) -> nn.Module:
    """A perturbed tiny model in eval mode: kind is 'transformer', 'lm' or 'encoder'."""
    torch.manual_seed(seed)
    config = tiny_config(**overrides)
    if kind == "transformer":
        model = Transformer(config)
    elif kind == "lm":
        model = DecoderOnlyLM(config)
    elif kind == "encoder":
        model = EncoderOnly(config, num_classes=3)
    else:
        raise ValueError(kind)
    return perturb_(model, seed).eval()


def random_tokens(batch: int, length: int, seed: int = 0, low: int = 1, vocab: int = VOCAB) -> Tensor:
    """(batch, length) ids in [low, vocab): by default no padding."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, vocab, (batch, length), generator=generator)


def pad_to_lengths(tokens: Tensor, lengths: list[int]) -> Tensor:
    """Replace everything past `lengths[b]` in row b with PAD."""
    out = tokens.clone()
    for row, length in enumerate(lengths):
        out[row, length:] = PAD
    return out
