"""A tiny random model directory and helpers for the plot and explorer tests."""

from __future__ import annotations

import pytest
import torch

from aiayn import formats
from aiayn.data import Tokenizer, TokenizerPair
from aiayn.inference import load
from aiayn.model import ModelConfig, Transformer
from threads import one_thread  # noqa: F401 (an autouse fixture: one intra-op thread)

SOURCES = ["ein hund läuft", "zwei katzen", "der mann liest ein buch"]
TARGETS = ["a dog runs", "two cats", "the man reads a book"]


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """A model directory: a random tiny Transformer (2 heads, 2 encoder + 3 decoder layers)
    with a joint character tokenizer."""
    directory = tmp_path_factory.mktemp("plot_model")
    tokenizer = Tokenizer.train("char", SOURCES + TARGETS)
    torch.manual_seed(0)
    config = ModelConfig.tiny(
        vocab_size=tokenizer.vocab_size,
        d_model=32,
        num_heads=2,
        num_encoder_layers=2,
        num_decoder_layers=3,
        d_ff=64,
        max_len=40,
    )
    model = Transformer(config)
    with torch.no_grad():  # sharper, more varied attention than a fresh initialisation
        for parameter in model.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    formats.save_pretrained(model, directory)
    TokenizerPair(tokenizer, tokenizer).save(directory)
    return directory


def reference_maps(model_dir, source: str, target_ids: list[int]):
    """The model's own `attention_maps` for `source` and target ids, computed directly."""
    translator = load(model_dir, "cpu")
    tokenizer = translator.tokenizers.source
    config = translator.model.config
    src = torch.tensor([[*tokenizer.encode(source), config.eos_id]])
    tgt_in = torch.tensor([[config.bos_id, *target_ids]])
    translator.model.eval()
    return translator.model.attention_maps(src, tgt_in)
