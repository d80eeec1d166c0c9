"""Tiny random model directories (a translation model and a language model) for the service
tests. Tests that need the `serve` extra skip without it (`pytest.importorskip`)."""

from __future__ import annotations

import pytest
import torch

from aiayn import formats
from aiayn.data import Tokenizer, TokenizerPair
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import JOINT_FILE
from aiayn.model import DecoderOnlyLM, ModelConfig, Transformer
from inference.ensemble_dirs import ensemble_dirs  # noqa: F401 (a fixture: the ensemble tests' models)
from threads import one_thread  # noqa: F401 (an autouse fixture: one intra-op thread)

SOURCES = ["ein hund läuft", "zwei katzen", "der mann liest ein buch", "ja"]
TEXT = "the cat sat on the mat. a dog runs in the park."


def perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """Sharper, more varied attention and outputs than a fresh initialisation."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    return model


@pytest.fixture(scope="session")
def translation_dir(tmp_path_factory):
    """A random tiny Transformer (2 heads, 2 encoder + 3 decoder layers), joint char tokenizer."""
    directory = tmp_path_factory.mktemp("serve_translation")
    tokenizer = Tokenizer.train("char", [*SOURCES, "a dog runs", "two cats", "the man reads a book"])
    torch.manual_seed(0)
    config = ModelConfig.tiny(
        vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2, num_encoder_layers=2,
        num_decoder_layers=3, d_ff=64, max_len=40,
    )
    formats.save_pretrained(perturbed(Transformer(config)), directory)
    TokenizerPair(tokenizer, tokenizer).save(directory)
    return directory


@pytest.fixture(scope="session")
def reordered_specials_dir(tmp_path_factory):
    """A random tiny Transformer whose special ids are not the usual 0..3 roles: <pad> is id 3,
    <bos> 2, <eos> 1, <unk> 0 (stored in its config, as any tokenizer's ids may be)."""
    directory = tmp_path_factory.mktemp("serve_reordered")
    specials = SpecialTokens(pad_id=3, bos_id=2, eos_id=1, unk_id=0)
    tokenizer = Tokenizer(Tokenizer.train("char", SOURCES).hf, specials)
    torch.manual_seed(2)
    config = ModelConfig.tiny(
        vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2, num_encoder_layers=1,
        num_decoder_layers=2, d_ff=64, max_len=40, **specials.as_dict(),
    )
    formats.save_pretrained(perturbed(Transformer(config)), directory)
    TokenizerPair(tokenizer, tokenizer).save(directory)
    return directory


@pytest.fixture(scope="session")
def lm_dir(tmp_path_factory):
    """A random tiny decoder-only LM (char tokenizer) whose config has no unknown token."""
    directory = tmp_path_factory.mktemp("serve_lm")
    tokenizer = Tokenizer.train("char", [TEXT])
    torch.manual_seed(1)
    config = ModelConfig.tiny(
        vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2, num_decoder_layers=2, d_ff=64,
        max_len=48, unk_id=None,
    )
    formats.save_pretrained(perturbed(DecoderOnlyLM(config)), directory)
    tokenizer.save(directory / JOINT_FILE)
    return directory
