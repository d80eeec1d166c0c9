"""A language model's attention (`lm_attention_example`, `DecoderOnlyLM.attention_maps`):
causal, one distribution per query, and what a position sees does not depend on what follows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aiayn.core.errors import ConfigError
from aiayn.data import Tokenizer
from aiayn.model import DecoderOnlyLM, ModelConfig
from aiayn.plots.attention_data import lm_attention_example

TEXT = "the cat sat on the mat"


@pytest.fixture(scope="module")
def lm():
    tokenizer = Tokenizer.train("char", [TEXT])
    torch.manual_seed(0)
    config = ModelConfig.tiny(vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2, num_decoder_layers=3,
                              d_ff=64, max_len=24)
    model = DecoderOnlyLM(config)
    with torch.no_grad():  # sharper, more varied attention than a fresh initialisation
        for parameter in model.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    return model.eval(), tokenizer


def test_maps_are_causal_distributions_independent_of_later_tokens(lm):
    model, tokenizer = lm
    example = lm_attention_example(model, tokenizer, TEXT)
    ids = tokenizer.encode(TEXT)
    assert example.decoder.shape == (3, 2, len(ids), len(ids))
    assert example.encoder.shape[0] == 0 and example.cross.shape[0] == 0 and example.num_heads == 2
    assert example.target_tokens == [tokenizer.id_to_token(i) for i in ids] and example.source_tokens == []
    np.testing.assert_allclose(example.decoder.sum(axis=-1), 1.0, atol=1e-5)
    assert np.triu(example.decoder, k=1).max() == 0.0
    # causal: the first 7 positions attend exactly as they do when the text stops there
    prefix = lm_attention_example(model, tokenizer, TEXT[:7])
    np.testing.assert_allclose(example.decoder[:, :, :7, :7], prefix.decoder, atol=1e-5)
    assert not np.allclose(example.decoder[:, 0], example.decoder[:, 1], atol=1e-3)  # heads differ


def test_empty_and_too_long_texts_are_errors(lm):
    model, tokenizer = lm
    with pytest.raises(ConfigError, match="empty"):
        lm_attention_example(model, tokenizer, "")
    with pytest.raises(ConfigError, match="at most 24"):
        lm_attention_example(model, tokenizer, "a" * 25)
