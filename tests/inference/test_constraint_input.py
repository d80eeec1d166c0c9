"""Constraint phrases -> token ids: the in-sentence form of an included phrase, and every
spelling of an excluded word in vocabulary pieces (word-level blocking)."""

from __future__ import annotations

import pytest

from aiayn.core.errors import ConfigError
from aiayn.data import Tokenizer
from aiayn.inference.constraint_input import PhraseEncoder

TEXTS = ["the dog runs.", "a dog, two dogs.", "the dog sits. the dog.", "do go, go dog."] * 50


@pytest.fixture(scope="module")
def bpe():
    return Tokenizer.train("bpe", TEXTS, vocab_size=320)


def test_an_excluded_word_is_blocked_in_every_spelling(bpe):
    encoder = PhraseEncoder(bpe)
    blocked = encoder.exclude("dog", "line 1")
    canonical = tuple(bpe.encode("dog"))
    assert blocked[0] == canonical
    spelled = {bpe.decode(list(ids)) for ids in blocked}
    assert all(text.strip().startswith("dog") for text in spelled)
    assert all(not text.strip()[3:4].isalnum() for text in spelled)  # nothing beyond the word but punctuation
    assert any(len(ids) > len(canonical) for ids in blocked)  # other segmentations, e.g. ▁do g
    pieces = {bpe.id_to_token(i) for ids in blocked for i in ids}
    learnt = {bpe.id_to_token(i) for i in range(bpe.vocab_size)}
    for piece in ("▁dog.", "▁dog,"):  # pieces that run on into punctuation
        assert (piece in pieces) == (piece in learnt)
    assert any(p in learnt for p in ("▁dog.", "▁dog,"))


def test_byte_level_bpe_includes_the_in_sentence_form():
    tokenizer = Tokenizer.train("byte_bpe", TEXTS, vocab_size=300)
    encoder = PhraseEncoder(tokenizer)
    include = encoder.include("dog", "line 1")
    assert tokenizer.decode(list(include)) == " dog"
    blocked = {tokenizer.decode(list(ids)) for ids in encoder.exclude("dog", "line 1")}
    assert {" dog", "dog"} <= blocked  # inside a sentence and at its start


def test_phrases_that_cannot_be_constraints(bpe):
    encoder = PhraseEncoder(bpe)
    with pytest.raises(ConfigError, match="line 3: the phrase '  ' has no tokens"):
        encoder.sentence(["  "], [], "line 3")
    with pytest.raises(ConfigError, match="line 2: an included phrase contains an excluded one"):
        encoder.sentence(["the dog"], ["dog"], "line 2")
    char = Tokenizer.train("char", ["abc"])
    with pytest.raises(ConfigError, match="only unknown tokens"):
        PhraseEncoder(char).sentence(["xyz"], [], "line 1")
