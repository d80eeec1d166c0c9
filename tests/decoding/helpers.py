"""Tiny random models and batches for the decoding tests."""

import torch

from aiayn.data.special_tokens import EOS_ID, PAD_ID
from aiayn.model import DecoderOnlyLM, ModelConfig, Transformer


def tiny_transformer(seed: int = 0, vocab_size: int = 20, **overrides) -> Transformer:
    """A random tiny Transformer in eval mode (d_model 32, 1+2 layers)."""
    torch.manual_seed(seed)
    sizes = dict(d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=2, d_ff=64)
    config = ModelConfig.tiny(vocab_size=vocab_size, **(sizes | overrides))
    return Transformer(config).eval()


def tiny_lm(seed: int = 0, vocab_size: int = 20, **overrides) -> DecoderOnlyLM:
    torch.manual_seed(seed)
    sizes = dict(d_model=32, num_heads=2, num_decoder_layers=2, d_ff=64)
    return DecoderOnlyLM(ModelConfig.tiny(vocab_size=vocab_size, **(sizes | overrides))).eval()


def source_batch(lengths: list[int], vocab_size: int = 20, seed: int = 0) -> torch.Tensor:
    """(B, max length + 1) random sources of the given lengths + <eos>, right-padded."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths) + 1), PAD_ID, dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(4, vocab_size, (n,), generator=generator)
        src[i, n] = EOS_ID
    return src
