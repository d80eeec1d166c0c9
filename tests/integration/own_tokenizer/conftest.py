"""Hugging Face tokenizer files made inside the tests (nothing is ever downloaded)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import pytest
import tokenizers
import torch
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

END_OF_TEXT = "<|endoftext|>"


def gpt2_layout(texts: Iterable[str], num_merges: int = 200) -> tokenizers.Tokenizer:
    """A byte-level BPE tokenizer laid out as GPT-2's `tokenizer.json`: the 256 byte symbols
    first (ids 0..3 are the characters `!"#$`), then the merges, and `<|endoftext|>`, its only
    special token, at the last id; no padding and no unknown token."""
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    hf.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=256 + num_merges,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(texts, trainer=trainer)
    hf.add_special_tokens([END_OF_TEXT])
    assert [hf.id_to_token(i) for i in range(4)] == ["!", '"', "#", "$"]
    assert hf.token_to_id(END_OF_TEXT) == hf.get_vocab_size(with_added_tokens=True) - 1
    return hf


def save(hf: tokenizers.Tokenizer, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    hf.save(str(path))
    return path


@pytest.fixture(autouse=True)
def one_thread_and_clean_logging():
    """Tiny models run fastest on one thread; in-process CLI runs add log handlers (train.log)
    and set the thread count: both are undone after each test."""
    logger = logging.getLogger("aiayn")
    handlers, level, threads = list(logger.handlers), logger.level, torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    for handler in logger.handlers[:]:
        if handler not in handlers:
            logger.removeHandler(handler)
            handler.close()
    logger.setLevel(level)
    torch.set_num_threads(threads)
