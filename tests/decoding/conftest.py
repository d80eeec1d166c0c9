"""Tiny models run fastest on one thread (and do not fight other jobs for the shared cores)."""

import pytest

from aiayn import formats
from threads import one_thread  # noqa: F401 (an autouse fixture: one intra-op thread)

SOURCES = ["ein hund läuft", "zwei katzen", "", "der mann liest ein buch", "ja"]
TARGETS = ["a dog runs", "two cats", "", "the man reads a book", "yes"]


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """A model directory: a random tiny Transformer with a joint character tokenizer."""
    from aiayn.data import Tokenizer, TokenizerPair

    from .helpers import tiny_transformer

    directory = tmp_path_factory.mktemp("model")
    tokenizer = Tokenizer.train("char", SOURCES + TARGETS)
    model = tiny_transformer(0, vocab_size=tokenizer.vocab_size, max_len=48)
    formats.save_pretrained(model, directory)
    TokenizerPair(tokenizer, tokenizer).save(directory)
    return directory
